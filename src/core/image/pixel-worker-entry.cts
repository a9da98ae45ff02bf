/**
 * The file the pixel pool's threads load (pixel-pool.ts). piscina loads a handler file with
 * `require()` first and falls back to `import()`; on Node 20, `require()` of an ES module that an
 * `import()` is loading at the same time can abort the whole process (V8 FATAL ERROR
 * "IsGraphAsync must be used on an instantiated module", seen once in CI). This CommonJS file is
 * what `require()` sees; the ES module with the work (pixel-worker.ts) is loaded by `import()` only,
 * once per thread.
 */
let loaded: ReturnType<typeof load> | undefined;
function load() {
  return import('./pixel-worker.js');
}
const worker = () => (loaded ??= load());

export async function fullSizeMask(task: Parameters<Awaited<ReturnType<typeof load>>['fullSizeMask']>[0]): Promise<unknown> {
  return (await worker()).fullSizeMask(task);
}
export async function mergeMasks(task: Parameters<Awaited<ReturnType<typeof load>>['mergeMasks']>[0]): Promise<unknown> {
  return (await worker()).mergeMasks(task);
}
export async function upscaleMask(task: Parameters<Awaited<ReturnType<typeof load>>['upscaleMask']>[0]): Promise<unknown> {
  return (await worker()).upscaleMask(task);
}
export async function looksConfidence(task: Parameters<Awaited<ReturnType<typeof load>>['looksConfidence']>[0]): Promise<unknown> {
  return (await worker()).looksConfidence(task);
}
export async function workingView(task: Parameters<Awaited<ReturnType<typeof load>>['workingView']>[0]): Promise<unknown> {
  return (await worker()).workingView(task);
}
export async function objectCrop(task: Parameters<Awaited<ReturnType<typeof load>>['objectCrop']>[0]): Promise<unknown> {
  return (await worker()).objectCrop(task);
}
export async function render(task: Parameters<Awaited<ReturnType<typeof load>>['render']>[0]): Promise<unknown> {
  return (await worker()).render(task);
}
export async function renderBand(task: Parameters<Awaited<ReturnType<typeof load>>['renderBand']>[0]): Promise<unknown> {
  return (await worker()).renderBand(task);
}
export async function modelInput(task: Parameters<Awaited<ReturnType<typeof load>>['modelInput']>[0]): Promise<unknown> {
  return (await worker()).modelInput(task);
}
export async function fullDecode(task: Parameters<Awaited<ReturnType<typeof load>>['fullDecode']>[0]): Promise<unknown> {
  return (await worker()).fullDecode(task);
}
export async function passInputs(task: Parameters<Awaited<ReturnType<typeof load>>['passInputs']>[0]): Promise<unknown> {
  return (await worker()).passInputs(task);
}
export async function removeBgBody(task: Parameters<Awaited<ReturnType<typeof load>>['removeBgBody']>[0]): Promise<unknown> {
  return (await worker()).removeBgBody(task);
}
export async function kernelCalls(): Promise<unknown> {
  return (await worker()).kernelCalls();
}
export async function decodeBase64(task: Parameters<Awaited<ReturnType<typeof load>>['decodeBase64']>[0]): Promise<unknown> {
  return (await worker()).decodeBase64(task);
}
