import cssColors from 'color-name';
import { ApiError } from './errors.js';
import type { IncomingHeaders } from './http-types.js';
import { QUALITIES, type Quality } from './image/multi-pass.js';

export type OutputFormat = 'png' | 'webp' | 'jpg' | 'avif';

export interface Rgba {
  r: number;
  g: number;
  b: number;
  /** 0..1 */
  alpha: number;
}

export interface OutputOptions {
  format: OutputFormat;
  /** `rgba`: the cutout; `alpha`: the mask alone, one grey channel. */
  channels: 'rgba' | 'alpha';
  /** Background to put behind the cutout; null keeps it transparent (white for jpg). */
  bgColor: Rgba | null;
  crop: boolean;
  cropMargin: { value: number; unit: 'px' | '%' };
  /** `preview`: at most 0.25 MP; `full`: the input's size; `auto`: full, within the plan's cap. */
  size: 'preview' | 'full' | 'auto';
  /** `json` when the client sent `Accept: application/json`. */
  response: 'image' | 'json';
  /** The model to use, by name; undefined for the default. */
  model: string | undefined;
  /** `fast`, `balanced` (one model pass, the default) or `best` (several passes merged); see image/multi-pass.ts. */
  quality: Quality;
}

/** Names accepted as form fields or query parameters; plans list these in `outputOptions`. */
export const OUTPUT_OPTION_NAMES = ['format', 'channels', 'bg_color', 'crop', 'crop_margin', 'size', 'model', 'quality'] as const;
export type OutputOptionName = (typeof OUTPUT_OPTION_NAMES)[number];

export const DEFAULT_OUTPUT: OutputOptions = {
  format: 'png',
  channels: 'rgba',
  bgColor: null,
  crop: false,
  cropMargin: { value: 0, unit: 'px' },
  size: 'auto',
  response: 'image',
  model: undefined,
  quality: 'balanced',
};

/** Largest crop margin: 500 px or 100 % of the foreground's size. */
const MAX_MARGIN = { px: 500, '%': 100 };

function invalid(field: string, detail: string): ApiError {
  return new ApiError('invalid_option', { detail: `${field}: ${detail}` });
}

export function parseColor(text: string): Rgba | null {
  const value = text.trim().toLowerCase();
  if (value === 'transparent') return null;
  const hex = /^#?([0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/.exec(value);
  if (hex) {
    let digits = hex[1]!;
    if (digits.length === 3) digits = [...digits].map((d) => d + d).join('');
    const n = (i: number) => parseInt(digits.slice(i, i + 2), 16);
    return { r: n(0), g: n(2), b: n(4), alpha: digits.length === 8 ? n(6) / 255 : 1 };
  }
  const named = Object.hasOwn(cssColors, value) ? cssColors[value] : undefined;
  if (named) return { r: named[0], g: named[1], b: named[2], alpha: 1 };
  throw new Error('not a colour');
}

/**
 * Output options from the form fields and the query string (either place; the same option in
 * both must agree). Unknown or invalid options get 400 `invalid_option` naming the field.
 * Returns the options and which of them the request set, for the plan check.
 */
export function parseOutputOptions(
  fields: Record<string, string>,
  url: string,
  headers: IncomingHeaders,
): { options: OutputOptions; requested: OutputOptionName[] } {
  const query = new URL(url, 'http://localhost').searchParams;
  const given = new Map<string, string>();
  const take = (name: string, value: string, where: string) => {
    if (!(OUTPUT_OPTION_NAMES as readonly string[]).includes(name)) {
      throw new ApiError('invalid_option', { detail: `${name}: unknown option (${where}); options are ${OUTPUT_OPTION_NAMES.join(', ')}` });
    }
    const previous = given.get(name);
    if (previous !== undefined && previous !== value) throw invalid(name, 'given twice with different values');
    given.set(name, value);
  };
  for (const [name, value] of query) take(name, value, 'query parameter');
  for (const [name, value] of Object.entries(fields)) take(name, value, 'form field');

  const options: OutputOptions = { ...DEFAULT_OUTPUT, cropMargin: { ...DEFAULT_OUTPUT.cropMargin } };
  const oneOf = <T extends string>(name: string, allowed: readonly T[], aliases: Record<string, T> = {}): T | undefined => {
    const raw = given.get(name);
    if (raw === undefined) return undefined;
    const value = raw.trim().toLowerCase();
    const match = aliases[value] ?? allowed.find((a) => a === value);
    if (!match) throw invalid(name, `"${raw.slice(0, 50)}" is not one of ${allowed.join(', ')}`);
    return match;
  };
  options.format = oneOf('format', ['png', 'webp', 'jpg', 'avif'] as const, { jpeg: 'jpg' }) ?? options.format;
  options.channels = oneOf('channels', ['rgba', 'alpha'] as const) ?? options.channels;
  options.size = oneOf('size', ['preview', 'full', 'auto'] as const) ?? options.size;
  options.quality = oneOf('quality', QUALITIES) ?? options.quality;
  const crop = oneOf('crop', ['true', 'false'] as const, { '1': 'true', '0': 'false', yes: 'true', no: 'false' });
  options.crop = crop === 'true';
  const color = given.get('bg_color');
  if (color !== undefined) {
    try {
      options.bgColor = parseColor(color);
    } catch {
      throw invalid('bg_color', `"${color.slice(0, 50)}" is not a colour (#rgb, #rrggbb, #rrggbbaa or a CSS colour name)`);
    }
  }
  const margin = given.get('crop_margin');
  if (margin !== undefined) {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(px|%)?\s*$/.exec(margin);
    const unit = (match?.[2] ?? 'px') as 'px' | '%';
    const value = Number(match?.[1]);
    if (!match || !(value <= MAX_MARGIN[unit])) throw invalid('crop_margin', `"${margin.slice(0, 50)}" is not a margin of 0-500px or 0-100%`);
    if (!options.crop) throw invalid('crop_margin', 'needs crop=true');
    options.cropMargin = { value, unit };
  }
  const model = given.get('model');
  if (model !== undefined) {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(model)) throw invalid('model', `"${model.slice(0, 50)}" is not a model name`);
    options.model = model;
  }
  if (options.channels === 'alpha' && options.bgColor) throw invalid('bg_color', 'cannot be combined with channels=alpha');

  const accept = headers.accept;
  if (typeof accept === 'string' && /(^|,)\s*application\/json\s*(;|,|$)/i.test(accept)) options.response = 'json';
  return { options, requested: [...given.keys()] as OutputOptionName[] };
}
