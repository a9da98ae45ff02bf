import type { Readable } from 'node:stream';

/** Request headers as Node gives them: lower-case names. */
export type IncomingHeaders = Record<string, string | string[] | undefined>;

/** What an adapter hands the core: a framework-neutral view of one HTTP request. */
export interface CoreRequest {
  method: string;
  /** Path and query, as in the request line. */
  url: string;
  headers: IncomingHeaders;
  /** The request body, not yet read. */
  body: Readable;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
  /** The client's address, after the host app's trusted-proxy rules (Express `req.ip`, Fastify `request.ip`). */
  clientIp?: string | undefined;
  /** `https` when the client connected over TLS (after the host app's trusted-proxy rules); for Secure cookies. */
  protocol?: 'http' | 'https' | undefined;
}

/** What the core hands back: the adapter writes it as it is. */
export interface CoreResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /**
   * Set when nothing but the adapter holds `body` (a cutout without an idempotency key, whose
   * store keeps it): an adapter calls it once the body was written out (the response's `finish`),
   * and the body's memory goes back at once rather than at V8's next full collection of the
   * host's thread (util/release-now.ts). `body` reads as empty afterwards. An adapter that cannot
   * tell when the write finished, or whose host wrapped the writes, leaves it uncalled.
   */
  release?: (() => void) | undefined;
}

/** One path an adapter mounts, and what answers it. */
export interface Route {
  /** Path below wherever the adapter mounts the routes. */
  path: string;
  /** Also answers every path below `path` (`/v1/jobs/{id}/...`); the handler reads the rest from the URL. */
  subpaths?: boolean;
  handle(request: CoreRequest): Promise<CoreResponse>;
}
