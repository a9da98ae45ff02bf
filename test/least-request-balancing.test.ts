import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceClient, type Balancing } from '../src/core/inference/inference-client.js';
import { CallStats, CHOICES, pickLeastLoaded } from '../src/core/inference/least-request-balancer.js';
import { resolveOptions, type KeyStore } from '../src/core/index.js';
import { writeIdentityModel } from './helpers/identity-model.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { metricValue } from './helpers/fuzz.js';

/** Random draws in order, for a known pair of candidates: a = floor(x0 * n), then b from the rest. */
const draws = (...xs: number[]) => () => xs.shift()!;

describe('inference.balancing', () => {
  const keyStore: KeyStore = { findByHash: async () => undefined };
  it('defaults to least-request, takes round-robin, refuses anything else by name', () => {
    expect(resolveOptions({ keyStore }).inference.balancing).toBe('least-request');
    expect(resolveOptions({ keyStore, inference: { balancing: 'round-robin' } }).inference.balancing).toBe('round-robin');
    expect(() => resolveOptions({ keyStore, inference: { balancing: 'random' as never } })).toThrow(/inference.balancing/);
  });
});

describe('power of d choices', () => {
  it('takes the drawn server with fewer calls open for that model, whatever the other models; then fewer in all', () => {
    const stats = new CallStats();
    stats.started('a', 'isnet');
    stats.started('a', 'isnet');
    for (let i = 0; i < 5; i++) stats.started('b', 'other');
    stats.started('b', 'isnet');
    // a (2 open for isnet) and b (1 open for isnet, 6 in all): b.
    expect(pickLeastLoaded(['a', 'b'], 'isnet', stats, true, draws(0, 0))).toBe(1);
    // For 'other', b has 5 open and a none: a.
    expect(pickLeastLoaded(['a', 'b'], 'other', stats, true, draws(0, 0))).toBe(0);
    // Drawn c first, then a, both with 2 open for isnet: the one with fewer in all (a), not the first drawn.
    stats.started('c', 'isnet');
    stats.started('c', 'isnet');
    stats.started('c', 'other');
    expect(pickLeastLoaded(['a', 'c'], 'isnet', stats, true, draws(0.99, 0))).toBe(0);
    stats.ended('c', 'isnet', undefined);
    stats.ended('c', 'isnet', undefined);
    expect(stats.inFlight('c', 'isnet')).toBe(0);
    expect(stats.totalInFlight('c')).toBe(1);
  });

  it(`compares ${CHOICES} servers drawn at random, not all of them`, () => {
    const stats = new CallStats();
    for (const server of ['a', 'b', 'c']) stats.started(server, 'm');
    // d is idle but not drawn (draws 0, 0, 0 take a, b, c in order): the first of three equals.
    expect(pickLeastLoaded(['a', 'b', 'c', 'd'], 'm', stats, true, draws(0, 0, 0))).toBe(0);
    // Drawn (0.99 takes d first): d.
    expect(pickLeastLoaded(['a', 'b', 'c', 'd'], 'm', stats, true, draws(0.99, 0, 0))).toBe(3);
    // With three servers every pick is exact: a burst spreads 2 / 2 / 2, as round-robin does.
    const burst = new CallStats();
    const servers = ['a', 'b', 'c'];
    for (let i = 0; i < 6; i++) burst.started(servers[pickLeastLoaded(servers, 'm', burst)]!, 'm');
    expect(servers.map((s) => burst.inFlight(s, 'm'))).toEqual([2, 2, 2]);
  });

  it('weighs calls open by service time: an idle slow server loses to a fast one with a few calls open, not with many', () => {
    let now = 0;
    const stats = new CallStats(() => now);
    stats.started('fast', 'm');
    stats.ended('fast', 'm', 25);
    stats.started('slow', 'm');
    stats.ended('slow', 'm', 125);
    const open = (n: number) => {
      for (let i = 0; i < n; i++) stats.started('fast', 'm');
    };
    open(3); // fast: (3 + 1) x 25 = 100 < slow: (0 + 1) x 125
    expect(pickLeastLoaded(['slow', 'fast'], 'm', stats, true, draws(0, 0))).toBe(1);
    // Counting calls alone, the idle slow server would win.
    expect(pickLeastLoaded(['slow', 'fast'], 'm', stats, false, draws(0, 0))).toBe(0);
    open(2); // fast: 6 x 25 = 150 > 125
    expect(pickLeastLoaded(['slow', 'fast'], 'm', stats, true, draws(0, 0))).toBe(0);
  });

  it('fades a server\'s time while it gets no answers, so a server that was slow is tried again', () => {
    let now = 0;
    const stats = new CallStats(() => now);
    stats.ended('s', 'm', 100);
    expect(stats.meanMs('s', 'm')).toBeCloseTo(100);
    now = 30_000;
    expect(stats.meanMs('s', 'm')).toBeCloseTo(100 / Math.E);
    // A new answer moves the faded mean part of the way (not back to the old one).
    stats.ended('s', 'm', 10);
    expect(stats.meanMs('s', 'm')).toBeCloseTo(100 / Math.E + 0.3 * (10 - 100 / Math.E));
  });
});

describe('balancing over three inference servers, one of them slow', () => {
  let dir: string;
  let fast: InferenceProcess[];
  let slow: InferenceProcess;
  const input = { name: 'x', datatype: 'UINT8' as const, shape: [1, 16, 16, 3], data: new Uint8Array(16 * 16 * 3) };
  const output = { name: 'y', datatype: 'UINT8' as const };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-balancing-test-'));
    const model = await writeIdentityModel(dir, 16);
    const args = (delayMs: number) => ['--model', `tiny=${model}`, '--workers', '1', '--threads', '1', '--queue', '100', '--metrics-port', '0', '--test-run-delay-ms', String(delayMs)];
    [slow, ...fast] = await Promise.all([400, 5, 5].map((delay) => startInferenceProcess(args(delay))));
  });
  afterAll(async () => {
    await Promise.all([slow, ...(fast ?? [])].filter(Boolean).map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  /** ModelInfer calls answered OK by each server (slow first) while `work` ran. */
  async function callsDuring(work: () => Promise<unknown>): Promise<number[]> {
    const count = async (s: InferenceProcess) => metricValue(await (await fetch(s.metricsUrl!)).text(), 'bgcut_inference_calls_total', 'status="OK"');
    const before = await Promise.all([slow, ...fast].map(count));
    await work();
    const after = await Promise.all([slow, ...fast].map(count));
    return after.map((n, i) => n - before[i]!);
  }

  /**
   * Through one client with `balancing`: 3 rounds of 3 calls at once, unmeasured (every
   * connection is up, the policy has seen each server answer), then 10 rounds, counted.
   */
  async function load(balancing: Balancing) {
    const client = new InferenceClient({ address: [slow, ...fast].map((s) => s.address), balancing, timeoutMs: 60_000, maxMessageBytes: 1 << 20, retryAfterSeconds: 1 });
    const rounds = async (n: number) => {
      for (let i = 0; i < n; i++) await Promise.all([0, 1, 2].map(() => client.infer('tiny', input, output, new AbortController().signal)));
    };
    try {
      await rounds(3);
      return await callsDuring(() => rounds(10));
    } finally {
      client.close();
    }
  }

  it('round-robin gives the slow server its full third', async () => {
    const [slowCalls, ...fastCalls] = await load('round-robin');
    expect(slowCalls).toBe(10);
    expect(fastCalls).toEqual([10, 10]);
  });

  it('least-request sends the slow server (almost) nothing once it has seen its time', async () => {
    const [slowCalls, ...fastCalls] = await load('least-request');
    console.log(`least-request: calls to the slow server ${slowCalls}, to the fast ones ${fastCalls.join(', ')}`);
    expect(slowCalls + fastCalls[0]! + fastCalls[1]!).toBe(30);
    // Once it has answered, (0 + 1) x 400 ms loses to a fast server with fewer than 79 calls
    // open; one call is allowed for the case where the warm-up never drew it.
    expect(slowCalls).toBeLessThanOrEqual(1);
  });
});
