import { BEST_PASSES, maxPasses, type Quality } from '../image/multi-pass.js';
import type { ModeCost, PreprocessingProfile } from '../image/profile.js';
import { aboutProfile } from './model-profile.js';

/** One model as `GET /v1/models` lists it. */
export interface ModelListEntry {
  /** What a request names with `model=`. */
  name: string;
  /** The one used when a request names none. */
  default: boolean;
  family: string;
  /** Model input size, in pixels: the image is resized to it. */
  input: { width: number; height: number };
  licence: string;
  /** False for a licence that forbids commercial use; null when unknown. */
  commercialUse: boolean | null;
  /** Said when the licence restricts use. */
  notice?: string;
  /** Size and model passes of each quality mode. */
  modes: { fast: ModeCost; balanced: ModeCost; best: ModeCost };
}

/** What this API serves: every configured model, the default first. */
export function listModels(models: Record<string, PreprocessingProfile>, defaultModel: string): { models: ModelListEntry[] } {
  const names = [defaultModel, ...Object.keys(models).filter((name) => name !== defaultModel).sort()];
  return {
    models: names.map((name) => {
      const profile = models[name]!;
      const about = aboutProfile(profile);
      return {
        name,
        default: name === defaultModel,
        family: about.family,
        input: { width: profile.width, height: profile.height },
        licence: about.licence,
        commercialUse: about.commercialUse,
        ...(about.commercialUse === false ? { notice: `Non-commercial use only (${about.licence}).` } : {}),
        modes: modeCosts(profile),
      };
    }),
  };
}

/**
 * Each mode's whole-image size and most passes on a model: its own mode table (ISNet's, for a
 * served model that takes any size), else its fixed size, one pass, and BEST_PASSES for `best`.
 */
export function modeCosts(profile: PreprocessingProfile): Record<Quality, ModeCost> {
  const size = (quality: Quality) => profile.modes?.[quality]?.size ?? Math.max(profile.width, profile.height);
  return {
    fast: { size: size('fast'), passes: 1 },
    balanced: { size: size('balanced'), passes: 1 },
    best: { size: size('best'), passes: maxPasses(profile.modes?.best?.passes ?? BEST_PASSES) },
  };
}
