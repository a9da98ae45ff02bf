import { isMainThread } from 'node:worker_threads';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ISNET_PROFILE, type RemoveBgHandler } from '../src/core/index.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { segmentAtQuality } from '../src/core/image/multi-pass.js';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { HAND_OFF_COPY_COUNTED, PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT, type OutputOptions } from '../src/core/output-options.js';
import { formRequest, uploadRequest } from './helpers/core-request.js';
import { multipartBody } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { softDiscModel } from './helpers/disc-model.js';
import { oneKeyHandler } from './helpers/one-key-handler.js';

/**
 * Every per-pixel loop written in JavaScript whose cost grows with the image (or, for `best`,
 * with the model's grid) runs in the pixel pool's worker threads, never on the event loop of the
 * process that mounts the handler. Asserted on where the kernels ran (kernel-calls.ts counts each
 * call in the thread that makes it), not on time: after real cutouts with the real model, for
 * every output that takes a different path, the main thread's counts are all zero; and the same
 * paths, run directly with a stand-in model (a soft-edged disc: what is tested is where the work
 * runs, not the model), show every kernel did run in the worker.
 */
const KERNELS = [
  'upscaleMask',
  'splitAlpha',
  'pasteBlended',
  'estimateForeground',
  'foregroundBox',
  'composeOpaque',
  'composeRgba',
  'clearTransparent',
  'mergeMasks',
  'looksConfidence',
  'applyHints',
  'prepareModelInput',
  // `best`'s crop and mirror passes: the region's decode, its mirror and their tensors.
  'preparePassInputs',
  // Writing a tensor (into its message or memory of its own), for any pass.
  'imageToTensor',
  // The growing axes of the model-input resize (a photo under the model's size), for any pass.
  'enlargeBicubic',
];

/** An RGB photo-like image and the same with a transparent left quarter (an input alpha to fold in). */
async function images() {
  const { rgb } = await objectOnTexture(480, 360, 'raw');
  const { bytes } = await objectOnTexture(480, 360);
  const alpha = Buffer.alloc(480 * 360, 255);
  for (let y = 0; y < 360; y++) alpha.fill(0, y * 480, y * 480 + 120);
  const rgba = await sharp(rgb, { raw: { width: 480, height: 360, channels: 3 } }).joinChannel(alpha, { raw: { width: 480, height: 360, channels: 1 } }).png().toBuffer();
  // hints: keep the top-left corner, remove the middle (white / black on transparent).
  const marks = Buffer.alloc(480 * 360 * 4);
  for (let y = 0; y < 360; y++) {
    for (let x = 0; x < 480; x++) {
      if (x < 60 && y < 60) marks.set([255, 255, 255, 255], (y * 480 + x) * 4);
      else if (Math.abs(x - 240) < 20 && Math.abs(y - 200) < 20) marks.set([0, 0, 0, 255], (y * 480 + x) * 4);
    }
  }
  const hints = await sharp(marks, { raw: { width: 480, height: 360, channels: 4 } }).png().toBuffer();
  return { jpeg: bytes, rgba, hints };
}

/** Requests that take each path of the render: clear, colour, translucent colour, crop, mask alone, best's merges, JSON, hints; and an input alpha. */
const REQUESTS: [input: 'jpeg' | 'rgba', query: string][] = [
  ['jpeg', 'hints'],
  ['jpeg', ''],
  ['jpeg', '?format=jpg&bg_color=%2320c85a'],
  ['jpeg', '?bg_color=%2320c85a80'],
  ['jpeg', '?crop=true&format=webp'],
  ['jpeg', '?channels=alpha'],
  ['jpeg', '?quality=best'],
  ['jpeg', 'json'],
  ['jpeg', '?output_size=600x400&padding=10%25&add_shadow=true'],
  // A second file part, `bg_image`: the cutout over a cover-fitted photo.
  ['jpeg', 'bg_image'],
  ['rgba', ''],
];

/** The image in `file` and a second file part beside it (`hints`, `bg_image`), as one multipart upload. */
function twoPartRequest(key: string, image: Buffer, part: { name: string; filename: string; data: Buffer }) {
  return formRequest(key, multipartBody([{ name: 'file', filename: 'photo.jpg', type: 'image/jpeg', data: image }, { ...part, type: 'image/png' }]));
}

const mainCounts = () => Object.fromEntries(KERNELS.map((k) => [k, kernelCalls[k] ?? 0]));
const zero = Object.fromEntries(KERNELS.map((k) => [k, 0]));

describe('full-size pixel work stays off the main thread', () => {
  let handler: RemoveBgHandler;
  let key: string;
  let inputs: { jpeg: Buffer; rgba: Buffer; hints: Buffer };
  beforeAll(async () => {
    ({ handler, key } = await oneKeyHandler('acct_open', inject('inferenceAddress')));
    inputs = await images();
  });
  afterAll(() => handler?.close());

  it('through the handler: every output option, JSON answers and an input with its own alpha, with no pixel kernel run on the main thread', async () => {
    expect(isMainThread).toBe(true);
    const before = mainCounts();
    const handOffCopies: Record<string, number> = {};
    for (const [name, query] of REQUESTS) {
      const copiesBefore = kernelCalls.handOffCopy ?? 0;
      const driven =
        query === 'hints'
          ? twoPartRequest(key, inputs.jpeg, { name: 'hints', filename: 'hints.png', data: inputs.hints })
          : query === 'bg_image'
            ? twoPartRequest(key, inputs[name], { name: 'bg_image', filename: 'backdrop.png', data: inputs.rgba })
            : uploadRequest(key, inputs[name], `${name}.png`);
      if (query === 'json') driven.request.headers.accept = 'application/json';
      else if (query === 'hints' || query === 'bg_image') driven.request.url = '/v1/remove-bg';
      else driven.request.url = `/v1/remove-bg${query}`;
      const response = await handler.handle(driven.request);
      expect(response.status, `${name} ${query}: ${response.body.toString().slice(0, 200)}`).toBe(200);
      const body = query === 'json' ? Buffer.from(JSON.parse(response.body.toString()).data, 'base64') : response.body;
      expect((await sharp(body).metadata()).width, `${name} ${query}`).toBeGreaterThan(0);
      handOffCopies[`${name} ${query}`] = (kernelCalls.handOffCopy ?? 0) - copiesBefore;
    }
    const after = mainCounts();
    expect(Object.fromEntries(KERNELS.map((k) => [k, after[k]! - before[k]!]))).toEqual(zero);
    // What goes to the workers (the upload, the model-size view and mask, `best`'s masks, the
    // working view) is in shared memory, so no hand-off copies a large buffer on the main
    // thread; only a second file part (hints, bg_image: the caller's bytes) is copied, once, when
    // it is large enough to be counted.
    const secondPart: Record<string, Buffer> = { hints: inputs.hints, bg_image: inputs.rgba };
    const expected = ([name, query]: (typeof REQUESTS)[number]) => [`${name} ${query}`, (secondPart[query]?.length ?? 0) >= HAND_OFF_COPY_COUNTED ? 1 : 0];
    expect(handOffCopies).toEqual(Object.fromEntries(REQUESTS.map(expected)));
  }, 900_000);

  it('the same paths run every kernel in the pool\'s worker (so the check above is not vacuous)', async () => {
    const pool = new PixelPool({ threads: 1 });
    const before = mainCounts();
    try {
      const limits = { maxInputPixels: 50_000_000 };
      const render = { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true };
      const outputs: OutputOptions[] = [
        DEFAULT_OUTPUT,
        // WebP keeps sharp's join of the cleared colour (clearTransparent); the default PNG now
        // composes the RGBA for the fast encoder (composeRgba).
        { ...DEFAULT_OUTPUT, format: 'webp' },
        { ...DEFAULT_OUTPUT, format: 'jpg', bgColor: { r: 32, g: 200, b: 90, alpha: 1 } },
        { ...DEFAULT_OUTPUT, bgColor: { r: 32, g: 200, b: 90, alpha: 0.5 } },
      ];
      for (const bytes of [inputs.jpeg, inputs.rgba]) {
        const probe = await probeImage(bytes, limits);
        for (const quality of ['balanced', 'best'] as const) {
          const seg = await segmentAtQuality(quality, bytes, probe, ISNET_PROFILE, softDiscModel, limits, AbortSignal.timeout(120_000), pool);
          for (const output of outputs) await renderOutput(seg, output, render, pool);
          await renderOutput(seg, DEFAULT_OUTPUT, render, pool, undefined, inputs.hints);
        }
      }
      const inWorker = await pool.workerKernelCalls();
      for (const kernel of KERNELS) expect(inWorker[kernel] ?? 0, kernel).toBeGreaterThan(0);
      expect([...pool.ranIn].every((id) => id !== 0)).toBe(true);
      expect(mainCounts()).toEqual(before);
    } finally {
      await pool.close();
    }
  }, 120_000);
});
