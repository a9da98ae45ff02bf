import * as grpc from '@grpc/grpc-js';
import { service as healthService, type ServingStatus } from 'grpc-health-check';

export interface HealthProbeOptions {
  /** `host:port` of the server. */
  address: string;
  /** The service asked about; '' (the default) is the whole server, as Kubernetes' gRPC probe asks. */
  service?: string;
  timeoutMs?: number;
  /** PEM of the CA that signed the server's certificate; absent for plaintext. */
  ca?: Buffer;
}

type CheckClient = grpc.Client & {
  Check(request: { service: string }, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response?: { status: ServingStatus }) => void): void;
};

/**
 * Asks a server's grpc.health.v1 service for its status, once: what a container HEALTHCHECK needs
 * (Kubernetes has a built-in gRPC probe; Docker has none). Resolves to the status ('SERVING' once
 * every model is loaded and warm), rejects when the server cannot be reached in time.
 */
export function probeHealth(options: HealthProbeOptions): Promise<ServingStatus> {
  // The service definition grpc-health-check itself serves, so the probe and the server agree.
  const Health = grpc.makeGenericClientConstructor(healthService, 'Health');
  const credentials = options.ca ? grpc.credentials.createSsl(options.ca) : grpc.credentials.createInsecure();
  const client = new Health(options.address, credentials) as unknown as CheckClient;
  return new Promise<ServingStatus>((resolve, reject) => {
    client.Check({ service: options.service ?? '' }, { deadline: Date.now() + (options.timeoutMs ?? 3000) }, (error, response) =>
      error ? reject(error) : resolve(response!.status),
    );
  }).finally(() => client.close());
}
