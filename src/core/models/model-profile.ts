import { ISNET_FP32_PROFILE, ISNET_PROFILE, type ModelAbout, type PreprocessingProfile } from '../image/profile.js';
import { FAMILIES, isFamilyName, type FamilyName } from '../../models/families.js';
import { KNOWN_MODELS, LICENCES, normalisationOf, type KnownModel } from '../../models/known-models.js';
import { PREPARED_INPUT, PREPARED_OUTPUT } from '../../models/prepared-tensors.js';

export interface ModelProfileOptions {
  /**
   * True (the default): the inference server prepared the file (8-bit NHWC pixels in, the
   * stretched 8-bit mask out, normalisation and sigmoid inside the graph). False: it serves the
   * file as published (its log says so when a graph cannot be prepared): FP32 in, FP32 out,
   * normalised, activated and stretched by the API.
   */
  prepared?: boolean;
  /** For `prepared: false`: the file's tensor names, when they differ from the family's published export. */
  inputName?: string;
  outputName?: string;
}

/**
 * The preprocessing profile for a model the inference server serves by family: a known model
 * by rembg's name (`birefnet-general`, `u2net`, ...) or a family (`birefnet`, for a file of that
 * family served with `--model-file PATH --family birefnet`).
 */
export function modelProfile(nameOrFamily: string, options: ModelProfileOptions = {}): PreprocessingProfile {
  const known: KnownModel | undefined = KNOWN_MODELS[nameOrFamily];
  if (!known && !isFamilyName(nameOrFamily)) {
    throw new RangeError(`unknown model or family "${nameOrFamily}" (models: ${Object.keys(KNOWN_MODELS).join(', ')}; families: ${Object.keys(FAMILIES).join(', ')})`);
  }
  const family = FAMILIES[known?.family ?? (nameOrFamily as FamilyName)];
  const normalisation = known ? normalisationOf(known) : family;
  const about: ModelAbout = {
    family: family.family,
    licence: known ? known.licence.spdx : 'unknown (a file of this family: see where it came from)',
    commercialUse: known ? known.licence.commercialUse : null,
  };
  const size = { width: family.size, height: family.size };
  if (options.prepared ?? true) {
    return {
      inputName: PREPARED_INPUT,
      outputName: PREPARED_OUTPUT,
      ...size,
      inputDatatype: 'UINT8',
      inputLayout: 'NHWC',
      mean: normalisation.mean,
      std: normalisation.std,
      outputDatatype: 'UINT8',
      minMaxNormalize: false,
      about,
    };
  }
  return {
    inputName: options.inputName ?? family.export.input,
    outputName: options.outputName ?? family.export.outputs[0]!,
    ...size,
    inputDatatype: 'FP32',
    inputLayout: 'NCHW',
    mean: normalisation.mean,
    std: normalisation.std,
    outputDatatype: 'FP32',
    minMaxNormalize: true,
    outputActivation: family.output === 'logits' ? 'sigmoid' : 'none',
    about,
  };
}

/** What `GET /v1/models` says of a profile: its own `about`, ISNet's for the built-in profiles, else what the profile shows. */
export function aboutProfile(profile: PreprocessingProfile): ModelAbout {
  if (profile.about) return profile.about;
  if (profile === ISNET_PROFILE || profile === ISNET_FP32_PROFILE) {
    // The weights are credited upstream as Apache-2.0; the npm package bgcut assembles them from is AGPL-labelled.
    return { family: 'isnet', licence: `${LICENCES.isnet.spdx} (weights; from @imgly/background-removal-data, AGPL-3.0-labelled)`, commercialUse: true };
  }
  return { family: 'custom', licence: 'unknown', commercialUse: null };
}
