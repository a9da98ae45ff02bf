import { releaseNow, RELEASE_MIN_BYTES } from '../util/release-now.js';

let copiesBody: Promise<boolean> | undefined;

/**
 * Whether this runtime's Response copies a byte body as it is made, as the Fetch standard says
 * ("set source to a copy of the bytes held by object"; undici, Node's fetch, does). Only then may
 * the core's body be freed once the Response exists: the host writes the Response's bytes later,
 * when and how it likes. Checked once, on 64 KiB made for it, freed right after its Response was
 * made (util/release-now.ts) and read back from the Response; any doubt answers no, and bodies are
 * left to the collector.
 */
export function responseCopiesBody(): Promise<boolean> {
  copiesBody ??= (async () => {
    try {
      const probe = new Uint8Array(RELEASE_MIN_BYTES).fill(7);
      const response = new Response(probe);
      if (!releaseNow(probe)) return false;
      const read = new Uint8Array(await response.arrayBuffer());
      return read.length === RELEASE_MIN_BYTES && read.every((byte) => byte === 7);
    } catch {
      return false;
    }
  })();
  return copiesBody;
}
