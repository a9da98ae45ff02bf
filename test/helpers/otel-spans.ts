/**
 * OpenTelemetry for the tracing test. Imported by `node --import` into a child process (the
 * inference server) with BGCUT_TEST_SPANS_FILE set, it registers a tracer provider whose
 * exporter appends each finished span to that file as one JSON line; the test process uses
 * spanRecord() on its in-memory exporter's spans, so both sides read alike.
 */
import { appendFileSync } from 'node:fs';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';

export interface SpanRecord {
  pid: number;
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  startMs: number;
  durationMs: number;
  status: number;
  attributes: Record<string, unknown>;
}

export function spanRecord(span: ReadableSpan, pid = process.pid): SpanRecord {
  const ms = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6;
  return {
    pid,
    name: span.name,
    kind: span.kind,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    startMs: Math.round(ms(span.startTime) * 10) / 10,
    durationMs: Math.round(ms(span.duration) * 10) / 10,
    status: span.status.code,
    attributes: { ...span.attributes },
  };
}

class FileSpanExporter implements SpanExporter {
  constructor(private readonly file: string) {}
  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    appendFileSync(this.file, spans.map((s) => `${JSON.stringify(spanRecord(s))}\n`).join(''));
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}

if (process.env.BGCUT_TEST_SPANS_FILE) {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new FileSpanExporter(process.env.BGCUT_TEST_SPANS_FILE))] }));
}
