import sharp from 'sharp';
import { MessageChannel } from 'node:worker_threads';
import { transferableSymbol, valueSymbol } from 'piscina';
import { describe, expect, it } from 'vitest';
import { renderFullSize, type RenderJob } from '../src/core/image/output.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { modelInput, render } from '../src/core/image/pixel-worker.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { jsonAnswerSpec } from '../src/core/pipeline/json-answer.js';
import { DEFAULT_OUTPUT, type OutputOptions } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * What the render's worker hands the host's main thread must move there, not be copied: the
 * encoders' output (sharp's, @napi-rs/image's) is native memory that Node's postMessage silently
 * copies even when it is in the transfer list, and the main thread then copies the whole encoded
 * image out of the message on its event loop (a fresh 10-30 MB allocation per 24 MP cutout). The
 * worker's render() is called here, in this thread, and what it lists to move is posted on a
 * MessageChannel: memory that moved reads as empty (detached) afterwards, memory Node copied
 * keeps its length.
 */
async function job(options: Partial<OutputOptions>, pngEncoder?: 'sharp' | 'napi-rs'): Promise<RenderJob> {
  const { bytes } = await objectOnTexture(360, 240);
  const limits = { maxInputPixels: 1e7 };
  const probe = await probeImage(bytes, limits);
  const grey = Buffer.alloc(96 * 96);
  for (let y = 0; y < 96; y++) for (let x = 0; x < 96; x++) grey[y * 96 + x] = Math.max(0, Math.min(255, Math.round(128 - (Math.hypot(x - 48, y - 48) - 24) * 12)));
  const modelRgb = await sharp(bytes).resize(96, 96, { fit: 'fill' }).raw().toBuffer();
  return {
    bytes,
    probe,
    limits,
    mask: { grey, width: 96, height: 96, parts: [] },
    view: { rgb: modelRgb, alpha: grey, width: 96, height: 96 },
    options: { ...DEFAULT_OUTPUT, ...options },
    render: { pngCompressionLevel: 2, maxOutputPixels: Infinity, foregroundEstimation: true, ...(pngEncoder ? { pngEncoder } : {}) },
  };
}

/** render()'s answer: the value the main thread gets, and whether each buffer listed to move did move. */
async function renderAndPost(j: RenderJob): Promise<{ value: { body: Buffer; json?: Buffer }; listed: number; moved: boolean[]; copies: Buffer[] }> {
  const answer = (await render(j)) as Record<symbol, unknown>;
  const list = (answer[transferableSymbol] ?? []) as ArrayBuffer[];
  const value = (answer[valueSymbol] as { value: { body: Buffer; json?: Buffer } }).value;
  const copies = [value.body, value.json ?? Buffer.alloc(0)].map((b) => Buffer.from(b));
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(value, list);
  port1.close();
  port2.close();
  return { value, listed: list.length, moved: list.map((memory) => memory.byteLength === 0), copies };
}

describe("the render's result moves to the main thread, not copied there", () => {
  const cases: [string, Partial<OutputOptions>, ('sharp' | 'napi-rs')?][] = [
    ['png (the fast encoder)', { format: 'png' }, 'napi-rs'],
    ['png (sharp)', { format: 'png' }, 'sharp'],
    ['jpg on a colour', { format: 'jpg', bgColor: { r: 255, g: 255, b: 255, alpha: 1 } }],
    ['webp', { format: 'webp' }],
  ];
  for (const [name, options, encoder] of cases) {
    it(`${name}: the encoded image is listed to move, moves, and holds the bytes a render in this thread makes`, async () => {
      const j = await job(options, encoder);
      const { listed, moved, copies } = await renderAndPost(j);
      expect(listed).toBe(1);
      expect(moved).toEqual([true]);
      const here = await renderFullSize(await job(options, encoder));
      expect(copies[0]!.equals(here.body)).toBe(true);
    });
  }

  it('response=json: the JSON alone is listed, and moves', async () => {
    const j = { ...(await job({ format: 'png' })), json: jsonAnswerSpec({ filename: 'photo-nobg.png' }, 0.9) };
    const { value, listed, moved, copies } = await renderAndPost(j);
    expect(listed).toBe(1);
    expect(moved).toEqual([true]);
    expect(value.body.length).toBe(0);
    expect(JSON.parse(copies[1]!.toString()).contentType).toBe('image/png');
  });

  // A model-size image handed to one task (`modelImage: 'movable'`) comes back as memory of its
  // own: sharp's resize (a photo larger than the model's size on both axes) and the project's
  // enlarge (smaller on one: it writes into memory made for it) alike.
  for (const [name, width, height] of [['resized by sharp', 1600, 1200], ['enlarged here', 1224, 816]] as const) {
    it(`a movable model-size image (${name}) is listed to move, and moves`, async () => {
      const { bytes } = await objectOnTexture(width, height);
      const limits = { maxInputPixels: 1e7 };
      const job = { bytes, probe: await probeImage(bytes, limits), limits, profile: ISNET_PROFILE, decodeOnce: false, modelImage: 'movable' as const };
      const answer = (await modelInput(job)) as Record<symbol, unknown>;
      const list = (answer[transferableSymbol] ?? []) as ArrayBuffer[];
      const value = (answer[valueSymbol] as { value: { rgb: Buffer } }).value;
      expect(list).toContain(value.rgb.buffer);
      expect(value.rgb.length).toBe(ISNET_PROFILE.width * ISNET_PROFILE.height * 3);
      const { port1, port2 } = new MessageChannel();
      port1.postMessage(value, list);
      port1.close();
      port2.close();
      expect(list.map((memory) => memory.byteLength)).toEqual(list.map(() => 0));
    });
  }
});
