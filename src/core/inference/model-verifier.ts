import { ApiError } from '../errors.js';
import type { PreprocessingProfile } from '../image/profile.js';
import { ModelMismatchError, type InferenceClient } from './inference-client.js';

/** How often ready() retries a server that is not up yet, and how long one check may take. */
const READY_RETRY_MS = 500;
const READY_CALL_MS = 5_000;

/**
 * Checks once per model that the served model fits its preprocessing profile: all of them at
 * `ready()`, or each on its first request when ready() was not awaited.
 */
export class ModelVerifier {
  private readonly verified = new Set<string>();

  constructor(
    private readonly client: InferenceClient,
    private readonly models: Record<string, PreprocessingProfile>,
    private readonly options: { startupTimeoutMs: number; retryAfterSeconds: number },
  ) {}

  /** Rejects on a mismatch, or when the server stays unreachable past `startupTimeoutMs`. */
  async ready(): Promise<void> {
    const deadline = Date.now() + this.options.startupTimeoutMs;
    for (const [name, profile] of Object.entries(this.models)) {
      for (;;) {
        try {
          await this.client.verifyModel(name, profile, READY_CALL_MS);
          this.verified.add(name);
          break;
        } catch (error) {
          if (error instanceof ModelMismatchError || Date.now() > deadline) throw error;
          await new Promise((r) => setTimeout(r, READY_RETRY_MS));
        }
      }
    }
  }

  /** Resolves once `name` is verified; 503 while the server cannot be asked. */
  async ensure(name: string): Promise<void> {
    if (this.verified.has(name)) return;
    try {
      await this.client.verifyModel(name, this.models[name]!, READY_CALL_MS);
      this.verified.add(name);
    } catch (error) {
      if (error instanceof ModelMismatchError) throw error;
      throw new ApiError('inference_unavailable', {
        headers: { 'retry-after': String(this.options.retryAfterSeconds) },
        cause: error,
      });
    }
  }
}
