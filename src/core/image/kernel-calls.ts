/**
 * How many times each pixel kernel whose cost grows with the image (or with the model's grid, for
 * `best`'s merges) has run in this thread. The request path runs them only in the pixel pool's
 * worker threads (pixel-pool.ts): a test reads the main thread's counts after real cutouts and
 * fails if any is not zero. One integer increment per call, never per pixel.
 */
export const kernelCalls: Record<string, number> = Object.create(null);

export function countKernel(name: string): void {
  kernelCalls[name] = (kernelCalls[name] ?? 0) + 1;
}
