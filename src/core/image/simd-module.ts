/**
 * The WebAssembly SIMD kernels' common loading (bicubic-enlarge, mask-upscale, foreground-blur):
 * the global's typing (the project's TypeScript lib has no WebAssembly types) and a module
 * compiled once per thread, null where WebAssembly SIMD is missing (the callers then run their
 * JavaScript loops).
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
