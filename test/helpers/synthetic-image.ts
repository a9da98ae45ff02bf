import sharp from 'sharp';

export interface SyntheticImage {
  /** Encoded image (JPEG unless asked otherwise). */
  bytes: Buffer;
  width: number;
  height: number;
  /** 1 where the object is, 0 elsewhere, row-major. */
  truth: Uint8Array;
}

/**
 * A picture with a known answer: a shaded solid object (a disc) on a busy, textured, low-contrast
 * background. Deterministic, so a failing IoU points at the pipeline, not at the test.
 */
export async function objectOnTexture(
  width = 640,
  height = 480,
  format: 'jpeg' | 'png' | 'raw' = 'jpeg',
  /** Centre of the object, as fractions of the width and height. */
  centre = { x: 0.5, y: 0.55 },
): Promise<SyntheticImage & { rgb: Buffer }> {
  const rgb = Buffer.alloc(width * height * 3);
  const truth = new Uint8Array(width * height);
  const cx = width * centre.x;
  const cy = height * centre.y;
  const r = Math.min(width, height) * 0.3;
  let seed = 12345;
  const noise = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      const d = Math.hypot(x - cx, y - cy);
      let R: number, G: number, B: number;
      if (d <= r) {
        truth[i] = 1;
        // A red ball lit from the top left.
        const light = 1 - Math.hypot(x - (cx - r * 0.4), y - (cy - r * 0.4)) / (2 * r);
        R = 60 + 180 * light;
        G = 20 + 40 * light;
        B = 20 + 40 * light;
      } else {
        // Woven texture: diagonal stripes in greys and greens plus grain.
        const stripe = ((x + y) >> 3) % 2 === 0 ? 1 : 0;
        const weave = ((x - y + 4096) >> 4) % 2 === 0 ? 1 : 0;
        const grain = noise() * 30;
        R = 110 + 25 * stripe + 10 * weave + grain;
        G = 130 + 20 * stripe + 15 * weave + grain;
        B = 100 + 10 * stripe + 5 * weave + grain;
      }
      rgb[i * 3] = R;
      rgb[i * 3 + 1] = G;
      rgb[i * 3 + 2] = B;
    }
  }
  const image = sharp(rgb, { raw: { width, height, channels: 3 } });
  const bytes = format === 'jpeg' ? await image.jpeg({ quality: 92 }).toBuffer() : format === 'png' ? await image.png().toBuffer() : rgb;
  return { bytes, width, height, truth, rgb };
}

/** Intersection over union of the alpha channel (>= 128 counts as object) against the truth. */
export function alphaIoU(alpha: Uint8Array | Buffer, truth: Uint8Array): number {
  let inter = 0;
  let union = 0;
  for (let i = 0; i < truth.length; i++) {
    const a = alpha[i]! >= 128 ? 1 : 0;
    const t = truth[i]!;
    if (a && t) inter++;
    if (a || t) union++;
  }
  return union === 0 ? 0 : inter / union;
}

/** Decodes a PNG answer and returns its alpha plane and size. */
/**
 * The box of alpha >= 13 (5 %) in a one-channel mask, measured in the test rather than with the
 * code under test (whose foreground box uses the same threshold).
 */
export function measuredBox(alpha: Buffer, width: number, height: number): { left: number; top: number; width: number; height: number } {
  let left = width, right = -1, top = height, bottom = -1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (alpha[y * width + x]! >= 13) {
        left = Math.min(left, x);
        right = Math.max(right, x);
        top = Math.min(top, y);
        bottom = Math.max(bottom, y);
      }
    }
  }
  return { left, top, width: right - left + 1, height: bottom - top + 1 };
}

export async function decodeAlpha(png: Buffer): Promise<{ width: number; height: number; channels: number; alpha: Buffer; format: string }> {
  const meta = await sharp(png).metadata();
  const { data, info } = await sharp(png).ensureAlpha().extractChannel(3).raw().toBuffer({ resolveWithObject: true });
  return { width: info.width, height: info.height, channels: meta.channels ?? 0, alpha: data, format: meta.format ?? '' };
}

/**
 * A JPEG whose header is whole (size, components, tables: it passes a header probe) and whose
 * entropy-coded data is cut a few bytes after the start of scan: decoding fails, every time.
 */
export function headerOnlyJpeg(jpeg: Buffer): Buffer {
  for (let i = 2; i + 1 < jpeg.length; ) {
    if (jpeg[i] !== 0xff) throw new Error('headerOnlyJpeg: not a JPEG marker sequence');
    const marker = jpeg[i + 1]!;
    const length = jpeg.readUInt16BE(i + 2);
    if (marker === 0xda) return jpeg.subarray(0, i + 2 + length + 16);
    i += 2 + length;
  }
  throw new Error('headerOnlyJpeg: no start of scan');
}

/** A size x size grey mask: a disc of radius size/4, `shift` px right of centre, with a soft 64 px-wide edge (a model-like mask). */
export function softDisc(size: number, shift: number): Buffer {
  const grey = Buffer.alloc(size * size);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) grey[y * size + x] = Math.max(0, Math.min(255, Math.round(128 - (Math.hypot(x - size / 2 - shift, y - size / 2) - size / 4) * 4)));
  }
  return grey;
}
