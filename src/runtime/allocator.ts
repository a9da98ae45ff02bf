/**
 * Which malloc the API process runs on. On glibc Linux, libvips (sharp) and V8 free large image
 * buffers from many threads; glibc's default malloc keeps much of that memory in per-thread
 * arenas long after the images are gone, so an API under a burst of large uploads keeps a high
 * RSS. Measured (docs/benchmarks.md, "Memory: the allocator"), glibc tuned with fewer arenas and
 * large blocks mapped on their own gives the API the lowest peak; jemalloc costs the least CPU
 * but peaks higher. Either can only be chosen when a process starts (glibc reads its variables
 * when malloc initialises; LD_PRELOAD is read by the loader), so a launcher re-executes the app
 * with them set: see launch.ts.
 *
 * The choice, from the environment:
 * - `BGCUT_MALLOC=tuned` (the default): glibc with {@link GLIBC_MALLOC_TUNING}.
 * - `BGCUT_MALLOC=jemalloc`: jemalloc preloaded, from `BGCUT_JEMALLOC=/path/libjemalloc.so.2`
 *   when that names a file, else the first of {@link JEMALLOC_PATHS} there; when none is there,
 *   the tuning instead, and the reason is logged.
 * - `BGCUT_MALLOC=system`: nothing set; the app runs in the launcher's own process as it is.
 * - `BGCUT_JEMALLOC`, the older setting, is read only when `BGCUT_MALLOC` is unset: a path (or
 *   `1`/`true`) means jemalloc; `0`/`false` means "not jemalloc", which is now the default, the
 *   tuning (it turned off the launcher's jemalloc when that was the default, and the point of it
 *   was the API's memory, which the tuning serves best). `BGCUT_MALLOC=system` is the way to
 *   the untouched system malloc.
 * Whatever is asked, nothing is set off Linux, on a C library other than glibc (musl's malloc is
 * left alone), or when the user set any of {@link USER_MALLOC_VARIABLES} already (theirs are kept).
 */
import { existsSync, readFileSync } from 'node:fs';

/** Where Debian/Ubuntu (`apt-get install libjemalloc2`) and RHEL-likes put the library. */
export const JEMALLOC_PATHS = [
  '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
  '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2',
  '/usr/lib64/libjemalloc.so.2',
  '/usr/lib/libjemalloc.so.2',
  '/usr/local/lib/libjemalloc.so.2',
];

/**
 * The glibc malloc settings the launcher sets by default: one arena for every thread, and every
 * block over 256 KiB (each image buffer) mapped on its own and returned to the system when freed.
 * One arena rather than 2: the API's peak under 16 concurrent 12 MP uploads was 30-40 MB lower,
 * at about the same CPU (docs/benchmarks-history.md, "The main thread's dead buffers"); sharp still uses
 * every core, since it only checks that the variable is set.
 */
export const GLIBC_MALLOC_TUNING: Readonly<{ MALLOC_ARENA_MAX: string; MALLOC_MMAP_THRESHOLD_: string }> = Object.freeze({
  MALLOC_ARENA_MAX: '1',
  MALLOC_MMAP_THRESHOLD_: '262144',
});

/** Variables that choose or tune malloc: when the user set any of them, the launcher sets nothing. */
export const USER_MALLOC_VARIABLES = ['LD_PRELOAD', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'GLIBC_TUNABLES'] as const;

/**
 * The variable through which the launcher tells the app which variables it added (names, comma
 * separated), so the app can leave them out of processes it starts itself: see
 * {@link withoutLauncherMalloc}.
 */
export const LAUNCHER_MALLOC_ENV = 'BGCUT_MALLOC_ENV';

export type MallocName = 'tuned' | 'jemalloc' | 'system';

export type AllocatorChoice =
  /** Re-execute the app with `env` added; `reason` says why this is not what was asked, if it is not. */
  | { malloc: 'tuned' | 'jemalloc'; env: Record<string, string>; reason?: string }
  /** Set nothing: run the app as it is, for this reason (logged). */
  | { malloc: 'system'; env: null; reason: string };

/**
 * The malloc to start an app with, given the environment it would start with (see the top of
 * this file). Throws a RangeError for a `BGCUT_MALLOC` it does not know.
 */
export function chooseAllocator(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform, paths = JEMALLOC_PATHS, glibc = isGlibc): AllocatorChoice {
  const { wanted, setting } = requested(env);
  if (wanted === 'system') return { malloc: 'system', env: null, reason: setting };
  if (platform !== 'linux') return { malloc: 'system', env: null, reason: `not Linux (${platform}): the system malloc is used` };
  const userSet = USER_MALLOC_VARIABLES.filter((name) => env[name]);
  if (userSet.length > 0) {
    const what = userSet.map((name) => `${name}=${env[name]}`).join(' ');
    return { malloc: 'system', env: null, reason: `${what} set already: left as it is` };
  }
  if (!glibc()) return { malloc: 'system', env: null, reason: 'not glibc (musl or other): its malloc is kept' };
  if (wanted === 'jemalloc') {
    const candidates = jemallocCandidates(env, paths);
    const found = candidates.find((p) => existsSync(p));
    if (found) return { malloc: 'jemalloc', env: { LD_PRELOAD: found } };
    return {
      malloc: 'tuned',
      env: { ...GLIBC_MALLOC_TUNING },
      reason: `${setting} but libjemalloc.so.2 is not there (${candidates.join(', ')}; apt-get install libjemalloc2): glibc tuned instead`,
    };
  }
  return { malloc: 'tuned', env: { ...GLIBC_MALLOC_TUNING } };
}

/** The malloc asked for, and the setting that asked (for the log). */
function requested(env: NodeJS.ProcessEnv): { wanted: MallocName; setting: string } {
  const malloc = env.BGCUT_MALLOC;
  if (malloc) {
    if (malloc === 'tuned' || malloc === 'jemalloc' || malloc === 'system') return { wanted: malloc, setting: `BGCUT_MALLOC=${malloc}` };
    throw new RangeError(`BGCUT_MALLOC=${malloc}: expected tuned (the default), jemalloc or system`);
  }
  const jemalloc = env.BGCUT_JEMALLOC;
  if (jemalloc === '0' || jemalloc === 'false') return { wanted: 'tuned', setting: `BGCUT_JEMALLOC=${jemalloc}` };
  if (jemalloc) return { wanted: 'jemalloc', setting: `BGCUT_JEMALLOC=${jemalloc}` };
  return { wanted: 'tuned', setting: 'default' };
}

/** `BGCUT_JEMALLOC` when it names a library, else the usual places. */
function jemallocCandidates(env: NodeJS.ProcessEnv, paths: string[]): string[] {
  const named = env.BGCUT_JEMALLOC;
  return named && !['0', '1', 'false', 'true'].includes(named) ? [named] : paths;
}

/** The jemalloc library `BGCUT_MALLOC=jemalloc` would preload with this environment, if it is there. */
export function findJemalloc(env: NodeJS.ProcessEnv = process.env, paths = JEMALLOC_PATHS): string | undefined {
  return jemallocCandidates(env, paths).find((p) => existsSync(p));
}

let glibcRuntime: boolean | undefined;
/** Whether this process runs on glibc (Node reports the runtime's C library in its report header). */
function isGlibc(): boolean {
  if (glibcRuntime === undefined) {
    const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
    glibcRuntime = Boolean(header?.glibcVersionRuntime);
  }
  return glibcRuntime;
}

/**
 * `env` without the variables the launcher added for this app (listed in `BGCUT_MALLOC_ENV`),
 * nor that list: for the processes the app starts itself, which should get the malloc they would
 * have had without the launcher. Variables the user set are never in the list (the launcher sets
 * nothing when they are there), so they are kept.
 */
export function withoutLauncherMalloc(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const added = new Set((env[LAUNCHER_MALLOC_ENV] ?? '').split(',').filter(Boolean));
  return Object.fromEntries(Object.entries(env).filter(([name]) => name !== LAUNCHER_MALLOC_ENV && !added.has(name)));
}

/**
 * The malloc this process really runs on, for logs and tests: jemalloc when it is mapped (Linux,
 * /proc/self/maps), else 'glibc tuned' when this process runs on glibc and started with the
 * launcher's {@link GLIBC_MALLOC_TUNING} in its environment, else 'system'.
 */
export function runningAllocator(): 'jemalloc' | 'glibc tuned' | 'system' {
  try {
    if (readFileSync('/proc/self/maps', 'utf8').includes('libjemalloc')) return 'jemalloc';
  } catch {
    return 'system';
  }
  const tuned = Object.entries(GLIBC_MALLOC_TUNING).every(([name, value]) => process.env[name] === value);
  return tuned && isGlibc() ? 'glibc tuned' : 'system';
}
