import { mkdir, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AuthenticationError, BgcutApiError, type BgcutClient, type RemoveBackgroundOptions } from '../../client/index.js';
import type { BatchItem } from './inputs.js';
import type { ProgressCounts } from './progress.js';

export interface BatchOptions {
  outDir: string;
  concurrency: number;
  options: RemoveBackgroundOptions;
  signal: AbortSignal;
  onProgress: (counts: ProgressCounts) => void;
}

export interface BatchResult extends ProgressCounts {
  skipped: number;
  /** Failed inputs by problem code (or `network`, `timeout`, `io` ...). */
  failures: Map<string, string[]>;
  /** Set when the batch stopped early: every remaining file would fail the same way. */
  stoppedBy?: string;
}

/** Inputs whose output is already written, and those still to do. */
export async function splitDone(items: BatchItem[], outDir: string): Promise<{ done: BatchItem[]; todo: BatchItem[] }> {
  const done: BatchItem[] = [];
  const todo: BatchItem[] = [];
  for (const item of items) {
    const info = await stat(path.join(outDir, item.output)).catch(() => undefined);
    (info && info.size > 0 ? done : todo).push(item);
  }
  return { done, todo };
}

/**
 * Processes the items `concurrency` at a time. Each result is written to a temporary file and
 * renamed into place, so an output that exists is complete: a re-run skips exactly the work done.
 */
export async function runBatch(client: BgcutClient, items: BatchItem[], options: BatchOptions, counts: ProgressCounts): Promise<BatchResult> {
  const failures = new Map<string, string[]>();
  let next = 0;
  let stoppedBy: string | undefined;
  const stop = new AbortController();
  const signal = AbortSignal.any([options.signal, stop.signal]);

  const worker = async () => {
    while (next < items.length && !signal.aborted) {
      const item = items[next++]!;
      try {
        const cutout = await client.removeBackground(item.input, { ...options.options, signal });
        const target = path.join(options.outDir, item.output);
        await mkdir(path.dirname(target), { recursive: true });
        const partial = `${target}.partial-${process.pid}`;
        try {
          await writeFile(partial, cutout.image);
          await rename(partial, target);
        } catch (error) {
          await unlink(partial).catch(() => {});
          throw error;
        }
        counts.done++;
      } catch (error) {
        if (signal.aborted) break;
        const code = codeOf(error);
        failures.set(code, [...(failures.get(code) ?? []), item.input]);
        counts.failed++;
        // A refused key refuses every file: stop rather than fail them one by one.
        if (error instanceof AuthenticationError) {
          stoppedBy = `${error.code}: ${error.problem.detail}`;
          stop.abort();
        }
      }
      options.onProgress(counts);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, items.length) }, worker));
  return { ...counts, skipped: 0, failures, ...(stoppedBy ? { stoppedBy } : {}) };
}

function codeOf(error: unknown): string {
  if (error instanceof BgcutApiError) return String(error.code);
  const name = (error as Error)?.name;
  if (name === 'BgcutTimeoutError') return 'timeout';
  if (name === 'BgcutConnectionError') return 'connection_error';
  if ((error as NodeJS.ErrnoException)?.code) return `io_${(error as NodeJS.ErrnoException).code!.toLowerCase()}`;
  return 'error';
}
