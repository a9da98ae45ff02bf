import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { FAMILIES, isFamilyName, type FamilyFacts } from '../../models/families.js';
import { KNOWN_MODELS, normalisationOf, type KnownModel } from '../../models/known-models.js';
import { MIN_STRETCH_PEAK, PREPARED_INPUT, PREPARED_OUTPUT } from '../../models/prepared-tensors.js';
import { defaultCacheDir, ensurePrivateDir, writeAtomically } from '../model-source.js';
import { prepareModel, type PrepareOptions } from '../prepare-model.js';
import { findModelFile } from './model-files.js';
import { graphSignature, signatureDifferences } from './signature.js';

/** Bump when the rewrite of family models changes, so no older preparation is reused. */
const FAMILY_PREPARE_REVISION = 1;

export interface FamilyModelSpec {
  /** A known model by rembg's name (`birefnet-general`): its file is looked for in the model folders. */
  model?: string;
  /** Or any file, with `family`: a family name (`birefnet`) or a known model's name (its facts and licence). */
  file?: string;
  family?: string;
}

export interface FamilyModel {
  /** The file to serve: the prepared model, or the source as published when it could not be prepared. */
  file: string;
  /** The file the model came from. */
  sourceFile: string;
  facts: FamilyFacts;
  known: KnownModel | undefined;
  /** True: 8-bit NHWC pixels in, the stretched 8-bit mask out. False: the file as published (FP32). */
  prepared: boolean;
  /** The prepared graph takes any input height and width (the free-size pass took it). */
  freeSize: boolean;
  /** Why the graph could not be prepared. */
  notPrepared?: string;
  /** For a known model rembg checks by MD5: whether the file is rembg's download. */
  rembgRelease?: boolean;
}

export class WrongGraphError extends Error {
  override readonly name = 'WrongGraphError';
}

const hash = (algorithm: string, bytes: Uint8Array) => createHash(algorithm).update(bytes).digest('hex');

/** Which known model and family a spec names, or a RangeError saying what is known. */
export function familyOf(spec: FamilyModelSpec): { known: KnownModel | undefined; facts: FamilyFacts } {
  const name = spec.model ?? spec.family;
  if (!name) throw new RangeError('a model name or a family is needed');
  const known = KNOWN_MODELS[name];
  if (known) return { known, facts: FAMILIES[known.family] };
  if (!spec.model && isFamilyName(name)) return { known: undefined, facts: FAMILIES[name] };
  throw new RangeError(
    `unknown ${spec.model ? 'model' : 'family'} "${name}" (models: ${Object.keys(KNOWN_MODELS).join(', ')}; families: ${Object.keys(FAMILIES).join(', ')})`,
  );
}

/**
 * Finds a family model's file, checks its graph against the family's signature (refusing it
 * with what differs), and prepares it: normalisation (and sigmoid, for logits) inside the
 * graph, 8-bit pixels in and the stretched 8-bit mask out, every other output pruned. The
 * prepared file is cached under the hash of its own bytes and checked again before each use.
 * A graph the rewrite cannot take (an opset it does not know, free input sizes) is served as
 * published, and `notPrepared` says why: the API then uses the family's FP32 profile.
 */
export async function resolveFamilyModel(spec: FamilyModelSpec, options: { cacheDir?: string; env?: NodeJS.ProcessEnv } = {}): Promise<FamilyModel> {
  const { known, facts } = familyOf(spec);
  let sourceFile: string;
  if (spec.file) {
    sourceFile = path.resolve(spec.file);
    const info = await stat(sourceFile).catch(() => undefined);
    if (!info?.isFile()) throw new Error(`model file ${sourceFile} does not exist (or is not a file)`);
  } else {
    sourceFile = await findModelFile(known!, options.env);
  }
  const bytes = await readFile(sourceFile);
  const label = known ? `${known.name} (${facts.family})` : facts.family;
  let model: onnxProto.onnx.IModelProto;
  try {
    model = onnxProto.onnx.ModelProto.decode(bytes);
  } catch (error) {
    throw new WrongGraphError(`${sourceFile} is not an ONNX model (${(error as Error).message})`);
  }
  const signature = graphSignature(model);
  const problems = signatureDifferences(signature, facts);
  if (problems.length > 0) throw new WrongGraphError(`${sourceFile} is not a ${label} graph: ${problems.join('; ')}`);
  const rembgRelease = known?.rembgMd5 ? hash('md5', bytes) === known.rembgMd5 : undefined;

  const normalisation = known ? normalisationOf(known) : facts;
  const prepare: PrepareOptions = {
    sourceInput: signature.inputs[0]!.name,
    sourceOutput: signature.outputs[0]!.name,
    mean: normalisation.mean,
    std: normalisation.std,
    channelOrder: normalisation.channelOrder,
    sigmoid: facts.output === 'logits',
    maskBits: 8,
    inputName: PREPARED_INPUT,
    outputName: PREPARED_OUTPUT,
    minStretchPeak: MIN_STRETCH_PEAK,
    // The trunks of these exports may pin the batch (reshapes with constant shapes): keep the file's.
    freeBatch: false,
  };
  let prepared: Uint8Array;
  let freeSize = false;
  try {
    if (facts.freeSize) {
      try {
        prepared = prepareModel(model, { ...prepare, freeSize: true }).bytes;
        freeSize = true;
      } catch {
        // The pass refused this graph (it may have rewritten part of it): prepare a fresh copy at the published size.
        prepared = prepareModel(bytes, prepare).bytes;
      }
    } else {
      prepared = prepareModel(model, prepare).bytes;
    }
  } catch (error) {
    return { file: sourceFile, sourceFile, facts, known, prepared: false, freeSize: false, notPrepared: (error as Error).message, ...(rembgRelease === undefined ? {} : { rembgRelease }) };
  }
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  await ensurePrivateDir(cacheDir);
  const digest = hash('sha256', prepared);
  const target = path.join(cacheDir, `${known?.name ?? facts.family}-r${FAMILY_PREPARE_REVISION}-${digest.slice(0, 16)}.onnx`);
  const cached = await readFile(target).catch(() => undefined);
  if (!cached || hash('sha256', cached) !== digest) await writeAtomically(target, prepared);
  return { file: target, sourceFile, facts, known, prepared: true, freeSize, ...(rembgRelease === undefined ? {} : { rembgRelease }) };
}
