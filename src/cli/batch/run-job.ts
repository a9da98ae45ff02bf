import { mkdir, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BgcutApiError, type BgcutClient, type RemoveBackgroundOptions } from '../../client/index.js';
import type { BatchItem } from './inputs.js';
import type { ProgressCounts } from './progress.js';
import type { BatchOptions, BatchResult } from './run.js';

const OPTION_FIELDS = { format: 'format', channels: 'channels', bgColor: 'bg_color', crop: 'crop', cropMargin: 'crop_margin', scale: 'scale', position: 'position', addShadow: 'add_shadow', shadowOpacity: 'shadow_opacity', size: 'size', roi: 'roi', outputSize: 'output_size', padding: 'padding', model: 'model' } as const;

/**
 * `--job`: the batch as server-side jobs of up to `jobSize` images each (`/v1/jobs`), one after
 * another; the progress bar follows each job's status, and each result is downloaded and written
 * (to a temporary file renamed into place, as runBatch does) once its job has ended.
 */
export async function runBatchAsJobs(client: BgcutClient, items: BatchItem[], options: BatchOptions & { jobSize: number }, counts: ProgressCounts): Promise<BatchResult> {
  const failures = new Map<string, string[]>();
  const fail = (code: string, input: string) => failures.set(code, [...(failures.get(code) ?? []), input]);
  const fields: Record<string, string> = {};
  for (const [option, field] of Object.entries(OPTION_FIELDS)) {
    const value = options.options[option as keyof RemoveBackgroundOptions];
    if (value !== undefined) fields[field] = String(value);
  }
  for (let start = 0; start < items.length && !options.signal.aborted; start += options.jobSize) {
    const chunk = items.slice(start, start + options.jobSize);
    const before = { done: counts.done, failed: counts.failed };
    let job: { id: string };
    try {
      job = await client.jobs.create(chunk.map((item) => item.input), { options: fields, signal: options.signal });
    } catch (error) {
      if (options.signal.aborted) break;
      const code = error instanceof BgcutApiError ? String(error.code) : 'network';
      for (const item of chunk) fail(code, item.input);
      counts.failed += chunk.length;
      options.onProgress(counts);
      continue;
    }
    const status = await client.jobs.wait(job.id, {
      intervalMs: 500,
      signal: options.signal,
      onProgress: (s) => {
        counts.done = before.done + s.progress.done;
        counts.failed = before.failed + s.progress.failed + s.progress.canceled;
        options.onProgress(counts);
      },
    });
    for (const image of status.images) {
      const item = chunk[image.n]!;
      if (image.state !== 'done') {
        fail(image.error?.code ?? image.state, item.input);
        continue;
      }
      const { image: bytes } = await client.jobs.result(job.id, image.n, { signal: options.signal });
      const target = path.join(options.outDir, item.output);
      await mkdir(path.dirname(target), { recursive: true });
      const partial = `${target}.partial-${process.pid}`;
      try {
        await writeFile(partial, bytes);
        await rename(partial, target);
      } catch (error) {
        await unlink(partial).catch(() => {});
        counts.done--;
        counts.failed++;
        fail('io', item.input);
      }
    }
  }
  return { ...counts, skipped: 0, failures };
}
