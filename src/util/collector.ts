import v8 from 'node:v8';
import vm from 'node:vm';

/** V8's `gc`, as `--expose-gc` gives it: no argument for a full collection, `{ type: 'minor' }` for the young generation alone. */
export type Collector = (options?: { type?: 'major' | 'minor' }) => void;

let collector: Collector | null | undefined;

/**
 * V8's collector, or null where it cannot be had. V8 hands it out only to code started with
 * `--expose-gc`; when the process was not, the flag is set just long enough to take the function
 * from a new context and then unset, so nothing else in the host sees a `gc` global.
 */
export function v8Collector(): Collector | null {
  if (collector !== undefined) return collector;
  const exposed = (globalThis as { gc?: Collector }).gc;
  if (typeof exposed === 'function') return (collector = exposed);
  try {
    v8.setFlagsFromString('--expose-gc');
    collector = vm.runInNewContext('gc') as Collector;
  } catch {
    collector = null;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
  return typeof collector === 'function' ? collector : (collector = null);
}
