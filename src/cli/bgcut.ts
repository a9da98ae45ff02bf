#!/usr/bin/env node
/**
 * bgcut: the API from the command line.
 *
 *   bgcut remove <files | folders | globs>... --out DIR [--concurrency N] [--format png|webp|jpg|avif]
 *                [--size preview|full|auto] [--bg-color C] [--crop] [--crop-margin M] [--model NAME]
 *                [--api-url URL] [--overwrite]
 *
 * The API key comes from BGCUT_API_KEY only (never a flag: flags end up in shell history and in
 * `ps`). The URL from --api-url or BGCUT_API_URL. Outputs that exist are skipped, so an
 * interrupted run resumes where it stopped. Exit status: 0 all done, 1 some failed, 2 usage.
 */
import { fileURLToPath } from 'node:url';
import { existsSync, realpathSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BgcutClient, type RemoveBackgroundOptions } from '../client/index.js';
import { expandInputs } from './batch/inputs.js';
import { BatchProgress, type ProgressCounts } from './batch/progress.js';
import { runBatch, splitDone, type BatchResult } from './batch/run.js';
import { runBatchAsJobs } from './batch/run-job.js';

const USAGE = `usage: bgcut remove <files | folders | globs>... --out DIR [options]

  --out DIR            where the results go (folders keep their structure below it)
  --concurrency N      images in flight at once (default 4, at most 64)
  --format F           png (default), webp, jpg, avif, or zip (color.jpg + alpha.png)
  --size S             auto (default), full, hd, medium or preview
  --bg-color C         a background colour instead of transparency
  --crop               crop to the foreground; --crop-margin 10px, 5%, "10px 5%" or "t r b l"
  --scale P            resize the subject to fit P (10%-100%) of the canvas
  --position P         original, center, "x%" or "x% y%": where the subject goes
  --shadow             a soft drop shadow from the mask; --shadow-opacity 0-100 (default 50)
  --roi "x1 y1 x2 y2"  only this region (px or %) may be foreground
  --hints FILE         keep/remove strokes (PNG: white keep, black remove, transparent none),
                       sent with every image (one photo, or photos framed alike); not with --job
  --bg-image F|URL     a photo behind the cutout (a file, or an http(s) URL the API fetches), cover-fit
  --output-size WxH    the exact output canvas: the subject is fitted into it; --padding 10%, "40px 20px"
  --model NAME         a model the server offers
  --api-url URL        the API (default BGCUT_API_URL, else http://localhost:3000)
  --overwrite          process again files whose output exists (default: skip them)
  --job                send the images as server-side jobs (/v1/jobs) instead of one request each
  --job-size N         images per job with --job (default 50; at most the plan's batch)

The API key is read from BGCUT_API_KEY.`;

const FORMATS = ['png', 'webp', 'jpg', 'avif', 'zip'] as const;
const SIZES = ['preview', 'medium', 'hd', 'full', 'auto'] as const;

class UsageError extends Error {}

/** The --hints file, read once (at most 8 MiB, the API's limit). */
async function readHints(file: string): Promise<Uint8Array> {
  const { readFile, stat } = await import('node:fs/promises');
  const info = await stat(file).catch(() => undefined);
  if (!info?.isFile()) throw new UsageError(`--hints: no file ${file}`);
  if (info.size > 8 * 1024 * 1024) throw new UsageError('--hints: the file is larger than 8 MiB');
  return readFile(file);
}

function shadowOpacity(text: string): number {
  const value = Number(text);
  if (!/^\d{1,3}$/.test(text) || value > 100) throw new UsageError('--shadow-opacity must be an integer from 0 to 100');
  return value;
}

interface Streams {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env, streams: Streams = process): Promise<number> {
  const say = (line: string) => streams.stderr.write(`${line}\n`);
  try {
    return await remove(argv, env, streams, say);
  } catch (error) {
    if (error instanceof UsageError) {
      say(`bgcut: ${error.message}\n\n${USAGE}`);
      return 2;
    }
    say(`bgcut: ${(error as Error).message}`);
    return 1;
  }
}

async function remove(argv: string[], env: NodeJS.ProcessEnv, streams: Streams, say: (line: string) => void): Promise<number> {
  if (argv.some((a) => /^--?(api-?key|key)(=|$)/i.test(a))) {
    throw new UsageError('the API key is read from BGCUT_API_KEY only, never from a flag (flags end up in shell history and process lists)');
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        out: { type: 'string', short: 'o' },
        concurrency: { type: 'string', short: 'c', default: '4' },
        format: { type: 'string', default: 'png' },
        size: { type: 'string' },
        'bg-color': { type: 'string' },
        crop: { type: 'boolean' },
        'crop-margin': { type: 'string' },
        roi: { type: 'string' },
        hints: { type: 'string' },
        'bg-image': { type: 'string' },
        'output-size': { type: 'string' },
        padding: { type: 'string' },
        scale: { type: 'string' },
        position: { type: 'string' },
        shadow: { type: 'boolean' },
        'shadow-opacity': { type: 'string' },
        model: { type: 'string' },
        'api-url': { type: 'string' },
        overwrite: { type: 'boolean', default: false },
        job: { type: 'boolean', default: false },
        'job-size': { type: 'string', default: '50' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    streams.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [command, ...inputs] = positionals;
  if (command !== 'remove') throw new UsageError(command ? `unknown command "${command}"` : 'no command');
  if (inputs.length === 0) throw new UsageError('no input files, folders or globs');
  if (!values.out) throw new UsageError('--out DIR is required');
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) throw new UsageError('--concurrency must be an integer from 1 to 64');
  const jobSize = Number(values['job-size']);
  if (!Number.isInteger(jobSize) || jobSize < 1 || jobSize > 10_000) throw new UsageError('--job-size must be an integer from 1 to 10000');
  const format = values.format as (typeof FORMATS)[number];
  if (!FORMATS.includes(format)) throw new UsageError(`--format must be one of ${FORMATS.join(', ')}`);
  if (values.size !== undefined && !SIZES.includes(values.size as never)) throw new UsageError(`--size must be one of ${SIZES.join(', ')}`);
  if (values.hints !== undefined && values.job) throw new UsageError('--hints is not taken by jobs: leave out --job');
  const apiKey = env.BGCUT_API_KEY;
  if (!apiKey) throw new UsageError('set BGCUT_API_KEY to your API key');
  const hints = values.hints === undefined ? undefined : await readHints(values.hints);

  const options: RemoveBackgroundOptions = {
    format,
    ...(values.size ? { size: values.size as (typeof SIZES)[number] } : {}),
    ...(values['bg-color'] ? { bgColor: values['bg-color'] } : {}),
    ...(values.crop ? { crop: true } : {}),
    ...(values['crop-margin'] ? { cropMargin: values['crop-margin'] } : {}),
    ...(values.roi ? { roi: values.roi } : {}),
    ...(hints ? { hints } : {}),
    ...(values.scale ? { scale: values.scale } : {}),
    ...(values.position ? { position: values.position } : {}),
    ...(values.shadow ? { addShadow: true } : {}),
    ...(values['shadow-opacity'] !== undefined ? { shadowOpacity: shadowOpacity(values['shadow-opacity']) } : {}),
    ...(values['bg-image'] ? { bgImage: /^https?:\/\//i.test(values['bg-image']) ? { url: values['bg-image'] } : values['bg-image'] } : {}),
    ...(values['output-size'] ? { outputSize: values['output-size'] } : {}),
    ...(values.padding ? { padding: values.padding } : {}),
    ...(values.model ? { model: values.model } : {}),
  };
  if (values['bg-image'] && values.job) throw new UsageError('--bg-image is not available with --job');
  if (values['bg-image'] && !/^https?:\/\//i.test(values['bg-image']) && !existsSync(values['bg-image'])) throw new UsageError(`--bg-image: no file ${values['bg-image']}`);
  if (values.padding && !values['output-size']) throw new UsageError('--padding needs --output-size');
  const { items, unmatched } = await expandInputs(inputs, format);
  for (const pattern of unmatched) say(`bgcut: nothing matches ${pattern}`);
  if (items.length === 0) {
    say('bgcut: no images to process');
    return unmatched.length > 0 ? 1 : 0;
  }
  const { done, todo } = values.overwrite ? { done: [], todo: items } : await splitDone(items, values.out);
  if (done.length > 0) say(`bgcut: ${done.length} of ${items.length} already done in ${values.out}, skipped (--overwrite to redo)`);
  if (todo.length === 0) return 0;

  const counts: ProgressCounts = { done: 0, failed: 0, total: todo.length, retries: 0 };
  const client = new BgcutClient({
    apiKey,
    ...(values['api-url'] ?? env.BGCUT_API_URL ? { baseUrl: values['api-url'] ?? env.BGCUT_API_URL } : {}),
    onRetry: () => counts.retries++,
  });
  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const progress = new BatchProgress(streams.stderr, todo.length);
  let result: BatchResult;
  try {
    const batch = { outDir: values.out, concurrency, options, signal: interrupt.signal, onProgress: (c: ProgressCounts) => progress.update(c) };
    result = values.job ? await runBatchAsJobs(client, todo, { ...batch, jobSize }, counts) : await runBatch(client, todo, batch, counts);
  } finally {
    progress.update(counts);
    progress.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  say(summary(result, done.length, values.out));
  if (interrupt.signal.aborted) {
    say('bgcut: interrupted; run the same command again to resume');
    return 130;
  }
  return result.failed > 0 || unmatched.length > 0 ? 1 : 0;
}

function summary(result: BatchResult, skipped: number, outDir: string): string {
  const lines = [`bgcut: ${result.done} done, ${result.failed} failed${skipped ? `, ${skipped} skipped (already done)` : ''}; results in ${outDir}`];
  if (result.stoppedBy) lines.push(`bgcut: stopped early, the key was refused (${result.stoppedBy}); the remaining files were not sent`);
  for (const [code, files] of [...result.failures].sort((a, b) => b[1].length - a[1].length)) {
    const shown = files.slice(0, 5).join(', ');
    lines.push(`  ${code} x${files.length}: ${shown}${files.length > 5 ? `, and ${files.length - 5} more` : ''}`);
  }
  return lines.join('\n');
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
