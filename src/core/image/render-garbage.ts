import v8 from 'node:v8';
import vm from 'node:vm';
import { countKernel } from './kernel-calls.js';

/**
 * A pixel worker's garbage collection after full-size renders. A render allocates its big
 * buffers outside the JavaScript heap (the full-size decode, mask, colour, sharp's encoded output:
 * about 100 MB at 12 MP), and the worker's heap itself stays small (about 7 MB), so V8 collects
 * them only once 64 MB more such memory is held than after its last collection: with renders one
 * after another, one or two renders' worth of dead buffers stays resident beside the live one.
 * The fast PNG encoder (@napi-rs/image) also keeps a copy of the whole RGBA (48 MB at 12 MP) in
 * native memory V8 is not told about, released only when its object is collected.
 *
 * So the worker collects right after a render once COLLECT_AFTER_PIXELS full-size pixels have
 * been rendered since the last collection: a 12 MP render's buffers and the encoder's copy go
 * as it ends (with the encoded result alive, moved to the main thread), instead of staying
 * resident through the model-input decodes that the same worker runs until the next render.
 * Measured with 16 concurrent 12 MP uploads (docs/benchmarks.md, "Memory: what holds it"). It
 * runs in the worker thread (a few ms of a heap this small), never on the host's event loop.
 *
 * V8 hands out its collector only to code started with `--expose-gc`; when the process was not,
 * the flag is set just long enough to take the function from a new context and then unset, so
 * nothing else in the host sees a `gc` global.
 */
export const COLLECT_AFTER_PIXELS = 4_000_000;

let pixelsSinceCollection = 0;
let collector: (() => void) | null | undefined;

export function gcFunction(): (() => void) | null {
  if (collector !== undefined) return collector;
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return (collector = exposed);
  try {
    v8.setFlagsFromString('--expose-gc');
    collector = vm.runInNewContext('gc') as () => void;
  } catch {
    collector = null;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
  return typeof collector === 'function' ? collector : (collector = null);
}

/** After a render of `pixels` (full-size): collects when enough has been rendered since the last time. */
export function collectAfterRender(pixels: number): void {
  pixelsSinceCollection += pixels;
  if (pixelsSinceCollection < COLLECT_AFTER_PIXELS) return;
  const gc = gcFunction();
  if (gc) {
    gc();
    countKernel('collectGarbage');
  }
  pixelsSinceCollection = 0;
}
