import type { Rendered } from '../image/output.js';
import { removeBgResultJson } from '../removebg/result-json.js';
import { cutoutJson } from './cutout-json.js';

/**
 * Which JSON answer the render's worker makes beside the image (the image then stays there: only
 * the JSON, which holds it in base64, reaches the main thread). `cutout`: bgcut's
 * `response=json` body (cutout-json.ts); `removebg`: remove.bg's `Accept: application/json`
 * answer (removebg/result-json.ts).
 */
export type JsonAnswerRequest = { shape?: 'cutout'; filename: string } | { shape: 'removebg' };

/** A JsonAnswerRequest as the worker gets it (the cutout's confidence added). */
export type JsonAnswerSpec = { shape?: 'cutout'; filename: string; confidence: number } | { shape: 'removebg' };

export function jsonAnswerSpec(request: JsonAnswerRequest, confidence: number): JsonAnswerSpec {
  return request.shape === 'removebg' ? request : { ...request, confidence };
}

/** The JSON answer's bytes, from the rendered image. */
export function jsonAnswer(spec: JsonAnswerSpec, rendered: Pick<Rendered, 'body' | 'contentType' | 'width' | 'height' | 'foreground'>): Buffer {
  return spec.shape === 'removebg' ? removeBgResultJson(rendered) : cutoutJson(rendered, spec.filename, spec.confidence);
}
