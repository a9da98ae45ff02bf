import cssColors from 'color-name';
import { ApiError } from './errors.js';
import type { IncomingHeaders } from './http-types.js';
import { describeQualities, QUALITIES, type Quality } from './image/multi-pass.js';

export type OutputFormat = 'png' | 'webp' | 'jpg' | 'avif' | 'zip';

/** One edge of a region, in px or % of the image's size. */
export interface Edge {
  value: number;
  unit: 'px' | '%';
}

/** A rectangle of the upright input: `roi`. */
export interface Region {
  left: Edge;
  top: Edge;
  right: Edge;
  bottom: Edge;
}

/** Margins around the cropped foreground, CSS order resolved: each side px or % of the box's size along it. */
export interface Margins {
  top: Edge;
  right: Edge;
  bottom: Edge;
  left: Edge;
}

/** Where the subject's box goes on the canvas: as it was, or at x% y% of the room left around it (50% 50% centres it). */
export type Position = 'original' | { x: number; y: number };

/** `add_shadow`: a drop shadow made from the mask (see image/shadow.ts for its geometry). */
export interface Shadow {
  /** 0..1 */
  opacity: number;
}

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
  cropMargin: Margins;
  /** `scale`: the subject's box fits in this fraction (0.1..1) of the canvas's width and height; null leaves its size. */
  scale: number | null;
  /** `position`: where the subject's box goes on the canvas. */
  position: Position;
  /** `add_shadow`: a drop shadow under the subject; null for none. */
  shadow: Shadow | null;
  /** `preview`, `medium`, `hd`: at most 0.25, 1.5, 4 MP (remove.bg's sizes); `full`: the input's size; `auto`: full, within the plan's cap. */
  size: 'preview' | 'medium' | 'hd' | 'full' | 'auto';
  /** `json` when the client sent `Accept: application/json`. */
  response: 'image' | 'json';
  /** The model to use, by name; undefined for the default. */
  model: string | undefined;
  /** `fast`, `balanced` (one model pass, the default) or `best` (several passes merged); see image/multi-pass.ts. */
  quality: Quality;
  /** `roi`: only this region of the input may be foreground; null for the whole image. */
  roi: Region | null;
  /** `bg_image_url`: a photo to put behind the cutout (cover-fit to the output); null for none. The `bg_image` part is the Order's. */
  bgImageUrl: string | null;
  /** `output_size`: the output canvas, exactly; the subject box is fitted into it inside `padding`. Null: the canvas follows the image (or crop). */
  outputSize: { width: number; height: number } | null;
  /** `padding` with `output_size`: room kept free on each side of the canvas, px or % of the canvas's side along it. */
  padding: Margins;
}


export const DEFAULT_OUTPUT: OutputOptions = {
  format: 'png',
  channels: 'rgba',
  bgColor: null,
  crop: false,
  cropMargin: { top: { value: 0, unit: 'px' }, right: { value: 0, unit: 'px' }, bottom: { value: 0, unit: 'px' }, left: { value: 0, unit: 'px' } },
  scale: null,
  position: 'original',
  shadow: null,
  size: 'auto',
  response: 'image',
  model: undefined,
  quality: 'balanced',
  roi: null,
  bgImageUrl: null,
  outputSize: null,
  padding: { top: { value: 0, unit: 'px' }, right: { value: 0, unit: 'px' }, bottom: { value: 0, unit: 'px' }, left: { value: 0, unit: 'px' } },
};

/** `output_size`: each side 1-10 000 px, and at most this many pixels in all. */
export const MAX_CANVAS_SIDE = 10_000;
export const MAX_CANVAS_PIXELS = 25_000_000;
/** Longest `bg_image_url` (image_url's limit). */
const MAX_BG_URL_LENGTH = 2048;

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

/** Largest crop margin: 500 px or 100 % of the foreground's size. */
const MAX_MARGIN = { px: 500, '%': 100 };
/**
 * A margin, matched on the trimmed value: with blanks allowed at both ends as well as before the
 * unit, `\s*(px|%)?\s*$` could split a run of blanks between its two `\s*` in n ways, and a long
 * run followed by anything else backtracked in O(n^2) (a 16 KB query string took ~0.3 s).
 */
const MARGIN_PATTERN = /^(\d+(?:\.\d+)?)\s*(px|%)?$/;
/** `output_size`: `WxH`. */
const OUTPUT_SIZE_PATTERN = /^(\d{1,5})[xX](\d{1,5})$/;
/** One to four margins (CSS order: all; vertical horizontal; top right bottom left), one blank apart. */
const MARGINS_PATTERN = /^\d{1,6}(?:\.\d{1,2})?(?:px|%)?(?: \d{1,6}(?:\.\d{1,2})?(?:px|%)?){0,3}$/;
/** `scale`: 10%-100%, or `original`. */
const SCALE_PATTERN = /^(?:original|(\d{1,3}(?:\.\d{1,2})?)%)$/;
/** `position`: `original`, `center`, or one or two percentages (horizontal, vertical). */
const POSITION_PATTERN = /^(?:original|center|(\d{1,3}(?:\.\d{1,2})?)%(?: (\d{1,3}(?:\.\d{1,2})?)%)?)$/;
const MODEL_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** Four edges, each a number of at most 6 digits (and 2 decimals) with an optional unit, one blank apart. */
const ROI_PATTERN = /^(\d{1,6}(?:\.\d{1,2})?)(px|%)? (\d{1,6}(?:\.\d{1,2})?)(px|%)? (\d{1,6}(?:\.\d{1,2})?)(px|%)? (\d{1,6}(?:\.\d{1,2})?)(px|%)?$/;

/**
 * One to four margins in CSS order (all; vertical horizontal; top right bottom left), each px or
 * %, within `max`: `crop_margin` and `padding`.
 */
function parseMargins(raw: string, max: { px: number; '%': number }): Margins {
  const text = raw.trim();
  const limits = `0-${max.px}px or 0-${max['%']}%`;
  if (text.length > 60 || !MARGINS_PATTERN.test(text)) throw new Error(`"${raw.slice(0, 50)}" is not 1, 2 or 4 margins of ${limits}`);
  const edges = text.split(' ').map((part): Edge => {
    const match = MARGIN_PATTERN.exec(part)!;
    const unit = (match[2] ?? 'px') as 'px' | '%';
    const value = Number(match[1]);
    if (!(value <= max[unit])) throw new Error(`"${part}" is not a margin of ${limits}`);
    return { value, unit };
  });
  if (edges.length === 3) throw new Error(`"${raw.slice(0, 50)}" has 3 margins: give 1, 2 or 4`);
  const [top, right = top!, bottom = top!, left = right] = edges as [Edge, Edge?, Edge?, Edge?];
  return { top: top!, right, bottom, left };
}

/** A margin in px: px as it is, % of `side`. */
export function marginPixels(edge: Edge, side: number): number {
  return Math.round(edge.unit === '%' ? (side * edge.value) / 100 : edge.value);
}

/** JSON Schema of one option's value, as it arrives: a form field or query parameter is text. */
export interface OptionSchema {
  type: 'string';
  enum?: string[];
  pattern?: string;
  format?: string;
  maxLength?: number;
  default?: string;
  examples?: string[];
}

/**
 * One output option: how it is described (the OpenAPI document is built from this) and how its
 * text is parsed into OutputOptions (the handler validates with this). One table, so the
 * document and the validation cannot drift apart.
 */
export interface OutputOptionDefinition {
  description: string;
  schema: OptionSchema;
  /** Applies the raw value to `options`, or throws a message saying why it is invalid. */
  apply(raw: string, options: OutputOptions): void;
}

/** An option taking one of a few words (case-insensitive), with aliases. */
function oneOf<T extends string>(
  description: string,
  values: readonly T[],
  fallback: T,
  set: (options: OutputOptions, value: T) => void,
  aliases: Record<string, T> = {},
): OutputOptionDefinition {
  return {
    description: `${description} Case-insensitive.`,
    schema: { type: 'string', enum: [...values, ...Object.keys(aliases)], default: fallback },
    apply(raw, options) {
      const value = raw.trim().toLowerCase();
      const match = Object.hasOwn(aliases, value) ? aliases[value] : values.find((v) => v === value);
      if (!match) throw new Error(`"${raw.slice(0, 50)}" is not one of ${values.join(', ')}`);
      set(options, match);
    },
  };
}

export const OUTPUT_OPTION_DEFINITIONS = {
  format: oneOf(
    'Image format of the result; `jpg` has no transparency (white behind unless `bg_color`); `zip`: a ZIP of `color.jpg` (the colour) and `alpha.png` (the mask), to be joined by the client (not with `bg_color` or `channels=alpha`).',
    ['png', 'webp', 'jpg', 'avif', 'zip'] as const,
    'png',
    (o, v) => (o.format = v),
    { jpeg: 'jpg' },
  ),
  channels: oneOf('`rgba`: the cut-out image; `alpha`: the mask alone, one grey channel.', ['rgba', 'alpha'] as const, 'rgba', (o, v) => (o.channels = v)),
  bg_color: {
    description: 'Background behind the cut-out: `#rgb`, `#rrggbb`, `#rrggbbaa`, a CSS colour name or `transparent`. Not with `channels=alpha`.',
    schema: { type: 'string', examples: ['#00ff00', 'rebeccapurple', '#0000ff80'] },
    apply(raw, options) {
      try {
        options.bgColor = parseColor(raw);
      } catch {
        throw new Error(`"${raw.slice(0, 50)}" is not a colour (#rgb, #rrggbb, #rrggbbaa or a CSS colour name)`);
      }
    },
  },
  bg_image_url: {
    description:
      'A photo to put behind the cut-out, by URL (fetched under the same address policy and limits as `image_url`; or send it as the multipart part `bg_image`). Cover-fit: scaled to fill the output canvas, its centre kept, the overflow cut off. Not with `bg_color`, `channels=alpha` or `format=zip`.',
    schema: { type: 'string', format: 'uri', maxLength: MAX_BG_URL_LENGTH, examples: ['https://example.com/beach.jpg'] },
    apply(raw, options) {
      const url = raw.trim();
      if (url === '' || url.length > MAX_BG_URL_LENGTH) throw new Error(`is empty or longer than ${MAX_BG_URL_LENGTH} characters`);
      options.bgImageUrl = url;
    },
  },
  crop: oneOf('Crop the result to the foreground box.', ['true', 'false'] as const, 'false', (o, v) => (o.crop = v === 'true'), { '1': 'true', '0': 'false', yes: 'true', no: 'false' }),
  crop_margin: {
    description: `Margin around the cropped foreground, one to four values in CSS order (\`10px\`; \`10px 5%\`: vertical horizontal; \`1px 2px 3px 4px\`: top right bottom left), each 0-${MAX_MARGIN.px}px or 0-${MAX_MARGIN['%']}% of the box's size along that side. Needs \`crop=true\`.`,
    schema: { type: 'string', pattern: MARGINS_PATTERN.source, default: '0px', examples: ['10px', '5%', '10px 5%', '0 10px 20px 10px'] },
    apply(raw, options) {
      options.cropMargin = parseMargins(raw, MAX_MARGIN);
    },
  },
  size: oneOf(
    '`preview`: at most 0.25 MP; `medium`: at most 1.5 MP; `hd`: at most 4 MP; `full`: the input size (403 if over the plan); `auto`: full, within the plan\'s output cap.',
    ['preview', 'medium', 'hd', 'full', 'auto'] as const,
    'auto',
    (o, v) => (o.size = v),
  ),
  model: {
    description: 'The model to use, by name (see the operator\'s configuration); default: the server\'s default model.',
    schema: { type: 'string', pattern: MODEL_PATTERN.source },
    apply(raw, options) {
      if (!MODEL_PATTERN.test(raw)) throw new Error(`"${raw.slice(0, 50)}" is not a model name`);
      options.model = raw;
    },
  },
  roi: {
    description:
      'Region of interest, `x1 y1 x2 y2` (left, top, right, bottom), each in px or % of the image (`10% 0% 90% 100%`, `0px 0px 400px 300px`): only it may be foreground, the rest is background.',
    schema: { type: 'string', pattern: ROI_PATTERN.source, default: '0% 0% 100% 100%', examples: ['10% 5% 90% 100%', '0px 0px 400px 300px'] },
    apply(raw, options) {
      const match = ROI_PATTERN.exec(raw.trim());
      if (!match) throw new Error(`"${raw.slice(0, 50)}" is not four edges "x1 y1 x2 y2" in px or %`);
      const edge = (i: number): Edge => ({ value: Number(match[2 * i + 1]), unit: (match[2 * i + 2] ?? 'px') as 'px' | '%' });
      const [left, top, right, bottom] = [edge(0), edge(1), edge(2), edge(3)];
      for (const e of [left, top, right, bottom]) if (e.unit === '%' && e.value > 100) throw new Error('a percentage edge is at most 100%');
      if (left.unit === right.unit && left.value >= right.value) throw new Error('x1 must be left of x2');
      if (top.unit === bottom.unit && top.value >= bottom.value) throw new Error('y1 must be above y2');
      options.roi = { left, top, right, bottom };
    },
  },
  scale: {
    description: 'Resize the subject (its foreground box) to fit this share of the canvas\'s width and height, `10%`-`100%`, keeping its aspect ratio; the canvas keeps its size. `original` leaves it. With a scale, `position` defaults to `center`.',
    schema: { type: 'string', pattern: SCALE_PATTERN.source, default: 'original', examples: ['80%', 'original'] },
    apply(raw, options) {
      const match = SCALE_PATTERN.exec(raw.trim().toLowerCase());
      const percent = match?.[1] === undefined ? undefined : Number(match[1]);
      if (!match || (percent !== undefined && !(percent >= 10 && percent <= 100))) throw new Error(`"${raw.slice(0, 50)}" is not original or 10%-100%`);
      options.scale = percent === undefined ? null : percent / 100;
      if (options.scale !== null) options.position = { x: 50, y: 50 };
    },
  },
  position: {
    description:
      'Where the subject\'s box goes on the canvas: `original` (where it was; the default without `scale`), `center` (the default with `scale`), or `x%` / `x% y%`: the share of the room left of / above the box (`0% 0%` top left, `100% 100%` bottom right; one value for both).',
    schema: { type: 'string', pattern: POSITION_PATTERN.source, default: 'original', examples: ['center', '50% 100%', 'original'] },
    apply(raw, options) {
      const match = POSITION_PATTERN.exec(raw.trim().toLowerCase());
      if (!match) throw new Error(`"${raw.slice(0, 50)}" is not original, center, "x%" or "x% y%"`);
      if (match[0] === 'original') options.position = 'original';
      else if (match[0] === 'center') options.position = { x: 50, y: 50 };
      else {
        const x = Number(match[1]);
        const y = match[2] === undefined ? x : Number(match[2]);
        if (x > 100 || y > 100) throw new Error('a position is 0%-100%');
        options.position = { x, y };
      }
    },
  },
  output_size: {
    description: `The output canvas, exactly, \`WxH\` in px (each 1-${MAX_CANVAS_SIDE}, at most ${MAX_CANVAS_PIXELS / 1e6} MP, and within \`size\`'s and the plan's output caps): the subject's box (with \`crop=true\`, the crop region with its \`crop_margin\`) is scaled, aspect kept, to fit the canvas inside \`padding\` (times \`scale\`, if given), and placed by \`position\` (default \`center\`) within it.`,
    schema: { type: 'string', pattern: OUTPUT_SIZE_PATTERN.source, examples: ['1000x1000', '1080x1350'] },
    apply(raw, options) {
      const match = OUTPUT_SIZE_PATTERN.exec(raw.trim());
      const width = Number(match?.[1]);
      const height = Number(match?.[2]);
      if (!match || width < 1 || height < 1 || width > MAX_CANVAS_SIDE || height > MAX_CANVAS_SIDE) throw new Error(`"${raw.slice(0, 50)}" is not WxH with each side 1-${MAX_CANVAS_SIDE}`);
      if (width * height > MAX_CANVAS_PIXELS) throw new Error(`${width}x${height} is more than ${MAX_CANVAS_PIXELS / 1e6} MP`);
      options.outputSize = { width, height };
      if (options.position === 'original') options.position = { x: 50, y: 50 };
    },
  },
  padding: {
    description:
      'With `output_size`: room kept free inside the canvas, one to four values in CSS order (`10%`; `5% 10%`: vertical horizontal; `top right bottom left`), each px (0-10000) or % of the canvas\'s side along it (0-49%); the canvas left inside must be at least 1 px each way.',
    schema: { type: 'string', pattern: MARGINS_PATTERN.source, default: '0px', examples: ['10%', '40px 20px', '5% 5% 0 5%'] },
    apply(raw, options) {
      options.padding = parseMargins(raw, { px: MAX_CANVAS_SIDE, '%': 49 });
    },
  },
  add_shadow: oneOf(
    'A soft drop shadow under the subject, made from its mask: black, blurred by 2% of the subject\'s box height, offset down by 1.5% of it (see `shadow_opacity`). Not with `channels=alpha`.',
    ['true', 'false'] as const,
    'false',
    (o, v) => (o.shadow = v === 'true' ? { opacity: o.shadow?.opacity ?? 0.5 } : null),
    { '1': 'true', '0': 'false', yes: 'true', no: 'false' },
  ),
  shadow_opacity: {
    description: 'With `add_shadow`: the shadow\'s opacity where the subject is opaque, `0`-`100` (%).',
    schema: { type: 'string', pattern: '^\\d{1,3}$', default: '50', examples: ['50'] },
    apply(raw, options) {
      const value = Number(raw.trim());
      if (!/^\d{1,3}$/.test(raw.trim()) || value > 100) throw new Error(`"${raw.slice(0, 50)}" is not 0-100`);
      if (options.shadow) options.shadow = { opacity: value / 100 };
    },
  },
  quality: oneOf(
    describeQualities(),
    QUALITIES,
    'balanced',
    (o, v) => (o.quality = v),
  ),
} satisfies Record<string, OutputOptionDefinition>;

export type OutputOptionName = keyof typeof OUTPUT_OPTION_DEFINITIONS;
/** Names accepted as form fields or query parameters; plans list these in `outputOptions`. */
export const OUTPUT_OPTION_NAMES = Object.keys(OUTPUT_OPTION_DEFINITIONS) as OutputOptionName[];

/**
 * A background image is a photo under the cutout: the result is opaque where the photo is, so it
 * does not go with a background colour, a mask alone, or a ZIP of colour and mask.
 */
export function checkBackgroundImageOptions(options: OutputOptions, name: string): void {
  if (options.bgColor) throw invalid(name, 'cannot be combined with bg_color');
  if (options.channels === 'alpha') throw invalid(name, 'cannot be combined with channels=alpha');
  if (options.format === 'zip') throw invalid(name, 'cannot be combined with format=zip (a ZIP holds the cutout\'s colour and its mask)');
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
  // A Map, not an object: a field named `__proto__` is an unknown option like any other.
  const given = new Map<OutputOptionName, string>();
  const take = (name: string, value: string, where: string) => {
    if (!Object.hasOwn(OUTPUT_OPTION_DEFINITIONS, name)) {
      throw new ApiError('invalid_option', { detail: `${name}: unknown option (${where}); options are ${OUTPUT_OPTION_NAMES.join(', ')}` });
    }
    const previous = given.get(name as OutputOptionName);
    if (previous !== undefined && previous !== value) throw invalid(name, 'given twice with different values');
    given.set(name as OutputOptionName, value);
  };
  for (const [name, value] of query) take(name, value, 'query parameter');
  for (const [name, value] of Object.entries(fields)) take(name, value, 'form field');

  const options: OutputOptions = { ...DEFAULT_OUTPUT };
  // In table order, so `crop` is known when `crop_margin` is checked against it.
  for (const name of OUTPUT_OPTION_NAMES) {
    const raw = given.get(name);
    if (raw === undefined) continue;
    try {
      OUTPUT_OPTION_DEFINITIONS[name].apply(raw, options);
    } catch (error) {
      throw invalid(name, (error as Error).message);
    }
  }
  if (given.has('crop_margin') && !options.crop) throw invalid('crop_margin', 'needs crop=true');
  if (given.has('shadow_opacity') && !options.shadow) throw invalid('shadow_opacity', 'needs add_shadow=true');
  if (options.channels === 'alpha' && options.shadow) throw invalid('add_shadow', 'cannot be combined with channels=alpha');
  if (options.channels === 'alpha' && options.bgColor) throw invalid('bg_color', 'cannot be combined with channels=alpha');
  if (options.bgImageUrl) checkBackgroundImageOptions(options, 'bg_image_url');
  if (given.has('padding') && !options.outputSize) throw invalid('padding', 'needs output_size');
  if (options.outputSize) {
    const { width, height } = options.outputSize;
    const p = options.padding;
    if (marginPixels(p.left, width) + marginPixels(p.right, width) >= width || marginPixels(p.top, height) + marginPixels(p.bottom, height) >= height) {
      throw invalid('padding', `leaves no room inside the ${width}x${height} canvas`);
    }
  }
  if (options.format === 'zip' && (options.bgColor || options.channels === 'alpha')) throw invalid('format', 'zip holds a colour image and its mask: not with bg_color or channels=alpha');

  const accept = headers.accept;
  if (typeof accept === 'string' && /(^|,)\s*application\/json\s*(;|,|$)/i.test(accept)) options.response = 'json';
  return { options, requested: [...given.keys()] };
}
