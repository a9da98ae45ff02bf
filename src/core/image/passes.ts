/**
 * The `quality` option and what `best` runs: plain data, with no dependencies, so the model
 * profiles (profile.ts) and the passes that use them (multi-pass.ts) both import it and neither
 * imports the other.
 */
/**
 * The `quality` option: how much work one cutout gets.
 * - `fast`: one model pass, no foreground colour estimation, a faster PNG level.
 * - `balanced`: one model pass (the default; what every cutout was before the option).
 * - `best`: several model passes merged into one mask (see BEST_PASSES).
 */
export const QUALITIES = ['fast', 'balanced', 'best'] as const;
export type Quality = (typeof QUALITIES)[number];

/** A region of the upright full-size image, in pixels. */
export interface Region {
  left: number;
  top: number;
  width: number;
  height: number;
}

/** Which extra passes `best` runs and how it merges them (the candidates measured by bench/best-candidates.ts). */
export interface BestPasses {
  /** Also run the mirror image and merge its (mirrored back) mask with the first pass. */
  mirror: boolean;
  /**
   * Run a second pass on the object's crop when the crop covers at most this fraction of the
   * image's area (so the model sees the object larger); 0 for never.
   */
  cropMaxArea: number;
  /** Margin added around the object's box for the crop, as a fraction of the box's longer side. */
  cropMargin: number;
  /** Also run the crop's mirror image. */
  cropMirror: boolean;
  /**
   * Inside the crop: `replace` takes the crop's mask; `mean` averages it with the whole-image
   * mask; `confidence` weighs each by how sure it is (|2p - 1|). Near the crop's inner edges the
   * crop's weight ramps down to 0 over the margin, so no seam shows.
   */
  cropMerge: 'replace' | 'mean' | 'confidence' | 'max';
  /**
   * For `mean` and `confidence`: the crop's weight against the whole-image mask (itself the merge
   * of the image and its mirror when `mirror`); 0.5 with a mirror gives each of the three passes a third.
   */
  cropWeight: number;
  /** Merging the whole-image passes (image and mirror): plain mean or confidence-weighted. */
  mirrorMerge: 'mean' | 'confidence' | 'max';
  /**
   * Tiles: when the image's longer side is at least this many pixels, also run the model on two
   * overlapping halves along it, merged like a crop. Infinity for never.
   */
  tileMinSide: number;
  /**
   * Models that take any size: the whole image again at each of these sizes (one pass each),
   * brought to the first pass's size and merged with it by `scaleMerge` (default mean).
   */
  scales?: number[];
  scaleMerge?: 'mean' | 'confidence' | 'max';
  /** Models that take any size: the size the crop (or tile) passes run at; default the first pass's. */
  cropSize?: number;
}
