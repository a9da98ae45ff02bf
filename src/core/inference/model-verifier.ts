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

  /**
   * Models the mode tables name that are not among the configured ones, and whether the servers
   * serve them with the tensors of the model whose table names them (see passModel()).
   */
  private readonly tableModels = new Map<string, boolean>();

  constructor(
    private readonly client: InferenceClient,
    private readonly models: Record<string, PreprocessingProfile>,
    private readonly options: { startupTimeoutMs: number; retryAfterSeconds: number; modeModels?: boolean; warn?: (message: string) => void },
  ) {}

  /** The models a profile's mode table names for its passes, besides the configured ones. */
  private namedByTables(): Map<string, PreprocessingProfile> {
    const named = new Map<string, PreprocessingProfile>();
    if (this.options.modeModels === false) return named;
    for (const profile of Object.values(this.models)) {
      for (const plan of Object.values(profile.modes ?? {})) {
        for (const name of [plan?.model, plan?.cropModel]) if (name && !Object.hasOwn(this.models, name) && !named.has(name)) named.set(name, profile);
      }
    }
    return named;
  }

  /**
   * Whether a model a mode table names can run passes for a model with `profile`: served, with
   * the same tensors. Only a definite answer (served and fitting, or NOT_FOUND / a mismatch) is
   * kept; the request's own model runs the pass meanwhile.
   */
  private async checkTableModel(name: string, profile: PreprocessingProfile): Promise<boolean> {
    try {
      await this.client.verifyModel(name, profile, READY_CALL_MS);
      this.tableModels.set(name, true);
      return true;
    } catch (error) {
      // NOT_FOUND (gRPC status 5): the servers do not serve it, so every pass runs the request's model.
      if (error instanceof ModelMismatchError || (error as { code?: unknown }).code === 5) {
        this.tableModels.set(name, false);
        (this.options.warn ?? console.warn)(`bgcut: the mode table names the model "${name}", which the inference servers ${error instanceof ModelMismatchError ? 'serve with other tensors' : 'do not serve'}: its passes run on the request's model`);
      }
      return false;
    }
  }

  /**
   * The served model a pass runs on: `named` (from the mode table) when the servers serve it
   * with the request model's tensors and the same free size, else `requested`.
   */
  async passModel(requested: string, named: string | undefined): Promise<string> {
    if (this.options.modeModels === false || named === undefined || named === requested) return requested;
    const profile = this.models[requested]!;
    if (Object.hasOwn(this.models, named)) {
      if (!sameTensors(this.models[named]!, profile)) return requested;
      await this.ensure(named);
    } else {
      const known = this.tableModels.get(named);
      if (known === false) return requested;
      if (known === undefined && !(await this.checkTableModel(named, profile))) return requested;
    }
    return this.client.freeSize(named) === this.client.freeSize(requested) ? named : requested;
  }

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
    // The servers answer now: a model a mode table names is checked once (a warning when absent).
    for (const [name, profile] of this.namedByTables()) await this.checkTableModel(name, profile);
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

/** Whether two profiles feed and read a model the same way (so one's passes can run on the other). */
function sameTensors(a: PreprocessingProfile, b: PreprocessingProfile): boolean {
  const key = (p: PreprocessingProfile) => JSON.stringify([p.inputName, p.outputName, p.inputDatatype, p.inputLayout, p.outputDatatype, p.mean, p.std, p.minMaxNormalize, p.outputActivation]);
  return key(a) === key(b);
}
