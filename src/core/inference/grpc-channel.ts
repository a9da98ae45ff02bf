/**
 * The gRPC client of the inference servers, as both of the API's channels make it: the main
 * thread's (control: model metadata for the verifier, at start and now and then) and the inference
 * thread's (every ModelInfer call, inference-thread.ts). Same target, credentials, limits,
 * balancing and retries on both.
 */
import * as grpc from '@grpc/grpc-js';
import { inferenceClientConstructor, type GRPCInferenceServiceClient } from '../../protocol/index.js';
import { LEAST_REQUEST_POLICY, registerLeastRequestPolicy } from './least-request-balancer.js';

export interface InferenceTls {
  /** PEM of the CA that signed the servers' certificates. */
  ca: Buffer;
  /** PEM certificate and key of this client, for mutual TLS. */
  cert?: Buffer;
  key?: Buffer;
}

/**
 * Least outstanding requests (or round-robin) over every resolved server, and transparent
 * retries of UNAVAILABLE (a server that went away or is draining) on another one: inference is
 * idempotent, and the retries stay within the call's deadline.
 */
export type Balancing = 'least-request' | 'least-outstanding' | 'round-robin';

/** What a channel is made from (InferenceClientOptions's connection part; plain data, so it can be posted to a thread). */
export interface ChannelOptions {
  address: string | string[];
  balancing?: Balancing | undefined;
  maxMessageBytes: number;
  tls?: InferenceTls | undefined;
}

/** Largest ModelInfer request kept for a retry (the FP32 input of a 1024x1024 model is 12 MiB). */
const RETRY_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * One gRPC target for one or several servers: a list of IP addresses becomes an `ipv4:`/`ipv6:`
 * target (grpc-js resolves it to all of them); names need a `dns:///` target instead.
 */
export function grpcTarget(address: string | string[]): string {
  if (!Array.isArray(address)) return address;
  if (address.length === 1) return address[0]!;
  const v6 = address.every((a) => a.startsWith('['));
  const v4 = address.every((a) => /^\d+\.\d+\.\d+\.\d+:\d+$/.test(a));
  if (!v4 && !v6) throw new RangeError('several inference addresses must all be IP:port; use one dns:///name:port for host names');
  return `${v6 ? 'ipv6' : 'ipv4'}:${address.join(',')}`;
}

const serviceConfig = (balancing: Balancing) => ({
  loadBalancingConfig: [balancing === 'round-robin' ? { round_robin: {} } : { [LEAST_REQUEST_POLICY]: { weighted: balancing === 'least-request' } }],
  methodConfig: [
    {
      name: [{ service: 'inference.GRPCInferenceService' }],
      retryPolicy: {
        maxAttempts: 4,
        initialBackoff: '0.05s',
        maxBackoff: '0.5s',
        backoffMultiplier: 2,
        // Not RESOURCE_EXHAUSTED: grpc-js also answers it for a message over the size limit,
        // which no retry fixes; a full queue is retried by the call itself (QUEUE_FULL_ATTEMPTS).
        retryableStatusCodes: ['UNAVAILABLE'],
      },
    },
  ],
});

/** A client (one channel) of the inference servers; ModelInfer sends a message whose tensor was written into it as it is (infer-request-message.ts). */
export function createServiceClient(options: ChannelOptions): GRPCInferenceServiceClient {
  const Service = inferenceClientConstructor();
  registerLeastRequestPolicy();
  const credentials = options.tls
    ? grpc.credentials.createSsl(toBuffer(options.tls.ca), options.tls.key ? toBuffer(options.tls.key) : null, options.tls.cert ? toBuffer(options.tls.cert) : null)
    : grpc.credentials.createInsecure();
  return new Service(grpcTarget(options.address), credentials, {
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_send_message_length': options.maxMessageBytes,
    'grpc.service_config': JSON.stringify(serviceConfig(options.balancing ?? 'least-request')),
    'grpc.per_rpc_retry_buffer_size': RETRY_BUFFER_BYTES,
    'grpc.retry_buffer_size': 4 * RETRY_BUFFER_BYTES,
    // Reconnect promptly once a stopped server is back, instead of grpc's default backoff of up to 2 minutes.
    'grpc.initial_reconnect_backoff_ms': 250,
    'grpc.max_reconnect_backoff_ms': 2000,
    // A 4 MiB receive window takes the mask back without stalling on HTTP/2's 64 KiB default.
    'grpc-node.flow_control_window': 4 * 1024 * 1024,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
  });
}

/** A Buffer posted to a thread arrives as a Uint8Array; grpc-js's TLS wants Buffers. */
const toBuffer = (bytes: Uint8Array): Buffer => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

/** grpc-js's RESOURCE_EXHAUSTED for a message over `max_{send,receive}_message_length`, on either side. */
export const OVERSIZED_MESSAGE = /message larger than max/i;

/** A server's "queue full": RESOURCE_EXHAUSTED that is not about a message's size. */
export const isQueueFull = (error: { code: number; details?: string | undefined }) => error.code === grpc.status.RESOURCE_EXHAUSTED && !OVERSIZED_MESSAGE.test(error.details ?? '');
