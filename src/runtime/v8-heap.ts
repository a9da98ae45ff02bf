/**
 * The V8 heap settings the launcher (launch.ts) starts the API with: the old generation's initial
 * size, `--initial-old-space-size=128` (MB), and the young generation's limit,
 * `--max-semi-space-size=2` (MB per semi-space).
 *
 * Why: the API's JS heap is small (about 18 MB live) while each request allocates megabytes of
 * image buffers outside it. Left to itself V8 sizes the old generation's limit to the small live
 * heap and ran a full mark-compact after almost every 0.7 MP request (21 in 21 requests); with
 * the initial size set it ran 6 in 21, and the API's CPU per 0.7 MP PNG fell by about a fifth
 * (160 vs 197.5 ms, A/B). The cost: image buffers that are garbage live a little longer, ~20 MB
 * more peak RSS under 16 concurrent 12 MP uploads (348 vs 326 MB; docs/benchmarks-history.md, "The V8
 * heap"). The flag reserves nothing: V8 still grows the heap only as objects need it, and
 * external (image) memory still triggers collections of its own.
 *
 * And the young generation's semi-spaces at most 2 MB (`--max-semi-space-size=2`; V8's default
 * lets them grow to 16 MB). Why: V8 frees a dead Buffer's memory only when it collects the
 * Buffer's object, and young objects are collected when the new space fills. Each thread of the
 * API (the host's, the pixel worker, the inference thread: the flag is the process's, so every
 * isolate takes it) allocates little JavaScript and many megabytes of Buffers, so with 16 MB
 * semi-spaces their young collections were seconds apart: the socket chunks of sixteen uploads,
 * grpc-js's framed copies of the model calls' messages, the workers' task buffers waited for them,
 * and each thread kept up to 32 MB of new space committed. With 2 MB: peak RSS under 16 concurrent
 * 12 MP uploads 284-287 against 309-319 MB (six fresh processes each), the idle API 7-9 MB
 * smaller, CPU per image the same (docs/configuration.md, "Memory"). Each young collection of a
 * small new space is short (it copies only what survives).
 *
 * V8 reads them only when the process starts, and Node refuses the first in NODE_OPTIONS, so they
 * are command-line flags of the API process; an app that mounts the core in its own process passes
 * them to `node` itself.
 *
 * `BGCUT_V8_HEAP=default` leaves V8's own sizing; nothing is added when the process is already
 * started with an initial heap size of its own (`--initial-old-space-size`, `--initial-heap-size`),
 * and the semi-space flag is left out when it was started with a young-generation size of its own.
 */
export const V8_HEAP_FLAGS: readonly string[] = Object.freeze(['--initial-old-space-size=128', '--max-semi-space-size=2']);

/** Flags that size the initial heap: when the user passed one, the launcher adds no heap flag. */
const USER_HEAP_FLAGS = ['--initial-old-space-size', '--initial-heap-size', '--initial_old_space_size', '--initial_heap_size'];
/** Flags that size the young generation: when the user passed one, the launcher leaves the semi-spaces to it. */
const USER_YOUNG_FLAGS = ['--max-semi-space-size', '--max_semi_space_size', '--min-semi-space-size', '--min_semi_space_size', '--semi-space-growth-factor', '--semi_space_growth_factor'];

export interface HeapChoice {
  /** Node flags to start the app with (empty: none). */
  flags: string[];
  /** Why none, when none (logged). */
  reason?: string;
}

/**
 * The heap flags to start an app with, given the flags `node` itself was started with and the
 * environment. Throws a RangeError for a `BGCUT_V8_HEAP` it does not know.
 */
export function chooseHeapFlags(execArgv: readonly string[] = process.execArgv, env: NodeJS.ProcessEnv = process.env): HeapChoice {
  const setting = env.BGCUT_V8_HEAP;
  if (setting !== undefined && setting !== '' && setting !== 'tuned' && setting !== 'default') {
    throw new RangeError(`BGCUT_V8_HEAP=${setting}: expected tuned (the default) or default (V8's own sizing)`);
  }
  if (setting === 'default') return { flags: [], reason: 'BGCUT_V8_HEAP=default' };
  const given = (flags: string[]) => execArgv.find((arg) => flags.some((flag) => arg === flag || arg.startsWith(`${flag}=`)));
  const own = given(USER_HEAP_FLAGS);
  if (own) return { flags: [], reason: `${own} given already` };
  const young = given(USER_YOUNG_FLAGS);
  return young ? { flags: V8_HEAP_FLAGS.filter((flag) => !flag.startsWith('--max-semi-space-size')), reason: `${young} given already` } : { flags: [...V8_HEAP_FLAGS] };
}
