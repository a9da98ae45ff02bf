import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A package loaded when it is first used rather than when the module naming it is imported: for
 * the optional back-ends `bgcut/core` exports (BullMQ, the S3 client), so an API that uses
 * neither does not carry them. Both are CommonJS packages that Node's `import` resolves to the
 * same files, so a value made with the package elsewhere (an S3Client passed in) is of the same
 * classes. Loading bullmq and @aws-sdk/client-s3 at start cost the API about 40 MB of resident
 * memory (docs/benchmarks.md, "Memory: what holds it").
 */
export function lazyModule<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
