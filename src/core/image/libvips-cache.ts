import sharp from 'sharp';

/**
 * libvips's operation cache, as bgcut sets it: off. sharp turns it on (50 MB, 20 files, 100
 * operations) each time a thread loads it, and the cache is the process's, shared by every thread:
 * it keeps recent operations, and with them references to their inputs and outputs, alive after
 * the request is done. bgcut never repeats an operation on the same input, so it saves no work
 * (docs/benchmarks.md, "libvips's operation cache").
 */
export const LIBVIPS_CACHE = Object.freeze({ memory: 0, files: 0, items: 0 });

/** Applies LIBVIPS_CACHE: in each thread that loads sharp, after it did (sharp's load resets it). */
export function applyLibvipsCache(): void {
  sharp.cache(LIBVIPS_CACHE);
}
