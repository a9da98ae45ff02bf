/**
 * What `npm start`'s launcher (src/runtime/launch.ts) sets for the API of a build: its glibc
 * malloc tuning, libuv pool size and V8 flags. The bench starts the API of this build and of a
 * `--compare` build each with its own, read from that build's dist, so a change of any of them
 * shows side by side instead of both running under this build's.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { GLIBC_MALLOC_TUNING } from '../src/runtime/allocator.js';
import { libuvPoolEnv } from '../src/runtime/libuv-pool.js';
import { V8_HEAP_FLAGS } from '../src/runtime/v8-heap.js';

export interface LauncherSettings {
  malloc: Record<string, string>;
  libuv: Record<string, string>;
  v8Flags: string[];
}

export const OWN_LAUNCHER: LauncherSettings = { malloc: { ...GLIBC_MALLOC_TUNING }, libuv: libuvPoolEnv(), v8Flags: [...V8_HEAP_FLAGS] };

/** The launcher settings of the build whose dist folder is `dist` (e.g. `../main/dist`). */
export async function launcherSettingsOf(dist: string): Promise<LauncherSettings> {
  const load = (file: string) => import(pathToFileURL(path.resolve(dist, 'src/runtime', file)).href);
  // Builds from before issue 26 have no libuv-pool module: their launcher left the pool alone.
  const loadIfThere = (file: string) =>
    load(file).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ERR_MODULE_NOT_FOUND') return undefined;
      throw error;
    });
  const [allocator, libuv, v8] = await Promise.all([load('allocator.js'), loadIfThere('libuv-pool.js'), load('v8-heap.js')]);
  return { malloc: { ...allocator.GLIBC_MALLOC_TUNING }, libuv: libuv ? libuv.libuvPoolEnv() : {}, v8Flags: [...v8.V8_HEAP_FLAGS] };
}
