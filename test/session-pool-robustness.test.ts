import { describe, expect, it } from 'vitest';
import { JobAbortedError, SessionPool, WorkersDownError } from '../src/inference-server/session-pool.js';

const SCRIPTED_WORKER = new URL('./helpers/scripted-session-worker.mjs', import.meta.url);
const job = () => [{ name: 'input', datatype: 'UINT8' as const, shape: [1], data: new ArrayBuffer(1) }];

/** A pool of scripted workers (see helpers/scripted-session-worker.mjs) that logs into `lines`. */
function scriptedPool(mode: string, extra: { workers?: number; maxQueue?: number; onServingChange?: (serving: boolean) => void } = {}) {
  const lines: { at: number; line: string }[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const pool = new SessionPool({
    modelFile: mode,
    providers: ['cpu'],
    workers: extra.workers ?? 1,
    intraOpThreads: 1,
    maxQueue: extra.maxQueue ?? 2,
    restartBackoff: { initialMs: 100, maxMs: 800 },
    workerUrl: SCRIPTED_WORKER,
    ...(extra.onServingChange ? { onServingChange: extra.onServingChange } : {}),
    log: (line) => {
      lines.push({ at: performance.now(), line });
      for (const waiter of waiters) if (lines.length >= waiter.count) waiter.resolve();
    },
  });
  /** Resolves once `count` lines have been logged. */
  const logged = (count: number) => new Promise<void>((resolve) => (lines.length >= count ? resolve() : waiters.push({ count, resolve })));
  return { pool, lines, logged };
}

/** The answer, or 'still waiting' after `ms`. */
const within = <T>(ms: number, answer: Promise<T>) => Promise.race([answer, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms).unref())]);

describe('session pool: workers that die or hang', () => {
  it('a worker that keeps crashing is restarted after growing delays (100, 200, 400, 800, 800, 800 ms), not in a loop', async () => {
    const { pool, lines, logged } = scriptedPool('crash-after-ready');
    await pool.start();
    await logged(6);
    await pool.close(1_000);
    const delays = lines.slice(0, 6).map(({ line }) => Number(/restarting in (\d+) ms/.exec(line)?.[1]));
    expect(delays).toEqual([100, 200, 400, 800, 800, 800]);
    // Each restart waited its delay: the gap between one crash and the next is at least the delay before it.
    for (let i = 1; i < 6; i++) expect(lines[i]!.at - lines[i - 1]!.at).toBeGreaterThanOrEqual(delays[i - 1]! * 0.9);
  });

  it('with no live worker, jobs are refused at once (queued ones too) and the pool says it cannot serve until a worker is back', async () => {
    const serving: boolean[] = [];
    let servingAgain!: () => void;
    const back = new Promise<void>((resolve) => (servingAgain = resolve));
    const { pool, logged } = scriptedPool('crash-on-run', {
      maxQueue: 2,
      onServingChange: (s) => {
        serving.push(s);
        if (s && serving.length > 1) servingAgain();
      },
    });
    await pool.start();
    expect(serving).toEqual([true]);
    const crashing = pool.run(job(), ['output']).catch((e: Error) => e);
    const queued = pool.run(job(), ['output']).catch((e: Error) => e);
    expect(await within(2_000, crashing)).toMatchObject({ message: 'inference worker exited with code 1' });
    // The queued job is not left waiting for its deadline.
    expect(await within(2_000, queued)).toBeInstanceOf(WorkersDownError);
    expect(await pool.run(job(), ['output']).catch((e: Error) => e)).toBeInstanceOf(WorkersDownError);
    expect(serving).toEqual([true, false]);
    expect(pool.workers).toBe(0);
    await logged(1);
    // The replacement comes after the backoff, and the pool can serve again.
    // Event-based: the pool says it can serve again.
    expect(await within(10_000, back)).toBeUndefined();
    expect(serving).toEqual([true, false, true]);
    expect(pool.workers).toBe(1);
    await pool.close(1_000);
  });

  it('close() is bounded: a job that never finishes is refused after the grace, and close() resolves', async () => {
    const { pool } = scriptedPool('hang-on-run');
    await pool.start();
    const stuck = pool.run(job(), ['output']).catch((e: Error) => e);
    const started = performance.now();
    expect(await within(10_000, pool.close(300))).toBeUndefined();
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(await stuck).toBeInstanceOf(JobAbortedError);
    expect(pool.workers).toBe(0);
  });
});
