import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import express from 'express';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { MODEL_INFER_SPAN } from '../src/protocol/index.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { spanRecord, type SpanRecord } from './helpers/otel-spans.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

// The built helper, loaded into the inference server's process with --import (`npm test` builds first).
const SPANS_HELPER = pathToFileURL(fileURLToPath(new URL('../dist/test/helpers/otel-spans.js', import.meta.url))).href;

describe('OpenTelemetry: one trace across the API and the inference server', () => {
  const exporter = new InMemorySpanExporter();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bgcut-tracing-'));
  const serverSpansFile = path.join(dir, 'server-spans.jsonl');
  let keys: TestKeys;
  let inference: InferenceProcess;
  let handler: RemoveBgHandler;
  let server: http.Server;

  beforeAll(async () => {
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    keys = await createTestKeys();
    inference = await startInferenceProcess([], { NODE_OPTIONS: `--import ${SPANS_HELPER}`, BGCUT_TEST_SPANS_FILE: serverSpansFile });
    handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inference.address, timeoutMs: 120_000 } });
    await handler.ready();
    server = express().use(createRemoveBgRouter(handler)).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
  });
  afterAll(async () => {
    server?.close();
    await handler?.close();
    await inference?.stop();
    trace.disable();
    rmSync(dir, { recursive: true, force: true });
  });

  it('spans admission, upload, segment (decode), the ModelInfer call, its server side around session.run, render and encode, in one trace', async () => {
    const form = new FormData();
    form.append('file', new Blob([(await objectOnTexture(320, 240)).bytes]), 'photo.jpg');
    const response = await fetch(`${baseUrlOf(server)}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': keys.good }, body: form });
    expect(response.status).toBe(200);
    await response.arrayBuffer();

    const apiSpans = exporter.getFinishedSpans().map((s) => spanRecord(s));
    const serverSpans: SpanRecord[] = readFileSync(serverSpansFile, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as SpanRecord);
    const root = apiSpans.find((s) => s.name === 'bgcut remove-bg')!;
    expect(root).toBeDefined();
    expect(root.attributes['http.response.status_code']).toBe(200);
    const spans = [...apiSpans, ...serverSpans].filter((s) => s.traceId === root.traceId);
    const byName = (name: string, pid: number) => spans.find((s) => s.name === name && s.pid === pid);
    for (const s of [...spans].sort((a, b) => a.startMs - b.startMs)) {
      console.log(`${s.pid === process.pid ? 'api      ' : 'inference'} ${s.name.padEnd(44)} ${String(s.durationMs).padStart(8)} ms  span ${s.spanId} parent ${s.parentSpanId}`);
    }

    // The API side: each step a child of the root; decode inside segment; encode inside render.
    for (const name of ['bgcut.admission', 'bgcut.upload', 'bgcut.segment', 'bgcut.render']) expect(byName(name, process.pid)?.parentSpanId, name).toBe(root.spanId);
    expect(byName('bgcut.decode', process.pid)?.parentSpanId).toBe(byName('bgcut.segment', process.pid)!.spanId);
    expect(byName('bgcut.encode', process.pid)?.parentSpanId).toBe(byName('bgcut.render', process.pid)!.spanId);
    const call = byName(MODEL_INFER_SPAN, process.pid)!;
    expect(call.parentSpanId).toBe(byName('bgcut.segment', process.pid)!.spanId);
    expect(call.kind).toBe(2); // CLIENT

    // The inference server, another process, continued the same trace from the gRPC metadata.
    const served = byName(MODEL_INFER_SPAN, inference.child.pid!)!;
    expect(served).toBeDefined();
    console.log(`the inference server's span, as its exporter wrote it: ${JSON.stringify(served)}`);
    expect(served.kind).toBe(1); // SERVER
    expect(served.parentSpanId).toBe(call.spanId);
    // balanced runs its pass on the 8-bit model by default (ISNet's mode table): the server names the model it ran.
    expect(served.attributes['bgcut.model']).toBe('isnet-int8');
    const run = byName('session.run', inference.child.pid!)!;
    expect(run.parentSpanId).toBe(served.spanId);
    // Nested in time: the server's span inside the client's, session.run inside the server's (1 ms of clock slack).
    expect(served.startMs).toBeGreaterThanOrEqual(call.startMs - 1);
    expect(served.durationMs).toBeLessThanOrEqual(call.durationMs + 1);
    expect(run.durationMs).toBeLessThanOrEqual(served.durationMs + 1);
    expect(run.durationMs).toBeGreaterThan(0);
  }, 180_000); // one real cutout: ~1 s in CI, 57 s seen at load 33 (the handler's inference deadline is 120 s)
});
