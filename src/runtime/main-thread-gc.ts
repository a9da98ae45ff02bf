/**
 * The API started by bgcut-launch (`npm start`) collects its own thread's dead image buffers once
 * 32 MiB of them have come back from the pixel workers since V8's last full collection
 * (`mainThreadGcBytes`, src/core/image/main-thread-garbage.ts), instead of V8's 64 MB: a lower
 * peak under bursts of large uploads for as many more full collections on its event loop. A
 * standalone API has no host routes of its own to delay; an app that mounts the core chooses for
 * itself (the option is off there). A BGCUT_MAIN_THREAD_GC_MB already in the environment is left
 * as it is (0 turns it off).
 */
export const MAIN_THREAD_GC_MB = 32;

/** The environment additions for a process bgcut-launch starts: none when the variable is set. */
export function mainThreadGcEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return env.BGCUT_MAIN_THREAD_GC_MB ? {} : { BGCUT_MAIN_THREAD_GC_MB: String(MAIN_THREAD_GC_MB) };
}
