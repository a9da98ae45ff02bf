/**
 * OpenTelemetry spans, optional: bgcut never depends on `@opentelemetry/api` (an optional peer
 * dependency) and never registers a tracer provider. When the app has the API and has registered
 * an SDK (e.g. NodeSDK), requests get spans: `bgcut remove-bg` with children for admission,
 * upload, segmentation (decode inside it), the inference call, rendering and encoding; the
 * inference call carries W3C trace context (`traceparent`, `tracestate`) in its gRPC metadata, and
 * the inference server continues the trace around session.run.
 *
 * Cost when off: without the API, every helper calls its function straight away. With the API
 * but no SDK (prom-client installs the API in every app, so this is the usual case), one
 * non-recording root span per request is made and found not recording, and nothing else is done.
 *
 * The request's span travels in an AsyncLocalStorage of its own, not in the API's context
 * manager, so that spans nest whether or not the app registered one; the root span's parent is
 * the API's active context, so it nests under an HTTP server span when the app has one.
 * `traceparent` is written and read here (the W3C format is one line) rather than through the
 * API's global propagator, which is a no-op unless the app registers one.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';
import type * as OtelApi from '@opentelemetry/api';

type Api = typeof OtelApi;
type Span = OtelApi.Span;
/** Span attributes (a subset of the API's, so that these declarations need no import of it). */
export type Attributes = Record<string, string | number | boolean>;

const TRACER_NAME = 'bgcut';

function loadApi(): Api | undefined {
  try {
    // Synchronous and guarded: absent is a normal case, not an error.
    return createRequire(import.meta.url)('@opentelemetry/api') as Api;
  } catch {
    return undefined;
  }
}
const api = loadApi();
const current = new AsyncLocalStorage<OtelApi.Context>();

/** A span made after the fact from times measured inside a step (e.g. encode, the end of render). */
export interface PastSpan {
  name: string;
  /** performance.now() values. */
  start: number;
  end: number;
  attributes?: Attributes;
}

const epochMs = (now: number) => performance.timeOrigin + now;

function tracer() {
  return api!.trace.getTracer(TRACER_NAME);
}

function finish(span: Span, error: unknown): void {
  if (error !== undefined) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({ code: api!.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  }
  span.end();
}

/**
 * Runs a request inside a root span `name`, when tracing records; `end` gets the span to set
 * attributes from the outcome (e.g. the HTTP status).
 */
export async function traceRequest<T>(name: string, fn: () => Promise<T>, end?: (result: T, set: (attributes: Attributes) => void) => void): Promise<T> {
  if (!api) return fn();
  const span = tracer().startSpan(name, { kind: api.SpanKind.INTERNAL }, api.context.active());
  if (!span.isRecording()) {
    span.end();
    return fn();
  }
  try {
    const result = await current.run(api.trace.setSpan(api.context.active(), span), fn);
    end?.(result, (attributes) => span.setAttributes(attributes));
    finish(span, undefined);
    return result;
  } catch (error) {
    finish(span, error);
    throw error;
  }
}

/**
 * Runs `fn` in a child span of the request's current span, when there is one. `past` adds spans
 * measured inside the step as its children, from its result and its start and end.
 */
export async function traceStep<T>(
  name: string,
  fn: () => Promise<T>,
  options: { attributes?: Attributes; kind?: 'client' | 'internal'; past?: (result: T, start: number, end: number) => PastSpan[] } = {},
): Promise<T> {
  const parent = api && current.getStore();
  if (!api || !parent) return fn();
  const start = performance.now();
  const span = tracer().startSpan(
    name,
    { kind: options.kind === 'client' ? api.SpanKind.CLIENT : api.SpanKind.INTERNAL, attributes: options.attributes, startTime: epochMs(start) },
    parent,
  );
  const context = api.trace.setSpan(parent, span);
  try {
    const result = await current.run(context, fn);
    const end = performance.now();
    for (const past of options.past?.(result, start, end) ?? []) {
      tracer().startSpan(past.name, { attributes: past.attributes, startTime: epochMs(past.start) }, context).end(epochMs(past.end));
    }
    span.end(epochMs(end));
    return result;
  } catch (error) {
    finish(span, error);
    throw error;
  }
}

/** Sets attributes on the request's current span, when tracing records. */
export function setStepAttributes(attributes: Attributes): void {
  const context = api && current.getStore();
  if (context) api!.trace.getSpan(context)?.setAttributes(attributes);
}

/** The W3C trace context of the current span, for outgoing metadata; empty when not tracing. */
export function traceContextHeaders(): Record<string, string> {
  const context = api && current.getStore();
  const span = context && api!.trace.getSpan(context);
  if (!span) return {};
  const { traceId, spanId, traceFlags, traceState } = span.spanContext();
  const headers: Record<string, string> = { traceparent: `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}` };
  const state = traceState?.serialize();
  if (state) headers.tracestate = state;
  return headers;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/;

/**
 * Continues a trace from incoming W3C headers (`traceparent`, `tracestate`): runs `fn` in a
 * server span `name` whose parent is the caller's span. Without the API, or with no valid
 * traceparent, `fn` runs untraced (a call nobody traces starts no trace here).
 */
export async function traceIncoming<T>(
  name: string,
  headers: { traceparent?: string; tracestate?: string },
  fn: (span: { setAttributes(a: Attributes): void }) => Promise<T>,
  past?: (result: T, start: number, end: number) => PastSpan[],
): Promise<T> {
  const match = api && headers.traceparent ? TRACEPARENT.exec(headers.traceparent) : null;
  // Version ff is invalid, as are all-zero ids.
  if (!api || !match || match[1] === 'ff' || /^0+$/.test(match[2]!) || /^0+$/.test(match[3]!)) return fn({ setAttributes() {} });
  const remote = api.trace.setSpanContext(api.ROOT_CONTEXT, {
    traceId: match[2]!,
    spanId: match[3]!,
    traceFlags: Number.parseInt(match[4]!, 16),
    isRemote: true,
    ...(headers.tracestate ? { traceState: api.createTraceState(headers.tracestate) } : {}),
  });
  const start = performance.now();
  const span = tracer().startSpan(name, { kind: api.SpanKind.SERVER, startTime: epochMs(start) }, remote);
  if (!span.isRecording()) {
    span.end();
    return fn({ setAttributes() {} });
  }
  const context = api.trace.setSpan(remote, span);
  try {
    const result = await current.run(context, () => fn(span));
    const end = performance.now();
    for (const p of past?.(result, start, end) ?? []) {
      tracer().startSpan(p.name, { attributes: p.attributes, startTime: epochMs(p.start) }, context).end(epochMs(p.end));
    }
    span.end(epochMs(end));
    return result;
  } catch (error) {
    finish(span, error);
    throw error;
  }
}
