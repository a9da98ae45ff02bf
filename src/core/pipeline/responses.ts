import { create as contentDisposition } from 'content-disposition';
import { ApiError, problemOf } from '../errors.js';
import type { CoreResponse } from '../http-types.js';
import type { OutputOptions } from '../output-options.js';
import type { Cutout } from './cutout.js';
import { cutoutJson } from './cutout-json.js';

/**
 * Step 4: the answer. The image itself (or JSON with it in base64), with its size, foreground
 * box, per-stage Server-Timing and the account's rate-limit headers; or a problem+json body.
 */
export function cutoutResponse(cutout: Cutout, output: OutputOptions, uploadedName: string, rateHeaders: Record<string, string>): CoreResponse {
  const { rendered, timings } = cutout;
  const serverTiming = Object.entries(timings)
    .map(([stage, ms]) => `${stage};dur=${ms.toFixed(1)}`)
    .join(', ');
  const filename = outputFilename(uploadedName, rendered.extension);
  const box = rendered.foreground;
  const headers: Record<string, string> = {
    ...rateHeaders,
    'cache-control': 'no-store',
    'x-width': String(rendered.width),
    'x-height': String(rendered.height),
    'x-foreground-top': String(box?.top ?? 0),
    'x-foreground-left': String(box?.left ?? 0),
    'x-foreground-width': String(box?.width ?? 0),
    'x-foreground-height': String(box?.height ?? 0),
    // Two decimals: finer would promise more than the figure can tell.
    'x-confidence': cutout.confidence.toFixed(2),
    'server-timing': serverTiming,
  };
  if (output.response === 'json') {
    // Made in the render's worker when the cutout asked for it (makeCutout does).
    const body = rendered.json ?? cutoutJson(rendered, filename, cutout.confidence);
    return { status: 200, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(body.length) }, body };
  }
  return {
    status: 200,
    headers: {
      ...headers,
      'content-type': rendered.contentType,
      'content-length': String(rendered.body.length),
      'content-disposition': contentDisposition(filename, { type: 'inline' }),
    },
    body: rendered.body,
  };
}

export function jsonResponse(status: number, headers: Record<string, string>, value: unknown): CoreResponse {
  const body = Buffer.from(JSON.stringify(value));
  return { status, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(body.length) }, body };
}

export function problemResponse(error: ApiError, headers: Record<string, string>, problemTypeBase: string): CoreResponse {
  const body = Buffer.from(JSON.stringify(problemOf(error, problemTypeBase)));
  return {
    status: error.status,
    headers: {
      ...headers,
      'content-type': 'application/problem+json',
      'content-length': String(body.length),
      'cache-control': 'no-store',
    },
    body,
  };
}

/** Longest base name kept from an upload's file name, in characters (code points). */
const MAX_NAME_CHARACTERS = 100;

/**
 * `photo.jpg` -> `photo-nobg.png`. Anything odd in the name is replaced, and a long name is cut
 * between characters (never inside a surrogate pair), so the header is always well formed.
 */
export function outputFilename(uploaded: string, extension: string): string {
  const cleaned = uploaded
    .replace(/^.*[\\/]/, '')
    .replace(/\.[^.]*$/, '')
    .replace(/[^\p{L}\p{N}._ -]/gu, '_');
  const base = Array.from(cleaned).slice(0, MAX_NAME_CHARACTERS).join('').trim();
  return `${base || 'image'}-nobg.${extension}`;
}
