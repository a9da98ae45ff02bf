import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/**
 * Built-in models: ISNet as shipped, in 4 MiB chunks, by the npm package
 * `@imgly/background-removal-data`. That package is AGPL-labelled while the ISNet weights are
 * credited upstream as permissive; a deployment that wants neither can point `--model` at any
 * ONNX file instead.
 */
export const BUILTIN_MODELS = {
  'isnet-fp16': '/models/medium',
  'isnet-quint8': '/models/small',
} as const;

export type BuiltinModelName = keyof typeof BUILTIN_MODELS;

export function isBuiltinModel(spec: string): spec is BuiltinModelName {
  return Object.hasOwn(BUILTIN_MODELS, spec);
}

interface ResourceEntry {
  size: number;
  chunks: { hash: string; offsets: [number, number] }[];
}

export interface ResolveModelOptions {
  /** Where assembled built-in models are cached. Default: `$BGCUT_CACHE_DIR` or `<tmp>/bgcut-models`. */
  cacheDir?: string;
}

/**
 * Returns the path of an ONNX file for `spec`: a built-in model name (assembled once from the
 * data package and cached, each chunk checked against its SHA-256) or a path to an `.onnx` file.
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
  const cacheDir = options.cacheDir ?? process.env.BGCUT_CACHE_DIR ?? path.join(os.tmpdir(), 'bgcut-models');
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
  const target = path.join(cacheDir, `${spec}-${listHash}.onnx`);
  const existing = await stat(target).catch(() => undefined);
  if (existing?.size === entry.size) return target;

  await mkdir(cacheDir, { recursive: true });
  // Written under a unique name then renamed, so concurrent starts never see a half-written model.
  const partial = `${target}.${process.pid}.${Date.now()}.partial`;
  const out = await open(partial, 'w');
  try {
    const chunks = [...entry.chunks].sort((a, b) => a.offsets[0] - b.offsets[0]);
    let expectedOffset = 0;
    for (const chunk of chunks) {
      if (chunk.offsets[0] !== expectedOffset) throw new Error(`gap in model chunks at byte ${expectedOffset}`);
      const bytes = await readFile(path.join(dataDir, chunk.hash));
      const digest = createHash('sha256').update(bytes).digest('hex');
      if (digest !== chunk.hash) throw new Error(`model chunk ${chunk.hash} is corrupt (sha256 ${digest})`);
      if (bytes.length !== chunk.offsets[1] - chunk.offsets[0]) throw new Error(`model chunk ${chunk.hash} has the wrong size`);
      await out.write(bytes, 0, bytes.length, chunk.offsets[0]);
      expectedOffset = chunk.offsets[1];
    }
    if (expectedOffset !== entry.size) throw new Error(`model chunks cover ${expectedOffset} of ${entry.size} bytes`);
    await out.sync();
  } catch (error) {
    await out.close();
    await rm(partial, { force: true });
    throw error;
  }
  await out.close();
  await rename(partial, target);
  return target;
}

/** SHA-256 of a file, streamed; used as the model version so clients can tell builds apart. */
export async function fileDigest(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
