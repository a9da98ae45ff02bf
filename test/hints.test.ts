import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RemoveBgHandler } from '../src/core/index.js';
import { applyHints } from '../src/core/image/hints.js';
import { formRequest } from './helpers/core-request.js';
import { multipartBody } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { oneKeyHandler } from './helpers/one-key-handler.js';

/**
 * `hints`: white = keep, black = remove, transparent or mid grey = no hint (docs/api.md). The
 * expected values here come from that contract, not from the code: alpha exactly 255 / 0 under
 * the strokes, the model's mask untouched beyond the documented band (the long side / 128 px;
 * the 3-4 chamfer distance is within 6 % of the Euclidean, so "beyond" is taken as band x 1.07
 * plus a pixel), and a monotonic ramp across the band.
 */
type Rect = { left: number; top: number; right: number; bottom: number };

/** An RGBA hint image: `fill` everywhere, white over `keep`, black over `remove` (inclusive px rects). */
async function hintImage(width: number, height: number, keep: Rect[], remove: Rect[], fill: [number, number, number, number] = [0, 0, 0, 0]): Promise<Buffer> {
  const data = Buffer.alloc(width * height * 4);
  for (let i = 0; i < width * height; i++) data.set(fill, i * 4);
  const paint = (r: Rect, v: number) => {
    for (let y = r.top; y <= r.bottom; y++) for (let x = r.left; x <= r.right; x++) data.set([v, v, v, 255], (y * width + x) * 4);
  };
  keep.forEach((r) => paint(r, 255));
  remove.forEach((r) => paint(r, 0));
  return sharp(data, { raw: { width, height, channels: 4 } }).png().toBuffer();
}

/** Euclidean distance from (x, y) to a rect (0 inside). */
function distance(x: number, y: number, r: Rect): number {
  const dx = Math.max(r.left - x, 0, x - r.right);
  const dy = Math.max(r.top - y, 0, y - r.bottom);
  return Math.hypot(dx, dy);
}

function inside(r: Rect, each: (x: number, y: number) => void): void {
  for (let y = r.top; y <= r.bottom; y++) for (let x = r.left; x <= r.right; x++) each(x, y);
}

describe('hints on a mask (the worker kernel, a flat stand-in mask)', () => {
  // 1280 x 640: the documented band is round(1280 / 128) = 10 px.
  const W = 1280;
  const H = 640;
  const BAND = 10;
  const FAR = BAND * 1.07 + 1;
  // At half size in the hint image: hint px 100..199 covers full-size px 200..399.
  const keepFull: Rect = { left: 200, top: 200, right: 399, bottom: 399 };
  const removeFull: Rect = { left: 800, top: 200, right: 999, bottom: 399 };
  const half = (r: Rect): Rect => ({ left: r.left / 2, top: r.top / 2, right: (r.right - 1) / 2, bottom: (r.bottom - 1) / 2 });

  async function run(hints: Buffer): Promise<Buffer> {
    const alpha = Buffer.alloc(W * H, 128);
    await applyHints(alpha, W, H, hints, 50_000_000);
    return alpha;
  }

  it('alpha is exactly 255 under keep and 0 under remove strokes (hints at half size, scaled), 128 beyond the band', async () => {
    const alpha = await run(await hintImage(W / 2, H / 2, [half(keepFull)], [half(removeFull)]));
    inside(keepFull, (x, y) => expect(alpha[y * W + x]).toBe(255));
    inside(removeFull, (x, y) => expect(alpha[y * W + x]).toBe(0));
    let untouched = 0;
    for (let y = 0; y < H; y++) {
      for (let x = 0; x < W; x++) {
        if (Math.min(distance(x, y, keepFull), distance(x, y, removeFull)) < FAR) continue;
        if (alpha[y * W + x] !== 128) throw new Error(`(${x}, ${y}) is ${alpha[y * W + x]}, beyond the band`);
        untouched++;
      }
    }
    expect(untouched).toBeGreaterThan(W * H * 0.8);
  });

  it('across the band the alpha moves monotonically from the hint\'s value to the model\'s, within the band', async () => {
    const alpha = await run(await hintImage(W / 2, H / 2, [half(keepFull)], [half(removeFull)]));
    const row = 300;
    // Right of the keep stroke (its last column is 399).
    const keepRamp = Array.from({ length: BAND + 3 }, (_, i) => alpha[row * W + 400 + i]!);
    expect(keepRamp[0]).toBeGreaterThan(128);
    expect(keepRamp[0]).toBeLessThan(255);
    for (let i = 1; i < keepRamp.length; i++) expect(keepRamp[i]!).toBeLessThanOrEqual(keepRamp[i - 1]!);
    expect(keepRamp.slice(BAND)).toEqual(Array(3).fill(128));
    // Left of the remove stroke (its first column is 800).
    const removeRamp = Array.from({ length: BAND + 3 }, (_, i) => alpha[row * W + 799 - i]!);
    expect(removeRamp[0]).toBeLessThan(128);
    expect(removeRamp[0]).toBeGreaterThan(0);
    for (let i = 1; i < removeRamp.length; i++) expect(removeRamp[i]!).toBeGreaterThanOrEqual(removeRamp[i - 1]!);
    expect(removeRamp.slice(BAND)).toEqual(Array(3).fill(128));
    // Linear in the distance, as documented: k px straight out of a keep stroke over a mask of 128,
    // 255 * (1 - k / band) + 128 * k / band; the same on all four sides of the stroke.
    const linear = Array.from({ length: BAND + 3 }, (_, i) => Math.round(255 * Math.max(0, 1 - (i + 1) / BAND) + 128 * Math.min(1, (i + 1) / BAND)));
    expect(keepRamp).toEqual(linear);
    const leftOfKeep = Array.from({ length: BAND + 3 }, (_, i) => alpha[row * W + 199 - i]!);
    const aboveKeep = Array.from({ length: BAND + 3 }, (_, i) => alpha[(199 - i) * W + 300]!);
    const belowKeep = Array.from({ length: BAND + 3 }, (_, i) => alpha[(400 + i) * W + 300]!);
    expect([leftOfKeep, aboveKeep, belowKeep]).toEqual([linear, linear, linear]);
  });

  it('transparent and mid-grey backgrounds are both "no hint"; the result is deterministic', async () => {
    const transparent = await run(await hintImage(W / 2, H / 2, [half(keepFull)], [half(removeFull)]));
    const grey = await run(await hintImage(W / 2, H / 2, [half(keepFull)], [half(removeFull)], [128, 128, 128, 255]));
    const again = await run(await hintImage(W / 2, H / 2, [half(keepFull)], [half(removeFull)]));
    expect(grey.equals(transparent)).toBe(true);
    expect(again.equals(transparent)).toBe(true);
  });

  it('a hint image with its own EXIF orientation is read as displayed', async () => {
    const upright = await hintImage(W / 2, H / 2, [half(keepFull)], [half(removeFull)]);
    // Stored a quarter turn back, tagged 6 (shown turned 90 degrees clockwise): displayed, it is `upright`.
    const stored = await sharp(await sharp(upright).rotate(-90).png().toBuffer()).withMetadata({ orientation: 6 }).png().toBuffer();
    expect((await sharp(stored).metadata()).width).toBe(H / 2);
    const a = await run(upright);
    const b = await run(stored);
    expect(b.equals(a)).toBe(true);
  });
});

/** A PNG whose header says `width` x `height` (one IDAT byte: only the header is read before the refusal). */
function pngHeader(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (bytes: Buffer) => {
    let c = 0xffffffff;
    for (const b of bytes) c = crcTable[(c ^ b) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), body.length + 4);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', Buffer.from([0])), chunk('IEND', Buffer.alloc(0))]);
}

describe('hints through the handler (the real model)', () => {
  let handler: RemoveBgHandler;
  let key: string;
  let photo: Awaited<ReturnType<typeof objectOnTexture>>;
  // 480 x 360: the disc (centre 240, 198; radius 108) is foreground, the woven texture background.
  const W = 480;
  const H = 360;
  const BAND = Math.round(480 / 128);
  const FAR = BAND * 1.07 + 1;
  const keepRect: Rect = { left: 20, top: 20, right: 79, bottom: 79 };
  const removeRect: Rect = { left: 220, top: 180, right: 259, bottom: 219 };

  beforeAll(async () => {
    ({ handler, key } = await oneKeyHandler('acct_hints', inject('inferenceAddress')));
    photo = await objectOnTexture(W, H);
  });
  afterAll(() => handler?.close());

  async function send(image: Buffer, hints: Buffer | Buffer[] | undefined, query = '?channels=alpha') {
    const parts: Parameters<typeof multipartBody>[0] = [{ name: 'file', filename: 'photo.jpg', type: 'image/jpeg', data: image }];
    for (const h of hints === undefined ? [] : Array.isArray(hints) ? hints : [hints]) parts.push({ name: 'hints', filename: 'hints.png', type: 'image/png', data: h });
    const form = multipartBody(parts);
    return handler.handle(formRequest(key, form, `/v1/remove-bg${query}`).request);
  }
  const maskOf = async (body: Buffer) => sharp(body).extractChannel(0).raw().toBuffer({ resolveWithObject: true });

  it('keep and remove strokes are honoured exactly; beyond the band the mask is the model\'s own', async () => {
    const plain = await send(photo.bytes, undefined);
    expect(plain.status).toBe(200);
    const hinted = await send(photo.bytes, await hintImage(W, H, [keepRect], [removeRect]));
    expect(hinted.status, hinted.body.toString().slice(0, 300)).toBe(200);
    const before = (await maskOf(plain.body)).data;
    const { data: after, info } = await maskOf(hinted.body);
    expect([info.width, info.height]).toEqual([W, H]);
    // The model's view of these places, so the hints change something.
    expect(before[50 * W + 50]).toBeLessThan(50);
    expect(before[200 * W + 240]).toBeGreaterThan(200);
    inside(keepRect, (x, y) => expect(after[y * W + x]).toBe(255));
    inside(removeRect, (x, y) => expect(after[y * W + x]).toBe(0));
    let same = 0;
    for (let y = 0; y < H; y++) {
      for (let x = 0; x < W; x++) {
        if (Math.min(distance(x, y, keepRect), distance(x, y, removeRect)) < FAR) continue;
        if (after[y * W + x] !== before[y * W + x]) throw new Error(`(${x}, ${y}): ${after[y * W + x]} with hints, ${before[y * W + x]} without, beyond the band`);
        same++;
      }
    }
    expect(same).toBeGreaterThan(W * H * 0.9);
  }, 300_000);

  it('remove.bg\'s route takes the same `hints` part beside image_file', async () => {
    const form = multipartBody([
      { name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: photo.bytes },
      { name: 'hints', filename: 'hints.png', type: 'image/png', data: await hintImage(W, H, [keepRect], [removeRect]) },
      { name: 'channels', data: 'alpha' },
      { name: 'size', data: 'full' },
    ]);
    const response = await handler.removeBg(formRequest(key, form, '/v1.0/removebg').request);
    expect(response.status, response.body.toString().slice(0, 300)).toBe(200);
    const { data, info } = await maskOf(response.body);
    expect([info.width, info.height]).toEqual([W, H]);
    inside(keepRect, (x, y) => expect(data[y * W + x]).toBe(255));
    inside(removeRect, (x, y) => expect(data[y * W + x]).toBe(0));
  }, 300_000);

  it('hints are in the displayed orientation of an input with EXIF orientation 6, and may be a scaled-down copy', async () => {
    // Stored a quarter turn back and tagged 6: displayed, it is the 480 x 360 photo.
    const stored = await sharp(await sharp(photo.rgb, { raw: { width: W, height: H, channels: 3 } }).rotate(-90).jpeg({ quality: 92 }).toBuffer())
      .withMetadata({ orientation: 6 })
      .jpeg({ quality: 92 })
      .toBuffer();
    // Half size: hint px 10..39 covers displayed px 20..79.
    const hints = await hintImage(W / 2, H / 2, [{ left: 10, top: 10, right: 39, bottom: 39 }], [{ left: 110, top: 90, right: 129, bottom: 109 }]);
    const response = await send(stored, hints);
    expect(response.status, response.body.toString().slice(0, 300)).toBe(200);
    const { data, info } = await maskOf(response.body);
    expect([info.width, info.height]).toEqual([W, H]);
    inside(keepRect, (x, y) => expect(data[y * W + x]).toBe(255));
    inside(removeRect, (x, y) => expect(data[y * W + x]).toBe(0));
  }, 300_000);

  it('refusals before any model work: wrong aspect 400 hints_size_mismatch, not an image 400 invalid_hints, too many pixels 400 invalid_hints, two parts 400 too_many_files, too many bytes 413', async () => {
    const code = (r: { body: Buffer }) => JSON.parse(r.body.toString()).code;
    const square = await send(photo.bytes, await hintImage(100, 100, [], []));
    expect([square.status, code(square)]).toEqual([400, 'hints_size_mismatch']);
    const text = await send(photo.bytes, Buffer.from('these are not pixels'));
    expect([text.status, code(text)]).toEqual([400, 'invalid_hints']);
    const huge = await send(photo.bytes, pngHeader(40_000, 30_000));
    expect([huge.status, code(huge)]).toEqual([400, 'invalid_hints']);
    const hints = await hintImage(W, H, [keepRect], []);
    const two = await send(photo.bytes, [hints, hints]);
    expect([two.status, code(two)]).toEqual([400, 'too_many_files']);
    const big = await send(photo.bytes, Buffer.concat([hints, Buffer.alloc(8 * 1024 * 1024)]));
    expect([big.status, code(big)]).toEqual([413, 'upload_too_large']);
  }, 120_000);
});
