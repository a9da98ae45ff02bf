import * as grpc from '@grpc/grpc-js';
import { RUN_TIME_TRAILER } from '../../protocol/index.js';

/**
 * A gRPC load-balancing policy for the inference tier: least outstanding requests by power of d
 * choices (CHOICES), per model, weighted by how long each server has been taking. Each ModelInfer
 * call draws up to three ready servers at random and goes to the cheapest: cost = (this client's calls open on
 * it for the model + 1) x its recent service time for the model (an exponentially weighted mean
 * of RUN_TIME_TRAILER, or of whole call times where a server sends none): the time a new call
 * can expect to wait there.
 * While either has no recent time yet, the one with fewer calls open wins (ties: fewer in all).
 *
 * Why not round-robin: it sends every server the same share however slow it is, so a server that
 * slowed down (a noisy neighbour, a throttled CPU) builds a queue that every N-th request waits in,
 * and p99 follows the slowest server. Why weight by time: counts alone tie at 0 whenever servers
 * are idle, so a slow server still gets a third of a light load; the weight makes it win only once
 * the fast ones are busy enough to be slower still (bench/balancing.ts measures both). A server's time fades towards zero while it gets no calls
 * (IDLE_DECAY_MS), so one that was slow is tried again later instead of shunned for good.
 *
 * grpc-js has no least_request policy (other gRPC languages do); this is the same shape as its
 * round_robin (one LeafLoadBalancer per address, all kept connected), registered through
 * `grpc.experimental` under the name below. Calls name their model in the metadata key
 * MODEL_METADATA_KEY; a call without one is counted under ''.
 */
export const LEAST_REQUEST_POLICY = 'bgcut_least_request';
export const MODEL_METADATA_KEY = 'bgcut-model';

/** Weight of the newest call time in the mean. */
const EWMA_ALPHA = 0.3;
/** Time constant of the fade of a server's mean call time while it gets no calls. */
const IDLE_DECAY_MS = 30_000;

const { LeafLoadBalancer, QueuePicker, UnavailablePicker, createChildChannelControlHelper, endpointToString, registerLoadBalancerType, PickResultType } =
  grpc.experimental;
type Picker = grpc.experimental.Picker;
type PickArgs = grpc.experimental.PickArgs;
type PickResult = grpc.experimental.PickResult;
type Endpoint = grpc.experimental.Endpoint;
const State = grpc.connectivityState;

interface ModelLoad {
  inFlight: number;
  /** Mean time of the calls answered OK, in ms; undefined before the first. */
  meanMs: number | undefined;
  /** When meanMs was last updated (ms, performance.now()). */
  updatedAt: number;
}

/** This client's calls by server address and model: open now, and how long they took. Shared by every picker of one channel. */
export class CallStats {
  private readonly byServer = new Map<string, Map<string, ModelLoad>>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  private entry(server: string, model: string): ModelLoad {
    let models = this.byServer.get(server);
    if (!models) this.byServer.set(server, (models = new Map()));
    let load = models.get(model);
    if (!load) models.set(model, (load = { inFlight: 0, meanMs: undefined, updatedAt: 0 }));
    return load;
  }

  inFlight(server: string, model: string): number {
    return this.byServer.get(server)?.get(model)?.inFlight ?? 0;
  }

  totalInFlight(server: string): number {
    let sum = 0;
    for (const load of this.byServer.get(server)?.values() ?? []) sum += load.inFlight;
    return sum;
  }

  /** The mean call time, faded by the time since the last answer; undefined before any. */
  meanMs(server: string, model: string): number | undefined {
    const load = this.byServer.get(server)?.get(model);
    if (load?.meanMs === undefined) return undefined;
    return load.meanMs * Math.exp(-(this.now() - load.updatedAt) / IDLE_DECAY_MS);
  }

  started(server: string, model: string): void {
    this.entry(server, model).inFlight++;
  }

  /** A call ended; `ms` is its time when it was answered OK (failures say nothing about speed). */
  ended(server: string, model: string, ms: number | undefined): void {
    const load = this.entry(server, model);
    load.inFlight = Math.max(0, load.inFlight - 1);
    if (ms === undefined) return;
    const mean = this.meanMs(server, model);
    load.meanMs = mean === undefined ? ms : mean + EWMA_ALPHA * (ms - mean);
    load.updatedAt = this.now();
  }
}

/**
 * How many servers each pick compares. Two random choices already avoid most of round-robin's
 * queueing; three make a pick among three servers exact: with two, a burst of 6 calls to 3 equal
 * idle servers puts 3 on one of them 36% of the time (the draw left out the idle one), which
 * round-robin never does. Drawing a few at random rather than taking the least of all keeps many
 * API instances from all sending to the one server that looks cheapest.
 */
export const CHOICES = 3;

/**
 * The power of CHOICES choices over `candidates` (at least one): the index of the cheapest of up
 * to CHOICES drawn at random, as described above; `weighted: false` compares calls open alone.
 * On a tie, the first drawn. `random` returns 0 <= x < 1.
 */
export function pickLeastLoaded(candidates: string[], model: string, stats: CallStats, weighted = true, random: () => number = Math.random): number {
  const n = candidates.length;
  if (n === 1) return 0;
  // The first `d` of a partial Fisher-Yates shuffle: `d` distinct indices, uniformly.
  const d = Math.min(CHOICES, n);
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < d; i++) {
    const j = i + Math.floor(random() * (n - i));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const load = (i: number) => {
    const server = candidates[i]!;
    const open = stats.inFlight(server, model);
    const mean = stats.meanMs(server, model);
    return { open, mean, total: stats.totalInFlight(server), cost: mean === undefined ? undefined : (open + 1) * mean };
  };
  let best = order[0]!;
  let bestLoad = load(best);
  for (const i of order.slice(1, d)) {
    const candidate = load(i);
    if (cheaper(candidate, bestLoad, weighted)) {
      best = i;
      bestLoad = candidate;
    }
  }
  return best;
}

type Load = { open: number; mean: number | undefined; total: number; cost: number | undefined };
/** Lower cost when both have a time (and `weighted`), else fewer calls open for the model, else fewer in all. */
function cheaper(a: Load, b: Load, weighted: boolean): boolean {
  if (weighted && a.cost !== undefined && b.cost !== undefined && a.cost !== b.cost) return a.cost < b.cost;
  if (a.open !== b.open) return a.open < b.open;
  return a.total < b.total;
}

class LeastRequestConfig implements grpc.experimental.TypedLoadBalancingConfig {
  /** `weighted: false` balances on calls open alone (kept for the benchmark's comparison). */
  constructor(readonly weighted = true) {}
  getLoadBalancerName(): string {
    return LEAST_REQUEST_POLICY;
  }
  toJsonObject(): object {
    return { [LEAST_REQUEST_POLICY]: { weighted: this.weighted } };
  }
  static createFromJson(json: { weighted?: unknown }): LeastRequestConfig {
    return new LeastRequestConfig(json?.weighted !== false);
  }
}

class LeastRequestPicker implements Picker {
  private readonly addresses: string[];

  constructor(
    private readonly children: { address: string; picker: Picker }[],
    private readonly stats: CallStats,
    private readonly weighted: boolean,
  ) {
    this.addresses = children.map((c) => c.address);
  }

  pick(args: PickArgs): PickResult {
    const model = String(args.metadata.get(MODEL_METADATA_KEY)[0] ?? '');
    const chosen = this.children[pickLeastLoaded(this.addresses, model, this.stats, this.weighted)]!;
    const result = chosen.picker.pick(args);
    if (result.pickResultType !== PickResultType.COMPLETE) return result;
    // grpc-js calls onCallStarted when the call goes out on the chosen connection and onCallEnded
    // exactly once after it (a retry is a pick of its own): the counts stay balanced.
    let startedAt = 0;
    return {
      ...result,
      onCallStarted: () => {
        startedAt = performance.now();
        this.stats.started(chosen.address, model);
        result.onCallStarted?.();
      },
      onCallEnded: (code, details, metadata) => {
        // The service time, without the queueing that the calls-open factor already counts;
        // servers that send no such trailer (Triton, KServe) are weighed by whole call times.
        const runUs = Number(metadata.get(RUN_TIME_TRAILER)[0]);
        const ms = Number.isFinite(runUs) && runUs > 0 ? runUs / 1000 : performance.now() - startedAt;
        this.stats.ended(chosen.address, model, code === grpc.status.OK ? ms : undefined);
        result.onCallEnded?.(code, details, metadata);
      },
    };
  }
}

class LeastRequestLoadBalancer implements grpc.experimental.LoadBalancer {
  private children: InstanceType<typeof LeafLoadBalancer>[] = [];
  private readonly stats = new CallStats();
  private weighted = true;
  private readonly childHelper: grpc.experimental.ChannelControlHelper;
  private state: grpc.connectivityState = State.IDLE;
  private updatesPaused = false;
  private lastError: string | null = null;

  constructor(private readonly helper: grpc.experimental.ChannelControlHelper) {
    this.childHelper = createChildChannelControlHelper(helper, {
      updateState: (childState, _picker, errorMessage) => {
        // Ask for a fresh resolution once a ready server drops (it may have been replaced).
        if (this.state === State.READY && childState !== State.READY) this.helper.requestReresolution();
        if (errorMessage) this.lastError = errorMessage;
        this.update();
      },
    });
  }

  private update(): void {
    if (this.updatesPaused) return;
    const ready = this.children.filter((c) => c.getConnectivityState() === State.READY);
    const any = (state: grpc.connectivityState) => this.children.some((c) => c.getConnectivityState() === state);
    if (ready.length > 0) {
      const children = ready.map((c) => ({ address: endpointToString(c.getEndpoint()), picker: c.getPicker() }));
      this.setState(State.READY, new LeastRequestPicker(children, this.stats, this.weighted), null);
    } else if (any(State.CONNECTING)) {
      this.setState(State.CONNECTING, new QueuePicker(this), null);
    } else if (any(State.TRANSIENT_FAILURE)) {
      const message = `${LEAST_REQUEST_POLICY}: no connection established. Last error: ${this.lastError}`;
      this.setState(State.TRANSIENT_FAILURE, new UnavailablePicker({ details: message }), message);
    } else {
      this.setState(State.IDLE, new QueuePicker(this), null);
    }
    // Every server is kept connected, as round_robin does, so a pick never waits for a handshake.
    for (const child of this.children) if (child.getConnectivityState() === State.IDLE) child.exitIdle();
  }

  private setState(state: grpc.connectivityState, picker: Picker, errorMessage: string | null): void {
    this.state = state;
    this.helper.updateState(state, picker, errorMessage);
  }

  updateAddressList(
    endpoints: grpc.experimental.StatusOr<Endpoint[]>,
    config: grpc.experimental.TypedLoadBalancingConfig,
    options: grpc.ChannelOptions,
    resolutionNote: string,
  ): boolean {
    if (!(config instanceof LeastRequestConfig)) return false;
    this.weighted = config.weighted;
    if (!endpoints.ok) {
      if (this.children.length === 0) this.setState(State.TRANSIENT_FAILURE, new UnavailablePicker(endpoints.error), endpoints.error.details);
      return true;
    }
    for (const child of this.children) child.destroy();
    if (endpoints.value.length === 0) {
      const message = `no addresses resolved. Resolution note: ${resolutionNote}`;
      this.children = [];
      this.setState(State.TRANSIENT_FAILURE, new UnavailablePicker({ details: message }), message);
      return true;
    }
    this.updatesPaused = true;
    this.children = endpoints.value.map((endpoint) => new LeafLoadBalancer(endpoint, this.childHelper, options, resolutionNote));
    for (const child of this.children) child.startConnecting();
    this.updatesPaused = false;
    this.update();
    return true;
  }

  exitIdle(): void {
    // Idle only with no addresses: nothing to connect to.
  }

  resetBackoff(): void {}

  destroy(): void {
    for (const child of this.children) child.destroy();
    this.children = [];
  }

  getTypeName(): string {
    return LEAST_REQUEST_POLICY;
  }
}

let registered = false;
/** Makes the policy available to channels of this process (grpc-js keeps one registry). */
export function registerLeastRequestPolicy(): void {
  if (registered) return;
  registerLoadBalancerType(LEAST_REQUEST_POLICY, LeastRequestLoadBalancer, LeastRequestConfig);
  registered = true;
}
