import { ApiError } from '../errors.js';

/**
 * remove.bg's request parameters (https://www.remove.bg/api, `POST /v1.0/removebg`) and how
 * each maps onto bgcut's output options. One table: the docs' parameter table and the mapping
 * cannot drift apart. Where bgcut does not do what remove.bg does, the entry says so (`note`),
 * and the value is accepted and answered as remove.bg answers its `auto`/default.
 */

/** The image's source fields: exactly one per request. */
export const SOURCE_FIELDS = ['image_file', 'image_file_b64', 'image_url'] as const;

/** remove.bg's foreground types (`type`); bgcut does not classify, so any of them cuts out the same way. */
export const FOREGROUND_TYPES = ['auto', 'person', 'product', 'car', 'animal', 'graphic', 'transportation', 'other'] as const;

/** remove.bg `size` -> bgcut `size`. */
export const SIZES: Record<string, string> = {
  preview: 'preview',
  small: 'preview',
  regular: 'preview',
  medium: 'medium',
  hd: 'hd',
  full: 'full',
  '4k': 'full',
  '50mp': 'full',
  auto: 'auto',
};

/** What the mapping layer needs besides bgcut's options: how to answer. */
export interface RemoveBgRequest {
  /** bgcut output options, by bgcut's names, as text (parsed and checked by the core's option table). */
  fields: Record<string, string>;
  /** The foreground type to report in X-Type (what remove.bg answers), or undefined with `type_level=none`. */
  reportedType: string | undefined;
}

export interface ParameterDefinition {
  /** What remove.bg documents, and what bgcut does with it (docs/remove-bg.md is written from this). */
  note: string;
  /** Checks the value and adds bgcut options; throws a message saying why the value is invalid. */
  map(value: string, into: Record<string, string>, all: ReadonlyMap<string, string>): void;
}

const lower = (value: string) => value.trim().toLowerCase();
const quote = (value: string) => `"${value.slice(0, 50)}"`;

function oneOf(values: readonly string[], value: string, name: string): string {
  const v = lower(value);
  if (!values.includes(v)) throw new Error(`${quote(value)} is not one of ${values.join(', ')} (${name})`);
  return v;
}

const BOOLEAN: Record<string, 'true' | 'false'> = { true: 'true', false: 'false', '1': 'true', '0': 'false', yes: 'true', no: 'false' };
function boolean(value: string): 'true' | 'false' {
  const v = BOOLEAN[lower(value)];
  if (!v) throw new Error(`${quote(value)} is not true or false`);
  return v;
}

/** `0% 0% 100% 100%`, the whole image: remove.bg's default region of interest. */
const WHOLE_IMAGE_ROI = /^0(%|px)?\s+0(%|px)?\s+100%\s+100%$/;

export const PARAMETERS: Record<string, ParameterDefinition> = {
  size: {
    note: '`preview`/`small`/`regular` -> bgcut `preview` (0.25 MP); `medium` (1.5 MP) and `hd` (4 MP) -> the same caps; `full`/`4k`/`50MP` -> `full` (the input size, within the plan); `auto` -> `auto`. Default `preview`, as remove.bg.',
    map(value, into) {
      const size = SIZES[lower(value)];
      if (!size) throw new Error(`${quote(value)} is not one of preview, small, regular, medium, hd, full, 4k, 50MP, auto`);
      into.size = size;
    },
  },
  type: {
    note: 'Accepted; bgcut does not classify the foreground, so every type is cut out alike. X-Type answers the type given, or `other` for `auto`.',
    map(value) {
      oneOf(FOREGROUND_TYPES, value, 'type');
    },
  },
  type_level: {
    note: '`none`, `1`, `2`, `latest`: accepted; `none` leaves X-Type out, as remove.bg does.',
    map(value) {
      oneOf(['none', '1', '2', 'latest'], value, 'type_level');
    },
  },
  format: {
    note: '`auto` -> JPEG when the result is opaque (an opaque `bg_color`), else PNG, as remove.bg; `png`, `jpg`, `webp`, `zip` (`color.jpg` + `alpha.png`) as they are.',
    map(value, into, all) {
      const format = oneOf(['auto', 'png', 'jpg', 'jpeg', 'webp', 'zip'], value, 'format');
      if (format !== 'auto') into.format = format;
      else into.format = (opaqueBackground(all.get('bg_color')) || (all.get('bg_image_url') ?? '').trim() !== '') && lower(all.get('channels') ?? 'rgba') !== 'alpha' ? 'jpg' : 'png';
    },
  },
  roi: {
    note: '`x1 y1 x2 y2` in px or % -> `roi`: only the region may be foreground. Default the whole image.',
    map(value, into) {
      const roi = lower(value).replace(/\s+/g, ' ');
      if (!WHOLE_IMAGE_ROI.test(roi)) into.roi = roi;
    },
  },
  crop: {
    note: '-> `crop`.',
    map(value, into) {
      into.crop = boolean(value);
    },
  },
  crop_margin: {
    note: 'One, two or four values in CSS order (`30px`, `10% 5%`, `0 10px 20px 10px`), px or % of the box -> `crop_margin`; ignored without `crop=true`, as remove.bg.',
    map(value, into, all) {
      const parts = value.trim().split(/\s+/);
      if (parts.length !== 1 && parts.length !== 2 && parts.length !== 4) throw new Error(`${quote(value)} is not 1, 2 or 4 margins`);
      if (BOOLEAN[lower(all.get('crop') ?? 'false')] !== 'true') return;
      into.crop_margin = parts.join(' ');
    },
  },
  scale: {
    note: '`10%`-`100%` -> `scale`: the subject resized to fit that share of the canvas; `original` (the default) leaves it. A scale centres the subject unless `position` says otherwise.',
    map(value, into) {
      if (lower(value) !== 'original') into.scale = value;
    },
  },
  position: {
    note: '`original`, `center`, `x%` or `x% y%` -> `position` (default `original`, or `center` with a `scale`).',
    map(value, into) {
      into.position = value.trim().replace(/\s+/g, ' ');
    },
  },
  channels: {
    note: '`rgba` or `alpha` -> `channels`.',
    map(value, into) {
      into.channels = oneOf(['rgba', 'alpha'], value, 'channels');
    },
  },
  bg_color: {
    note: 'Hex without `#` (`81d4fa`, `fff`, `81d4fa77`) or a colour name -> `bg_color`.',
    map(value, into) {
      if (value.trim() === '') return;
      into.bg_color = value.trim();
    },
  },
  bg_image_url: {
    note: '-> `bg_image_url`: the photo behind the cutout, fetched under `image_url`\'s address policy, cover-fit to the output. Not with `bg_color` (as remove.bg).',
    map(value, into) {
      if (value.trim() === '') return;
      into.bg_image_url = value.trim();
    },
  },
  bg_image_file: {
    note: 'A multipart file part -> bgcut\'s `bg_image` part (cover-fit, as `bg_image_url`); as a text field, 400.',
    map() {
      throw new Error('send it as a multipart file part (with a filename), not as a text field');
    },
  },
  add_shadow: {
    note: '-> `add_shadow`: a soft drop shadow made from the mask, for every subject (remove.bg adds its shadows to cars only).',
    map(value, into) {
      into.add_shadow = boolean(value);
    },
  },
  semitransparency: {
    note: 'Accepted; bgcut\'s mask is always soft (semi-transparent where the model is unsure), so `true` and `false` answer alike.',
    map(value) {
      boolean(value);
    },
  },
  shadow_type: {
    note: '`car`, `3d`, `drop`: checked; every type gets bgcut\'s drop shadow.',
    map(value) {
      oneOf(['car', '3d', 'drop'], value, 'shadow_type');
    },
  },
  shadow_opacity: {
    note: '`0`-`100` -> `shadow_opacity`, with `add_shadow=true` (ignored without it, as remove.bg).',
    map(value, into, all) {
      const n = Number(value);
      if (value.trim() === '' || !Number.isInteger(n) || n < 0 || n > 100) throw new Error(`${quote(value)} is not 0-100`);
      if (BOOLEAN[lower(all.get('add_shadow') ?? 'false')] === 'true') into.shadow_opacity = String(n);
    },
  },
  // bgcut's own options, for callers who want them on this endpoint too.
  quality: {
    note: 'bgcut\'s own `quality` (`fast`, `balanced`, `best`).',
    map(value, into) {
      into.quality = value;
    },
  },
  model: {
    note: 'bgcut\'s own `model`.',
    map(value, into) {
      into.model = value;
    },
  },
};

/** An opaque background colour (`bg_color` without an alpha below 1): then `format=auto` is JPEG, as remove.bg. */
function opaqueBackground(color: string | undefined): boolean {
  const value = color?.trim().toLowerCase();
  if (!value || value === 'transparent') return false;
  const hex = /^#?([0-9a-f]{3}|[0-9a-f]{4}|[0-9a-f]{6}|[0-9a-f]{8})$/.exec(value);
  if (!hex) return true;
  const digits = hex[1]!;
  if (digits.length === 4) return digits[3] === 'f';
  if (digits.length === 8) return digits.slice(6) === 'ff';
  return true;
}

/**
 * remove.bg's parameters (text, by remove.bg's names; the source fields already taken out) as
 * bgcut options. An unknown parameter or a bad value is a 400 `invalid_option` naming it.
 */
export function mapParameters(given: ReadonlyMap<string, string>, backgroundFile = false): RemoveBgRequest {
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  fields.size = 'preview';
  fields.format = 'png';
  for (const [name, value] of given) {
    if (!Object.hasOwn(PARAMETERS, name)) {
      throw new ApiError('invalid_option', { detail: `${name.slice(0, 100)}: unknown parameter; parameters are ${Object.keys(PARAMETERS).join(', ')}` });
    }
    try {
      PARAMETERS[name]!.map(value, fields, given);
    } catch (error) {
      throw new ApiError('invalid_option', { detail: `${name}: ${(error as Error).message}` });
    }
  }
  // A background photo makes the result opaque: `auto` is JPEG then, as remove.bg (a bg_image_file part is not in `given`).
  if (!given.has('format')) PARAMETERS.format!.map('auto', fields, backgroundFile ? new Map([...given, ['bg_image_url', 'part']]) : given);
  // remove.bg's 4-digit hex (#rgba) is not a CSS form bgcut reads: widen it to 8 digits.
  const hex4 = fields.bg_color && /^#?([0-9a-f]{4})$/i.exec(fields.bg_color);
  if (hex4) fields.bg_color = `#${[...hex4[1]!].map((d) => d + d).join('')}`;
  else if (fields.bg_color && /^[0-9a-f]{3}([0-9a-f]{3}([0-9a-f]{2})?)?$/i.test(fields.bg_color)) fields.bg_color = `#${fields.bg_color}`;
  const level = lower(given.get('type_level') ?? '1');
  const type = lower(given.get('type') ?? 'auto');
  return { fields, reportedType: level === 'none' ? undefined : type === 'auto' ? 'other' : type };
}
