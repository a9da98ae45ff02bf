/**
 * The abort storm, shared by `npm test` (test/abort-storm.test.ts, a short one) and
 * `npm run stress` (1 000 requests): requests over raw sockets that the client drops at random
 * points, during the headers, mid-upload, while waiting for an inference slot and during
 * inference. Afterwards nothing may be held, and no inference may have run for a request
 * whose client had gone before it left the queue.
 */
import net from 'node:net';
import { metricValue } from './fuzz.js';

export type AbortPhase = 'headers' | 'upload' | 'queued' | 'inference';

export interface StormOptions {
  /** Base URL of the API, e.g. http://127.0.0.1:1234 */
  baseUrl: string;
  path: string;
  key: string;
  /** A valid multipart body with a small real image, and its content type. */
  body: Buffer;
  contentType: string;
  requests: number;
  /** Requests open at once. */
  concurrency: number;
  /** Upper end of the random wait before dropping a request 'during inference', in ms. */
  inferenceAbortMs: number;
  random?: () => number;
}

export interface StormResult {
  sent: Record<AbortPhase, number>;
  /** Answers that arrived before the client dropped the connection, by status. */
  answered: Record<string, number>;
  /** 'queued' and 'inference' requests dropped after their whole body was sent. */
  droppedAfterUpload: { queued: number; inference: number };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function abortStorm(options: StormOptions): Promise<StormResult> {
  const random = options.random ?? Math.random;
  const url = new URL(options.path, options.baseUrl);
  const head = Buffer.from(
    `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nX-API-KEY: ${options.key}\r\n` +
      `Content-Type: ${options.contentType}\r\nContent-Length: ${options.body.length}\r\nConnection: close\r\n\r\n`,
  );
  const phases: AbortPhase[] = ['headers', 'upload', 'queued', 'inference'];
  const result: StormResult = {
    sent: { headers: 0, upload: 0, queued: 0, inference: 0 },
    answered: {},
    droppedAfterUpload: { queued: 0, inference: 0 },
  };

  async function one(): Promise<void> {
    const phase = phases[Math.floor(random() * phases.length)]!;
    result.sent[phase]++;
    const socket = net.connect(Number(url.port), url.hostname);
    socket.on('error', () => {});
    let answer = '';
    let ended = false;
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('close', () => (ended = true));
    await new Promise<void>((resolve) => {
      socket.once('connect', resolve);
      socket.once('close', resolve);
    });
    if (phase === 'headers') {
      socket.write(head.subarray(0, Math.floor(random() * head.length)));
      await sleep(random() * 20);
    } else if (phase === 'upload') {
      socket.write(head);
      socket.write(options.body.subarray(0, Math.floor(random() * options.body.length)));
      await sleep(random() * 50);
    } else {
      socket.write(head);
      socket.write(options.body);
      // 'queued': dropped soon after the upload, while others hold the inference slots;
      // 'inference': at any point of a whole cutout.
      const wait = phase === 'queued' ? 20 + random() * 80 : random() * options.inferenceAbortMs;
      const deadline = Date.now() + wait;
      while (!ended && Date.now() < deadline) await sleep(Math.min(10, deadline - Date.now()));
    }
    if (ended || /^HTTP\/1\.1 \d{3}/.test(answer)) {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 'closed';
      result.answered[status] = (result.answered[status] ?? 0) + 1;
    } else if (phase === 'queued' || phase === 'inference') {
      result.droppedAfterUpload[phase]++;
    }
    socket.destroy();
  }

  let next = 0;
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (next < options.requests) {
        next++;
        await one();
      }
    }),
  );
  return result;
}

export interface Holdings {
  inFlight: number;
  slots: number;
  slotWaiters: number;
  pixels: number;
}

/** What the API's metrics say it holds. */
export function holdings(apiMetrics: string): Holdings {
  return {
    inFlight: metricValue(apiMetrics, 'bgcut_requests_in_flight'),
    slots: metricValue(apiMetrics, 'bgcut_inference_slots_in_use'),
    slotWaiters: metricValue(apiMetrics, 'bgcut_inference_slots_waiting'),
    pixels: metricValue(apiMetrics, 'bgcut_pixels_in_process'),
  };
}

/** Inferences that ran (session.run finished) on an inference server, from its metrics. */
export async function inferenceRuns(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return metricValue(text, 'bgcut_inference_run_seconds_count');
}

/** Polls until `check` holds or `ms` pass; returns the last value. */
export async function settle<T>(read: () => Promise<T>, check: (value: T) => boolean, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  let value = await read();
  while (!check(value)) {
    if (Date.now() >= deadline) throw new Error(`not settled after ${ms} ms: the last value read was ${JSON.stringify(value)}`);
    await sleep(250);
    value = await read();
  }
  return value;
}
