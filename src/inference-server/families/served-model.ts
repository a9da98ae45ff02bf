import { isKnownModel } from '../../models/known-models.js';
import { isBuiltinModel, resolveModelFile } from '../model-source.js';
import { resolveFamilyModel } from './family-model.js';

export interface ServedModelSpec {
  name: string;
  /** A built-in model, a known model by rembg's name, or a file's path. */
  source: string;
  /** With a file: its family (or a known model's name), so it is checked and prepared as one. */
  family?: string | undefined;
}

export interface ServedModel {
  /** The ONNX file the sessions load. */
  file: string;
  /** Added to the model's metadata properties (family, licence, prepared). */
  properties: Record<string, string>;
  /** Lines for the start-up log: what was found and done, and any licence restriction. */
  notes: string[];
}

/**
 * What a configured model serves: a built-in model (assembled and prepared from the data
 * package), a known model found in rembg's folders or a file of a named family (checked and
 * prepared), or any other ONNX file as it is.
 */
export async function resolveServedModel(spec: ServedModelSpec, options: { cacheDir?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ServedModel> {
  const byFamily = spec.family !== undefined || (!isBuiltinModel(spec.source) && isKnownModel(spec.source));
  if (!byFamily) return { file: await resolveModelFile(spec.source, options), properties: {}, notes: [] };
  const resolved = await resolveFamilyModel(spec.family !== undefined ? { file: spec.source, family: spec.family } : { model: spec.source }, options);
  const { facts, known } = resolved;
  const licence = known?.licence;
  const profileName = known?.name ?? facts.family;
  const notes = [
    `family ${facts.family}${known ? ` (${known.name})` : ''} from ${resolved.sourceFile}, licence ${licence ? licence.spdx : 'unknown (a file of this family: check where it came from)'}`,
  ];
  if (resolved.prepared) {
    notes.push(
      `prepared: 8-bit pixels in, the stretched 8-bit mask out${facts.output === 'logits' ? ' (sigmoid in the graph)' : ''}, ` +
        `${resolved.freeSize ? 'any input size' : `${facts.size}x${facts.size} only`}; API profile: modelProfile('${profileName}')`,
    );
  } else {
    notes.push(
      `served as published (FP32 in and out) because the graph could not be prepared: ${resolved.notPrepared}; ` +
        `API profile: modelProfile('${profileName}', { prepared: false })`,
    );
  }
  if (resolved.rembgRelease === false) notes.push(`the file differs from rembg's download (MD5): its graph fits ${facts.family}, so it is served`);
  if (licence && !licence.commercialUse) notes.push(`licence ${licence.spdx}: NON-COMMERCIAL use only (${licence.url})`);
  return {
    file: resolved.file,
    properties: {
      family: facts.family,
      ...(known ? { known_model: known.name } : {}),
      licence: licence?.spdx ?? 'unknown',
      commercial_use: licence ? String(licence.commercialUse) : 'unknown',
      prepared: String(resolved.prepared),
      free_size: String(resolved.freeSize),
    },
    notes,
  };
}
