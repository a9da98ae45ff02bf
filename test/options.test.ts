import { describe, expect, it } from 'vitest';
import { createRemoveBgHandler, resolveOptions, type KeyStore } from '../src/core/index.js';
import { resolveServerOptions } from '../src/inference-server/server.js';

const keyStore: KeyStore = { findByHash: async () => undefined };

describe('handler options', () => {
  it('fills in documented defaults', () => {
    const resolved = resolveOptions({ keyStore });
    expect(resolved.inference).toMatchObject({ address: '127.0.0.1:50051', modelName: 'isnet', timeoutMs: 30_000 });
    expect(resolved.limits).toMatchObject({ maxUploadBytes: 25 * 1024 * 1024, maxInputPixels: 40_000_000 });
    expect(resolved.plans.free?.requestsPerMinute).toBe(10);
    expect(resolved.concurrencyLeaseMs).toBe(10_000);
  });

  it('fails at creation on a bad value, naming it', () => {
    expect(() => createRemoveBgHandler({} as never)).toThrow(/keyStore/);
    expect(() => resolveOptions({ keyStore, limits: { maxUploadBytes: -1 } })).toThrow(/limits.maxUploadBytes/);
    expect(() => resolveOptions({ keyStore, inference: { address: 'nowhere' } })).toThrow(/inference.address/);
    expect(() => resolveOptions({ keyStore, pngCompressionLevel: 12 })).toThrow(/pngCompressionLevel/);
    expect(() => resolveOptions({ keyStore, plans: { a: { requestsPerMinute: 0 } } })).toThrow(/plans.a/);
    expect(() => resolveOptions({ keyStore, inference: { maxMessageBytes: 1024 } })).toThrow(/maxMessageBytes/);
    expect(() => resolveOptions({ keyStore, concurrencyLeaseMs: 500 })).toThrow(/concurrencyLeaseMs/);
    expect(() => resolveOptions({ keyStore, concurrencyLeaseMs: 1500.5 })).toThrow(/concurrencyLeaseMs/);
    expect(() => resolveOptions({ keyStore, mainThreadGcBytes: -1 })).toThrow(/mainThreadGcBytes/);
    expect(() => resolveOptions({ keyStore, mainThreadGcBytes: Number.NaN })).toThrow(/mainThreadGcBytes/);
    expect(resolveOptions({ keyStore }).mainThreadGcBytes).toBe(0);
    expect(() => resolveOptions({ keyStore, pngBands: 0 })).toThrow(/pngBands/);
    expect(() => resolveOptions({ keyStore, pngBands: 17 })).toThrow(/pngBands/);
    expect(() => resolveOptions({ keyStore, pngBands: 2.5 })).toThrow(/pngBands/);
    expect(resolveOptions({ keyStore }).pngBands).toBe(1);
    expect(resolveOptions({ keyStore, pngBands: 16 }).pngBands).toBe(16);
  });
});

describe('inference server options', () => {
  it('splits the cores between workers by default', () => {
    const resolved = resolveServerOptions({ workers: 1 });
    expect(resolved.intraOpThreads).toBeGreaterThanOrEqual(1);
    expect(resolved.maxQueue).toBe(4);
  });
  it('refuses nonsense', () => {
    expect(() => resolveServerOptions({ workers: 0 })).toThrow(/workers/);
    expect(() => resolveServerOptions({ port: 70000 })).toThrow(/port/);
    expect(() => resolveServerOptions({ models: [{ name: 'a b', source: 'isnet-fp16' }] })).toThrow(/model name/);
    expect(() => resolveServerOptions({ providers: [] })).toThrow(/providers/);
  });
});
