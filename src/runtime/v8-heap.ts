/**
 * The V8 heap settings the launcher (launch.ts) starts the API with: the old generation's initial
 * size, `--initial-old-space-size=128` (MB), and the young generation's limit,
 * `--max-semi-space-size=2` (MB per semi-space). Not `--no-memory-reducer` (below).
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
 * `BGCUT_V8_HEAP=default` leaves V8's own settings (both out); each flag is left out when the
 * process is already started with a setting of its own for it (`--initial-old-space-size`,
 * `--initial-heap-size`; a young-generation size). Flags given to the launcher's `node` reach the
 * app as they are.
 */
export const INITIAL_HEAP_FLAG = '--initial-old-space-size=128';
/** The young generation's limit (why: above). */
export const SEMI_SPACE_FLAG = '--max-semi-space-size=2';

/**
 * Not added: `--no-memory-reducer`, a host's choice. V8's memory reducer starts a full collection
 * of a thread whose JavaScript allocates little for a while, which is what the API's main thread
 * looks like while its pixel work runs in workers, and runs it in memory-reducing mode: the whole
 * heap compacted and the dead ArrayBuffers swept and freed in the pause itself. Those were the
 * main thread's longest full collections during 24 MP cutouts, 21-27 ms (`--trace-gc-nvp`:
 * `reduce_memory=1`; docs/benchmarks-history.md, "Tenth round: the main thread's full collections
 * were V8's memory reducer"). But they also free what the thread no longer needs: with the flag the
 * 16 x 12 MP peak was 301 MB (302, 295, 301) against 282 (281, 285, 282) without it in the same run,
 * over the 300 MB target. In the host bench its pauses showed in one run of three (39.2,
 * 29.1 and 12.8 ms in one cell; it fires ~8 s after a full collection, in some cells and not
 * others). A trade: the launcher keeps the memory target; a host that would rather not have those
 * pauses starts `node` with `--no-memory-reducer` (the launcher passes it on).
 */
export const V8_HEAP_FLAGS: readonly string[] = Object.freeze([INITIAL_HEAP_FLAG, SEMI_SPACE_FLAG]);

/** Flags that size the initial heap: when the user passed one, the launcher adds no size of its own. */
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
  const given = (names: string[]) => execArgv.find((arg) => names.some((flag) => arg === flag || arg.startsWith(`${flag}=`)));
  const ownSize = given(USER_HEAP_FLAGS);
  const ownYoung = given(USER_YOUNG_FLAGS);
  const flags = [...(ownSize ? [] : [INITIAL_HEAP_FLAG]), ...(ownYoung ? [] : [SEMI_SPACE_FLAG])];
  const reason = [ownSize, ownYoung].filter(Boolean).map((flag) => `${flag} given already`).join(', ');
  return reason ? { flags, reason } : { flags };
}
