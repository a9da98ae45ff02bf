/**
 * The WebAssembly SIMD kernels' common loading (bicubic-enlarge, lanczos-reduce, mask-upscale,
 * render-compose, foreground-blur): the global's typing (the project's TypeScript lib has no
 * WebAssembly types), a module compiled once per thread, null where WebAssembly SIMD is missing
 * (the callers then run their JavaScript loops), and its instance's memory kept between calls.
 */
interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number }) => { buffer: ArrayBuffer; grow(pages: number): number };
}
export const wasm = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

/** A getter of the module compiled from `base64` on first use, then kept (null when it does not compile). */
export function compiledOnce(base64: string): () => object | null {
  let compiled: object | null | undefined;
  return () => {
    if (compiled === undefined) {
      try {
        compiled = new wasm.Module(Buffer.from(base64, 'base64'));
      } catch {
        compiled = null;
      }
    }
    return compiled;
  };
}

/** `n` rounded up to a multiple of 16: where the kernels' regions in module memory start (SIMD loads of 16 bytes). */
export const align = (n: number) => (n + 15) & ~15;

/** WebAssembly's page: memories are made and grown in these. */
const PAGE = 65536;
type Memory = { buffer: ArrayBuffer; grow(pages: number): number };

/**
 * The thread's one instance of a module, its memory kept and grown as needed (a fresh one costs
 * page faults): a getter of it with at least `bytes` of memory. Growing detaches the memory's
 * old buffer: views are made after each call.
 */
export function grownInstance<K>(): (module: object, bytes: number) => { memory: Memory; kernels: K } {
  let kept: { memory: Memory; kernels: K } | undefined;
  return (module, bytes) => {
    if (!kept) {
      const memory = new wasm.Memory({ initial: Math.max(1, Math.ceil(bytes / PAGE)) });
      kept = { memory, kernels: new wasm.Instance(module, { env: { memory } }).exports as K };
    } else if (kept.memory.buffer.byteLength < bytes) kept.memory.grow(Math.ceil((bytes - kept.memory.buffer.byteLength) / PAGE));
    return kept;
  };
}

/**
 * A getter of an instance of a module with at least `bytes` of memory: the thread's kept one up
 * to `keptBytes` (made anew, larger, when too small: a fresh memory's page faults cost more than
 * the kernels, so it is kept), and for a larger job one of its own, dropped after it.
 */
export function boundedInstance<K>(keptBytes: number): (module: object, bytes: number) => { memory: Memory; kernels: K } {
  let kept: { memory: Memory; kernels: K; bytes: number } | undefined;
  const made = (module: object, pages: number) => {
    const memory = new wasm.Memory({ initial: pages });
    return { memory, kernels: new wasm.Instance(module, { env: { memory } }).exports as K, bytes: pages * PAGE };
  };
  return (module, bytes) => {
    if (bytes > keptBytes) return made(module, Math.ceil(bytes / PAGE));
    if (!kept || kept.bytes < bytes) kept = made(module, Math.ceil(bytes / PAGE));
    return kept;
  };
}
