/**
 * libuv's thread pool for an API process started by bgcut-launch (`npm start`). sharp runs every
 * decode, resize and encode on it, one pool thread per operation for its whole length, and the
 * app's fs, dns.lookup, zlib and crypto share it: with libuv's default of 4 and bgcut's default
 * of 4 inference slots each decoding, the app's own I/O would queue behind image work. 8 keeps
 * four threads for the app. An UV_THREADPOOL_SIZE already in the environment is left as it is.
 * libuv reads it once, at its first use: it is set in the environment of the process started
 * (docs/configuration.md, "Threads").
 */
export const LIBUV_POOL_THREADS = 8;

/** The environment additions for a process bgcut-launch starts: none when the variable is set. */
export function libuvPoolEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return env.UV_THREADPOOL_SIZE ? {} : { UV_THREADPOOL_SIZE: String(LIBUV_POOL_THREADS) };
}
