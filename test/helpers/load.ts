/**
 * Steady load for fault runs: `workers` clients each sending one cutout after another until
 * stopped, every answer recorded with its time, status and problem code.
 */
export interface Answer {
  /** ms since the load started, when the request was sent and when it was answered. */
  sentAt: number;
  at: number;
  status: number | 'error';
  code?: string;
}

export interface Load {
  answers: Answer[];
  /** ms since the load started, on the clock of `sentAt` and `at`. */
  now(): number;
  /** Stops sending; resolves once every request in progress is answered. */
  stop(): Promise<Answer[]>;
}

export function startLoad(options: { url: string; key: string; body: Buffer; contentType: string; workers: number; timeoutMs?: number }): Load {
  const answers: Answer[] = [];
  const started = performance.now();
  let stopped = false;
  const worker = async () => {
    while (!stopped) {
      const sentAt = performance.now() - started;
      try {
        const response = await fetch(options.url, {
          method: 'POST',
          headers: { 'x-api-key': options.key, 'content-type': options.contentType },
          body: options.body,
          signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
        });
        const text = Buffer.from(await response.arrayBuffer());
        let code: string | undefined;
        if (response.headers.get('content-type') === 'application/problem+json') code = (JSON.parse(text.toString()) as { code: string }).code;
        answers.push({ sentAt, at: performance.now() - started, status: response.status, ...(code ? { code } : {}) });
        // A refusal comes back at once: do not spin on it.
        if (response.status !== 200) await new Promise((r) => setTimeout(r, 100));
      } catch {
        answers.push({ sentAt, at: performance.now() - started, status: 'error' });
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  const running = Array.from({ length: options.workers }, worker);
  return {
    answers,
    now: () => performance.now() - started,
    async stop() {
      stopped = true;
      await Promise.all(running);
      return answers;
    },
  };
}

/** `{ "200": 12, "503 inference_unavailable": 3 }` */
export function tally(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of answers) {
    const label = a.code ? `${a.status} ${a.code}` : String(a.status);
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
}
