/**
 * Which malloc the API process runs on. On glibc Linux, libvips (sharp) and V8 free large image
 * buffers from many threads; glibc keeps much of that memory in per-thread arenas long after the
 * images are gone, so an API under a burst of large uploads keeps a high RSS. jemalloc returns
 * it (sharp's own documentation recommends it on glibc Linux). It can only be chosen when a
 * process starts (LD_PRELOAD), so a launcher re-executes the app with it: see launch.ts.
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

export type AllocatorChoice =
  | { preload: string }
  | { preload: null; reason: string };

/**
 * Whether to preload jemalloc for a process started with `env`: the library's path, or why not
 * (the reason is logged: the fallback is silent in behaviour, never in the log).
 * `BGCUT_JEMALLOC=0` turns it off; `BGCUT_JEMALLOC=/path/libjemalloc.so.2` names the library.
 */
export function chooseAllocator(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform, paths = JEMALLOC_PATHS): AllocatorChoice {
  const setting = env.BGCUT_JEMALLOC;
  if (setting === '0' || setting === 'false') return { preload: null, reason: 'BGCUT_JEMALLOC=0' };
  if (platform !== 'linux') return { preload: null, reason: `not Linux (${platform}): the system malloc is used` };
  if ((env.LD_PRELOAD ?? '').includes('jemalloc')) return { preload: null, reason: 'jemalloc is preloaded already' };
  if (env.LD_PRELOAD) return { preload: null, reason: `LD_PRELOAD is set already (${env.LD_PRELOAD}): left as it is` };
  if (!isGlibc()) return { preload: null, reason: 'not glibc (musl or other): its malloc is kept' };
  const candidates = setting && setting !== '1' && setting !== 'true' ? [setting] : paths;
  const found = candidates.find((p) => existsSync(p));
  if (!found) return { preload: null, reason: `libjemalloc.so.2 not found (${candidates.join(', ')}); install it with apt-get install libjemalloc2` };
  return { preload: found };
}

/** Whether this process runs on glibc (Node reports the runtime's C library in its report header). */
function isGlibc(): boolean {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return Boolean(header?.glibcVersionRuntime);
}

/** The malloc this process really runs on, from its mapped libraries (Linux), for logs and tests. */
export function runningAllocator(): 'jemalloc' | 'system' {
  try {
    return readFileSync('/proc/self/maps', 'utf8').includes('libjemalloc') ? 'jemalloc' : 'system';
  } catch {
    return 'system';
  }
}
