import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { FAMILIES } from '../models/families.js';
import { MIN_STRETCH_PEAK, PREPARED_INPUT, PREPARED_OUTPUT } from '../models/prepared-tensors.js';
import { toFloat32Bytes } from './float32-model.js';
import { ISNET_INT8, loadCalibrationTable, makeInt8Model, type Int8Recipe } from './int8-model.js';
import type { CalibrationTable } from './quantize-model.js';
import { prepareModel, type PrepareOptions } from './prepare-model.js';

/**
 * Built-in models: ISNet as shipped, in 4 MiB chunks, by the npm package
 * `@imgly/background-removal-data`, and the same ISNet prepared for serving (`isnet`, the
 * default: 8-bit NHWC pixels in, the stretched 8-bit mask alone out; `isnet-u16`: the mask as
 * 16-bit probability, stretched by the API; `isnet-fp32`: the same with the FP16 weights widened
 * to FP32 and no Casts; `isnet-int8`: statically quantized to 8 bits, see int8-model.ts). That package is AGPL-labelled while the ISNet
 * weights are credited upstream as permissive; a deployment that wants neither can point
 * `--model` at any ONNX file instead.
 */
export const BUILTIN_MODELS = {
  isnet: '/models/medium',
  'isnet-u16': '/models/medium',
  'isnet-fp32': '/models/medium',
  'isnet-int8': '/models/medium',
  'isnet-fp16': '/models/medium',
  'isnet-quint8': '/models/small',
} as const;

export type BuiltinModelName = keyof typeof BUILTIN_MODELS;

/** How the prepared built-ins are made from ISNet; bump PREPARE_REVISION when the rewrite changes. */
const ISNET_PREPARED = {
  sourceInput: FAMILIES.isnet.export.input,
  sourceOutput: FAMILIES.isnet.export.outputs[0]!,
  mean: FAMILIES.isnet.mean,
  inputName: PREPARED_INPUT,
  outputName: PREPARED_OUTPUT,
  minStretchPeak: MIN_STRETCH_PEAK,
  freeSize: true,
} as const;
const PREPARED: Partial<Record<BuiltinModelName, PrepareOptions>> = {
  isnet: { ...ISNET_PREPARED, maskBits: 8 },
  'isnet-u16': { ...ISNET_PREPARED, maskBits: 16 },
  'isnet-fp32': { ...ISNET_PREPARED, maskBits: 8 },
  'isnet-int8': { ...ISNET_PREPARED, maskBits: 8 },
};
const PREPARE_REVISION = 3;
/** Built-ins whose trunk is rewritten (FP32, or 8-bit: see int8-model.ts); bump TRUNK_REVISION when a rewrite changes. */
const TRUNKS: Partial<Record<BuiltinModelName, 'fp32' | Int8Recipe>> = { 'isnet-fp32': 'fp32', 'isnet-int8': ISNET_INT8 };
const TRUNK_REVISION = 3;

/** How the built-in `spec` is prepared (undefined: served as assembled). */
export function preparedOptions(spec: BuiltinModelName): PrepareOptions | undefined {
  return PREPARED[spec];
}

export function isBuiltinModel(spec: string): spec is BuiltinModelName {
  return Object.hasOwn(BUILTIN_MODELS, spec);
}

interface ResourceEntry {
  size: number;
  chunks: { hash: string; offsets: [number, number] }[];
}

export interface ResolveModelOptions {
  /** Where assembled built-in models are cached. Default: defaultCacheDir(). */
  cacheDir?: string;
}

/**
 * The model cache of this user: `$BGCUT_CACHE_DIR`, else `$XDG_CACHE_HOME/bgcut/models`, else
 * `~/.cache/bgcut/models`. Never the shared temp folder, where another local user could plant a
 * file under the name a server is about to load.
 */
export function defaultCacheDir(): string {
  if (process.env.BGCUT_CACHE_DIR) return path.resolve(process.env.BGCUT_CACHE_DIR);
  const base = process.env.XDG_CACHE_HOME ? path.resolve(process.env.XDG_CACHE_HOME) : path.join(os.homedir(), '.cache');
  return path.join(base, 'bgcut', 'models');
}

/**
 * Creates the cache folder private to this user (0700) and refuses one that other users could
 * write to: whatever is in it is still verified before use, but no one else should be able to
 * swap a file between the check and the load.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new Error(`cannot create the model cache ${dir} (${(error as Error).message}); set BGCUT_CACHE_DIR to a folder of your own`);
  }
  const info = await stat(dir);
  const uid = process.getuid?.();
  if (uid === undefined) return;
  if ((info.uid !== uid && info.uid !== 0) || (info.mode & 0o022) !== 0) {
    throw new Error(
      `model cache ${dir} is owned by uid ${info.uid} with mode ${(info.mode & 0o777).toString(8)}: other users could replace a model there; ` +
        'use a folder of your own (BGCUT_CACHE_DIR) writable by you alone',
    );
  }
}

/**
 * Returns the path of an ONNX file for `spec`: a built-in model name or a path to an `.onnx`
 * file. Built-ins are assembled once from the data package and cached; a cached file is used
 * only after its bytes are checked again (each chunk against its SHA-256 from the package; a
 * prepared model against the SHA-256 and size recorded beside it when it was made, and only when
 * the record names the same inputs: source, recipe, calibration table, preparation code), so a
 * damaged or stale file is prepared again, never loaded. The folder is private to this user
 * (ensurePrivateDir): the record is trusted as far as the folder is.
 */
export async function resolveModelFile(spec: string, options: ResolveModelOptions = {}): Promise<string> {
  if (!isBuiltinModel(spec)) {
    const file = path.resolve(spec);
    const info = await stat(file).catch(() => undefined);
    if (!info?.isFile()) {
      throw new Error(
        `model "${spec}" is neither a built-in model (${Object.keys(BUILTIN_MODELS).join(', ')}) nor an existing file`,
      );
    }
    return file;
  }
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  await ensurePrivateDir(cacheDir);
  const require = createRequire(import.meta.url);
  const resourcesFile = require.resolve('@imgly/background-removal-data/dist/resources.json');
  const dataDir = path.dirname(resourcesFile);
  const resources = JSON.parse(await readFile(resourcesFile, 'utf8')) as Record<string, ResourceEntry>;
  const entry = resources[BUILTIN_MODELS[spec]];
  if (!entry) throw new Error(`the data package has no ${BUILTIN_MODELS[spec]} resource`);

  // The file name carries the hash of the chunk list, so a new data package version never
  // reuses a stale assembly.
  const listHash = createHash('sha256')
    .update(entry.chunks.map((c) => c.hash).join(','))
    .digest('hex')
    .slice(0, 16);
  const sourceName = spec === 'isnet-quint8' ? 'isnet-quint8' : 'isnet-fp16';
  const source = path.join(cacheDir, `${sourceName}-${listHash}.onnx`);
  const assembledSource = async () => (await readVerified(source, entry).catch(() => undefined)) ?? (await assemble(source, entry, dataDir));

  const prepare = PREPARED[spec];
  if (!prepare) {
    await assembledSource();
    return source;
  }
  // The 8-bit model is made from the source and the committed calibration table: the table's
  // hash (with the recipe's) is part of the file name, so a new table never reuses an old quantization.
  const trunk = TRUNKS[spec];
  let trunkKey = '';
  let calibration: { table: CalibrationTable; sha256: string } | undefined;
  if (trunk === 'fp32') {
    trunkKey = `-t${TRUNK_REVISION}`;
  } else if (trunk) {
    calibration = await loadCalibrationTable(trunk.table);
    if (calibration.table.source.chunkListHash !== listHash) {
      throw new Error(
        `calibration table ${trunk.table} was measured on another ${BUILTIN_MODELS[spec]} (${calibration.table.source.chunkListHash}, installed ${listHash}): run npm run calibrate`,
      );
    }
    const recipeHash = createHash('sha256').update(calibration.sha256).update(JSON.stringify(trunk.quantize)).digest('hex');
    trunkKey = `-t${TRUNK_REVISION}-${recipeHash.slice(0, 16)}`;
  }
  const target = path.join(cacheDir, `${spec}-${listHash}-r${PREPARE_REVISION}${trunkKey}.onnx`);
  // Everything the prepared bytes are made from: the source's chunks, the recipe, the calibration
  // table and the code that prepares. A cached file made from these inputs, whose size and
  // SHA-256 still match what its record says, is used without preparing it again (seconds of CPU
  // per model at every start otherwise); anything else is prepared afresh and recorded.
  const inputs = preparationInputs(listHash, prepare, trunk, calibration?.sha256);
  if (await matchesRecord(target, inputs)) return target;

  const assembled = await assembledSource();
  let bytes: Uint8Array;
  if (trunk === 'fp32') bytes = prepareModel(toFloat32Bytes(assembled), prepare).bytes;
  else if (trunk) bytes = makeInt8Model(assembled, prepare, calibration!.table, trunk.quantize).bytes;
  else bytes = prepareModel(assembled, prepare).bytes;
  const digest = sha256(bytes);
  const cached = await readFile(target).catch(() => undefined);
  if (!cached || sha256(cached) !== digest) await writeAtomically(target, bytes);
  await writeRecord(target, { sha256: digest, size: bytes.length }, inputs);
  return target;
}

/**
 * What a prepared file was made from, beside it as `<file>.json`: its size and SHA-256 and the
 * keys of the inputs that made it (several: other builds of the code can make the same bytes,
 * and a cache shared by them should not flip between them).
 */
interface PreparedRecord {
  sha256: string;
  size: number;
  inputs: string[];
}
const RECORD_KEYS = 8;
const recordFile = (target: string) => `${target}.json`;

/** The modules whose code decides a prepared model's bytes; their compiled text is part of the key. */
const PREPARATION_CODE = ['./prepare-model.js', './free-input-size.js', './float32-model.js', './int8-model.js', './quantize-model.js'];
let codeHash: Promise<string> | undefined;
function preparationCodeHash(): Promise<string> {
  codeHash ??= (async () => {
    const hash = createHash('sha256');
    const require = createRequire(import.meta.url);
    hash.update(JSON.parse(await readFile(require.resolve('onnx-proto/package.json'), 'utf8')).version as string);
    // Compiled (dist) or, under a TypeScript runner such as the tests', the sources.
    for (const file of PREPARATION_CODE) {
      hash.update(await readFile(new URL(file, import.meta.url)).catch(() => readFile(new URL(file.replace(/\.js$/, '.ts'), import.meta.url))));
    }
    return hash.digest('hex');
  })();
  return codeHash;
}

async function preparationInputs(listHash: string, prepare: PrepareOptions, trunk: 'fp32' | Int8Recipe | undefined, tableHash: string | undefined): Promise<string> {
  return createHash('sha256')
    .update(JSON.stringify({ listHash, PREPARE_REVISION, TRUNK_REVISION, prepare, trunk: trunk ?? null, tableHash: tableHash ?? null }))
    .update(await preparationCodeHash())
    .digest('hex');
}

/** Whether `target` is what its record says and was made from `inputs` (its bytes hashed again: a damaged file fails). */
async function matchesRecord(target: string, inputs: Promise<string>): Promise<boolean> {
  const record = await readFile(recordFile(target), 'utf8')
    .then((text) => JSON.parse(text) as PreparedRecord)
    .catch(() => undefined);
  if (!record || !Array.isArray(record.inputs) || !record.inputs.includes(await inputs)) return false;
  const info = await stat(target).catch(() => undefined);
  if (!info?.isFile() || info.size !== record.size) return false;
  return (await hashFile(target)) === record.sha256;
}

async function writeRecord(target: string, made: { sha256: string; size: number }, inputs: Promise<string>): Promise<void> {
  const old = await readFile(recordFile(target), 'utf8')
    .then((text) => JSON.parse(text) as PreparedRecord)
    .catch(() => undefined);
  const kept = old?.sha256 === made.sha256 && Array.isArray(old.inputs) ? old.inputs : [];
  const key = await inputs;
  const record: PreparedRecord = { ...made, inputs: [key, ...kept.filter((k) => k !== key)].slice(0, RECORD_KEYS) };
  await writeAtomically(recordFile(target), Buffer.from(`${JSON.stringify(record, null, 2)}\n`));
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The cached assembly's bytes, if every chunk range matches its SHA-256; rejects otherwise. */
async function readVerified(file: string, entry: ResourceEntry): Promise<Buffer> {
  const bytes = await readFile(file);
  if (bytes.length !== entry.size) throw new Error(`${file} has the wrong size`);
  for (const chunk of entry.chunks) {
    if (sha256(bytes.subarray(chunk.offsets[0], chunk.offsets[1])) !== chunk.hash) throw new Error(`${file} does not match chunk ${chunk.hash}`);
  }
  return bytes;
}

/** Assembles the model from the package's chunks, each checked against its SHA-256, and caches it. */
async function assemble(target: string, entry: ResourceEntry, dataDir: string): Promise<Buffer> {
  const whole = Buffer.alloc(entry.size);
  const chunks = [...entry.chunks].sort((a, b) => a.offsets[0] - b.offsets[0]);
  let expectedOffset = 0;
  for (const chunk of chunks) {
    if (chunk.offsets[0] !== expectedOffset) throw new Error(`gap in model chunks at byte ${expectedOffset}`);
    const bytes = await readFile(path.join(dataDir, chunk.hash));
    const digest = sha256(bytes);
    if (digest !== chunk.hash) throw new Error(`model chunk ${chunk.hash} is corrupt (sha256 ${digest})`);
    if (bytes.length !== chunk.offsets[1] - chunk.offsets[0]) throw new Error(`model chunk ${chunk.hash} has the wrong size`);
    bytes.copy(whole, chunk.offsets[0]);
    expectedOffset = chunk.offsets[1];
  }
  if (expectedOffset !== entry.size) throw new Error(`model chunks cover ${expectedOffset} of ${entry.size} bytes`);
  await writeAtomically(target, whole);
  return whole;
}

/** Written under a unique name then renamed, so concurrent starts never see a half-written model. */
export async function writeAtomically(target: string, bytes: Uint8Array): Promise<void> {
  const partial = `${target}.${process.pid}.${Date.now()}.partial`;
  try {
    await writeFile(partial, bytes, { mode: 0o600 });
    const handle = await open(partial, 'r+');
    await handle.sync().finally(() => handle.close());
    await rename(partial, target);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  }
}

/**
 * SHA-256 of a file, streamed; reported in model metadata so clients can tell builds apart. A
 * file this process just hashed (resolveModelFile checks a prepared model by its digest) is not
 * read again while its size and modification time are unchanged.
 */
export async function fileDigest(file: string): Promise<string> {
  const before = await stat(file);
  const known = hashed.get(file);
  if (known && known.size === before.size && known.mtimeMs === before.mtimeMs) return known.sha256;
  return hashFile(file);
}
/** Always reads the file (the check of a cached model never trusts the memo); remembers the digest for fileDigest. */
async function hashFile(file: string): Promise<string> {
  const before = await stat(file);
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  const sha256 = hash.digest('hex');
  hashed.set(file, { sha256, size: before.size, mtimeMs: before.mtimeMs });
  return sha256;
}
const hashed = new Map<string, { sha256: string; size: number; mtimeMs: number }>();
