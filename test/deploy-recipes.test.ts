import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { InferenceMetrics } from '../src/inference-server/metrics.js';
import { ApiMetrics } from '../src/core/metrics.js';
import { resolveServerOptions } from '../src/inference-server/server.js';
import { GLIBC_MALLOC_TUNING } from '../src/runtime/allocator.js';
import { V8_HEAP_FLAGS } from '../src/runtime/v8-heap.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const k8sDir = path.join(root, 'deploy/k8s');
const apiAppSource = readFileSync(path.join(root, 'deploy/api-app/server.mjs'), 'utf8');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = Record<string, any>;

function documents(file: string): Doc[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors[0]!.message}`);
    return d.toJS() as Doc;
  });
}

const manifestFiles = readdirSync(k8sDir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
const manifests = manifestFiles.flatMap((f) => documents(path.join(k8sDir, f)).map((doc) => ({ file: f, doc })));
const find = (kind: string, name: string): Doc => {
  const found = manifests.find((m) => m.doc.kind === kind && m.doc.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in deploy/k8s`);
  return found.doc;
};

/**
 * The Kubernetes API's JSON schemas, compiled by ajv, as the `kubernetes-models` packages ship
 * them (one validator per kind, offline); KEDA's CRD schema from `@kubernetes-models/keda`.
 */
async function validatorFor(apiVersion: string, kind: string): Promise<(doc: Doc) => void> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const module = group === 'keda.sh' ? `@kubernetes-models/keda/keda.sh/${version}/${kind}` : `kubernetes-models/${group ? `${group}/` : ''}${version}/${kind}`;
  const Model = ((await import(module)) as Record<string, new (doc: Doc) => { validate(): void }>)[kind]!;
  return (doc) => new Model(doc).validate();
}

let flags: Set<string> | undefined;
/** Flags the inference server's CLI accepts, from its own --help (built by `npm test`'s pretest). */
function cliFlags(): Set<string> {
  const help = () => execFileSync(process.execPath, [path.join(root, 'dist/src/inference-server/cli.js'), '--help'], { encoding: 'utf8' });
  return (flags ??= new Set([...help().matchAll(/--([a-z-]+)/g)].map((m) => m[1]!)));
}

/** `--name=value` arguments as a map. */
function argMap(args: string[]): Map<string, string> {
  return new Map(args.map((a) => /^--([a-z-]+)=(.*)$/.exec(a)!).map((m) => [m[1]!, m[2]!]));
}

describe('Kubernetes manifests (deploy/k8s)', () => {
  it('every object validates against the Kubernetes API schema of its kind (and the check catches a wrong type)', async () => {
    expect(manifests.length).toBeGreaterThanOrEqual(14);
    for (const { file, doc } of manifests) {
      const validate = await validatorFor(doc.apiVersion, doc.kind);
      expect(() => validate(doc), `${file}: ${doc.kind} ${doc.metadata?.name}`).not.toThrow();
    }
    const broken = structuredClone(find('Deployment', 'bgcut-inference'));
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'fifty';
    const validateDeployment = await validatorFor('apps/v1', 'Deployment');
    expect(() => validateDeployment(broken)).toThrow(/containerPort/);
  });

  it('kustomization.yaml lists every manifest but the example Secrets, and names the namespace the API dials', () => {
    const kustomization = documents(path.join(k8sDir, 'kustomization.yaml'))[0]!;
    expect([...kustomization.resources].sort()).toEqual(manifestFiles.filter((f) => f !== 'secrets.example.yaml').sort());
    expect(kustomization.namespace).toBe(find('Namespace', 'bgcut').metadata.name);
  });

  it('Services and disruption budgets select the pods of their Deployment, by port names the containers declare', () => {
    for (const [name, service] of [['bgcut-inference', find('Service', 'bgcut-inference')], ['bgcut-api', find('Service', 'bgcut-api')]] as const) {
      const pod = find('Deployment', name).spec.template;
      expect(pod.metadata.labels).toMatchObject(service.spec.selector);
      expect(pod.metadata.labels).toMatchObject(find('PodDisruptionBudget', name).spec.selector.matchLabels);
      const portNames = pod.spec.containers[0].ports.map((p: Doc) => p.name);
      for (const port of service.spec.ports) expect(portNames).toContain(port.targetPort);
    }
    // The inference Service is headless: the API's balancer sees every pod.
    expect(find('Service', 'bgcut-inference').spec.clusterIP).toBe('None');
  });

  it('the inference pods: flags the CLI knows, its default gRPC port, gRPC probes on the health port, metrics where Prometheus is told to look', () => {
    const pod = find('Deployment', 'bgcut-inference').spec.template;
    const container = pod.spec.containers[0];
    const args = argMap(container.args);
    const known = cliFlags();
    for (const flag of args.keys()) expect(known, `--${flag}`).toContain(flag);
    const port = (name: string) => container.ports.find((p: Doc) => p.name === name).containerPort;
    expect(Number(args.get('port'))).toBe(resolveServerOptions({}).port);
    expect(port('grpc')).toBe(Number(args.get('port')));
    expect(port('grpc-health')).toBe(Number(args.get('health-port')));
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) expect(container[probe].grpc.port, probe).toBe(port('grpc-health'));
    expect(port('metrics')).toBe(Number(args.get('metrics-port')));
    expect(pod.metadata.annotations['prometheus.io/port']).toBe(String(port('metrics')));
    // TLS files come from the mounted Secret.
    const mount = container.volumeMounts.find((m: Doc) => m.name === 'tls').mountPath;
    for (const flag of ['tls-cert', 'tls-key', 'tls-client-ca']) expect(args.get(flag)!.startsWith(`${mount}/`), flag).toBe(true);
    // Kubernetes' grace outlasts the server's own drain.
    expect(pod.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(resolveServerOptions({}).shutdownGraceMs);
    expect(container.resources.requests.cpu).toBe(args.get('threads'));
  });

  it('the autoscaler scales the inference Deployment on queue metrics the servers export and on the requests the API pods hold back', async () => {
    const scaled = find('ScaledObject', 'bgcut-inference');
    expect(scaled.spec.scaleTargetRef.name).toBe(find('Deployment', 'bgcut-inference').metadata.name);
    const exported = new Set((await new InferenceMetrics().registry.getMetricsAsJSON()).map((m) => m.name));
    const apiExported = new Set((await new ApiMetrics(() => ({ inferenceSlots: 0, inferenceQueue: 0, pixels: 0 })).registry.getMetricsAsJSON()).map((m) => m.name));
    const queried = [...scaled.spec.triggers[0].metadata.query.matchAll(/(bgcut_[a-z_]+)\{/g)].map((m) => m[1]);
    expect(queried).toEqual(['bgcut_inference_queue_depth', 'bgcut_inference_running', 'bgcut_inference_slots_waiting']);
    for (const metric of queried.slice(0, 2)) expect(exported).toContain(metric);
    expect(apiExported).toContain('bgcut_inference_slots_waiting');
    // The API pods' concurrency towards the tier is set from the environment, above the old fixed 4.
    const apiEnv = new Map<string, Doc>(find('Deployment', 'bgcut-api').spec.template.spec.containers[0].env.map((e: Doc) => [e.name, e]));
    expect(Number(apiEnv.get('BGCUT_MAX_CONCURRENT_INFERENCES')?.value)).toBeGreaterThan(4);
  });

  it('new inference pods get traffic within 30 s: servers close each connection after at most 20 s (the client re-resolves the Service then)', () => {
    const args = argMap(find('Deployment', 'bgcut-inference').spec.template.spec.containers[0].args);
    expect(cliFlags()).toContain('max-connection-age-ms');
    expect(Number(args.get('max-connection-age-ms'))).toBeLessThanOrEqual(20_000);
    expect(resolveServerOptions({ maxConnectionAgeMs: 20_000 }).maxConnectionAgeMs).toBe(20_000);
  });

  it('Redis: a memory cap under the container limit and noeviction (full, it refuses writes instead of dropping counters); idempotency answers bounded per pod within it', () => {
    const container = find('StatefulSet', 'redis').spec.template.spec.containers[0];
    const args: string[] = container.args;
    expect(args[args.indexOf('--maxmemory-policy') + 1]).toBe('noeviction');
    const mb = (text: string) => Number.parseInt(text, 10) * (/gi?b?$/i.test(text) ? 1024 : 1);
    const maxmemoryMb = mb(args[args.indexOf('--maxmemory') + 1]!);
    expect(maxmemoryMb).toBeLessThan(mb(container.resources.limits.memory));
    const api = find('Deployment', 'bgcut-api').spec.template.spec.containers[0];
    const perPod = Number(api.env.find((e: Doc) => e.name === 'BGCUT_IDEMPOTENCY_REDIS_MAX_BYTES').value);
    const maxPods = find('HorizontalPodAutoscaler', 'bgcut-api').spec.maxReplicas;
    // Answers at most half of Redis's memory, the rest for keys, counters and sessions.
    expect((perPod * maxPods) / 1024 / 1024).toBeLessThanOrEqual(maxmemoryMb / 2);
  });

  it('the API app shares the dashboard sign-in throttle through Redis, and reads the inference concurrency from the environment', () => {
    expect(apiAppSource).toMatch(/createDashboard\(\{[^}]*\.\.\.\(redis \? \{ redis \}/);
    expect(apiAppSource).toMatch(/limits: \{ maxConcurrentInferences \}/);
  });

  it('the API pods: env the app reads, the inference Service address, probe paths the app serves, Secrets that exist', () => {
    const pod = find('Deployment', 'bgcut-api').spec.template;
    const container = pod.spec.containers[0];
    const env = new Map<string, Doc>(container.env.map((e: Doc) => [e.name, e]));
    const read = new Set([...apiAppSource.matchAll(/process\.env\.([A-Z_]+)|tlsFile\('([A-Z_]+)'\)/g)].map((m) => m[1] ?? m[2]));
    for (const name of env.keys()) expect(read, name).toContain(name);
    expect(Number(env.get('PORT')!.value)).toBe(container.ports.find((p: Doc) => p.name === 'http').containerPort);
    const service = find('Service', 'bgcut-inference');
    const namespace = find('Namespace', 'bgcut').metadata.name;
    expect(env.get('BGCUT_INFERENCE_ADDRESS')!.value).toBe(`dns:///${service.metadata.name}.${namespace}.svc.cluster.local:${service.spec.ports[0].port}`);
    for (const probe of ['readinessProbe', 'livenessProbe']) expect(apiAppSource).toContain(`app.get('${container[probe].httpGet.path}'`);
    // Every Secret and key referenced is in the example Secrets.
    const secrets = documents(path.join(k8sDir, 'secrets.example.yaml'));
    const secretKeys = (name: string) => Object.keys(secrets.find((s) => s.metadata.name === name)?.stringData ?? {});
    const refs = manifests.flatMap(({ doc }) => JSON.stringify(doc).match(/"secretKeyRef":\{[^}]*\}/g) ?? []).map((r) => JSON.parse(r.slice('"secretKeyRef":'.length)) as { name: string; key: string });
    expect(refs.length).toBeGreaterThanOrEqual(3);
    for (const ref of refs) expect(secretKeys(ref.name), `${ref.name}/${ref.key}`).toContain(ref.key);
  });

  it('every volumeMount names a volume of its pod, and every TLS file the containers read is mounted from a Secret holding tls.crt, tls.key and ca.crt', () => {
    const secrets = documents(path.join(k8sDir, 'secrets.example.yaml'));
    const secretKeys = (name: string) => Object.keys(secrets.find((s) => s.metadata.name === name)?.stringData ?? {});
    const pods = manifests
      .filter(({ doc }) => doc.spec?.template?.spec?.containers)
      .map(({ doc }) => ({ name: doc.metadata.name as string, spec: doc.spec.template.spec as Doc, claims: (doc.spec.volumeClaimTemplates ?? []) as Doc[] }));
    expect(pods.map((p) => p.name)).toEqual(expect.arrayContaining(['bgcut-api', 'bgcut-inference']));
    let mounts = 0;
    let tlsPaths = 0;
    for (const pod of pods) {
      // A StatefulSet's volumeClaimTemplates are volumes of its pods too.
      const volumes = new Map<string, Doc>([...(pod.spec.volumes ?? []), ...pod.claims.map((c) => ({ name: c.metadata.name, claim: c }))].map((v: Doc) => [v.name, v]));
      for (const container of pod.spec.containers as Doc[]) {
        for (const mount of container.volumeMounts ?? []) {
          mounts++;
          expect(volumes.has(mount.name), `${pod.name}: volumeMount ${mount.name} names a volume`).toBe(true);
        }
        // The TLS files: the inference server's --tls-* flags, the API's BGCUT_*TLS* env.
        const paths = [
          ...(container.args ?? []).map((a: string) => /^--tls-[a-z-]+=(.+)$/.exec(a)?.[1]).filter(Boolean),
          ...(container.env ?? []).filter((e: Doc) => /TLS/.test(e.name) && typeof e.value === 'string').map((e: Doc) => e.value),
        ] as string[];
        for (const file of paths) {
          tlsPaths++;
          const mount = (container.volumeMounts ?? []).find((m: Doc) => file.startsWith(`${m.mountPath}/`));
          expect(mount, `${pod.name}: ${file} lies under a volumeMount`).toBeDefined();
          const volume = volumes.get(mount.name);
          expect(volume?.secret?.secretName, `${pod.name}: ${file} is mounted from a Secret`).toBeTypeOf('string');
          const keys = secretKeys(volume!.secret.secretName);
          expect(keys, `${volume!.secret.secretName}`).toEqual(expect.arrayContaining(['tls.crt', 'tls.key', 'ca.crt']));
          expect(keys, `${pod.name}: ${file} is a key of ${volume!.secret.secretName}`).toContain(path.basename(file));
        }
      }
    }
    expect(mounts).toBeGreaterThanOrEqual(2);
    // Both tiers speak mutual TLS: three files each.
    expect(tlsPaths).toBeGreaterThanOrEqual(6);
  });
});

/** The Dockerfile's stages: name, base, and instructions (continuation lines joined). */
function dockerStages(): { name: string; from: string; lines: string[] }[] {
  const text = readFileSync(path.join(root, 'Dockerfile'), 'utf8').replace(/\\\n\s*/g, ' ');
  const stages: { name: string; from: string; lines: string[] }[] = [];
  for (const line of text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) stages.push({ name: from[2] ?? '', from: from[1]!, lines: [] });
    else stages.at(-1)?.lines.push(line);
  }
  return stages;
}
const exec = (line: string) => JSON.parse(line.replace(/^\S+\s+/, '')) as string[];

describe('Dockerfile (not built here: no container runtime; checked as text against the repo and the code)', () => {
  const stages = dockerStages();
  const stage = (name: string) => stages.find((s) => s.name === name)!;

  it('final images run as the unprivileged node user, with a HEALTHCHECK and SIGTERM, from production installs of the packed tarball', () => {
    for (const name of ['inference', 'api']) {
      const { lines } = stage(name);
      const users = lines.filter((l) => l.startsWith('USER '));
      expect(users.at(-1), name).toBe('USER node');
      expect(lines.findIndex((l) => l.startsWith('USER ')), name).toBeGreaterThanOrEqual(0);
      expect(lines.findIndex((l) => l.startsWith('USER '))).toBeLessThan(lines.findIndex((l) => l.startsWith('CMD')));
      expect(lines.some((l) => l.startsWith('HEALTHCHECK'))).toBe(true);
      expect(lines).toContain('STOPSIGNAL SIGTERM');
    }
    for (const name of ['inference-install', 'api-install']) {
      const installs = stage(name).lines.filter((l) => /npm (install|ci)/.test(l));
      expect(installs.length).toBeGreaterThan(0);
      for (const line of installs) expect(line, name).toMatch(/npm install --omit=dev .*\/tmp\/bgcut\.tgz/);
      expect(stage(name).lines.join('\n')).toMatch(/ONNXRUNTIME_NODE_INSTALL=skip/);
    }
    // Only the build stage installs dev dependencies, and it packs what the others install.
    expect(stage('build').lines.join('\n')).toMatch(/npm ci[\s\S]*npm run build && .*npm pack/);
  });

  it('every file it copies from the build context exists', () => {
    for (const { lines } of stages) {
      for (const line of lines.filter((l) => l.startsWith('COPY ') && !l.includes('--from='))) {
        const sources = line.split(/\s+/).slice(1).filter((a) => !a.startsWith('--')).slice(0, -1);
        for (const source of sources) expect(readdirSync(path.join(root, path.dirname(source))), line).toContain(path.basename(source));
      }
    }
  });

  it('the inference image: the model prepared at build time by its runtime user, flags the CLI knows, health on the port it opens', () => {
    const install = stage('inference-install').lines;
    const user = install.findIndex((l) => l === 'USER node');
    const prepare = install.findIndex((l) => l.includes('bgcut-inference-server prepare'));
    // Both lines must be there (findIndex's -1 is less than anything), the user first.
    expect(user, 'USER node').toBeGreaterThanOrEqual(0);
    expect(prepare, 'prepare').toBeGreaterThan(user);
    const { lines } = stage('inference');
    const cmd = argMap(exec(lines.find((l) => l.startsWith('CMD'))!));
    for (const flag of cmd.keys()) expect(cliFlags(), flag).toContain(flag);
    const health = exec(lines.find((l) => l.startsWith('HEALTHCHECK'))!.replace(/^HEALTHCHECK.*?CMD\s+/, 'CMD '));
    expect(health.slice(0, 3)).toEqual(['bgcut-inference-server', 'health', '--address']);
    expect(health[3]).toBe(`127.0.0.1:${cmd.get('health-port')}`);
    const exposed = lines.find((l) => l.startsWith('EXPOSE'))!.split(/\s+/).slice(1).map(Number);
    expect(exposed.sort()).toEqual([cmd.get('port'), cmd.get('health-port'), cmd.get('metrics-port')].map(Number).sort());
  });

  it('the API image: the app the packaging check runs, its port, its readiness route', () => {
    const { lines } = stage('api');
    // node with the V8 heap flags bgcut-launch adds (the image starts the app without the launcher).
    expect(exec(lines.find((l) => l.startsWith('CMD'))!)).toEqual(['node', ...V8_HEAP_FLAGS, 'server.mjs']);
    expect(lines.join('\n')).toMatch(/PORT=3000/);
    expect(lines).toContain('EXPOSE 3000');
    expect(lines.find((l) => l.startsWith('HEALTHCHECK'))).toContain('http://127.0.0.1:3000/readyz');
    expect(apiAppSource).toContain("app.get('/readyz'");
    // express from the API app satisfies the package's peer range.
    const apiApp = JSON.parse(readFileSync(path.join(root, 'deploy/api-app/package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> };
    expect(manifest.peerDependencies.express).toContain(apiApp.dependencies.express!.replace(/^\^(\d+)\..*/, '^$1'));
  });

  it('the API image runs on the glibc malloc tuning bgcut-launch sets (it starts the app without the launcher); the inference image does not', () => {
    const env = (name: string) => stage(name).lines.filter((l) => l.startsWith('ENV ')).join(' ');
    for (const [variable, value] of Object.entries(GLIBC_MALLOC_TUNING)) {
      expect(env('api')).toContain(`${variable}=${value}`);
      expect(env('inference')).not.toContain(variable);
    }
  });
});

describe('compose.yaml (not run here; checked against the Dockerfile, the code and nginx.conf)', () => {
  const compose = parseAllDocuments(readFileSync(path.join(root, 'compose.yaml'), 'utf8'))[0]!.toJS({ maxAliasCount: 100 }) as Doc;
  const services = compose.services as Record<string, Doc>;

  it('has Redis, two inference servers, two API instances and one proxy port in front of them', () => {
    expect(Object.keys(services).sort()).toEqual(['api', 'inference', 'proxy', 'redis']);
    expect(services.inference!.deploy.replicas).toBe(2);
    expect(services.api!.deploy.replicas).toBe(2);
    const published = Object.values(services).flatMap((s) => s.ports ?? []);
    expect(published).toEqual(['8080:8080']);
    const stageNames = dockerStages().map((s) => s.name);
    expect(stageNames).toContain(services.inference!.build.target);
    expect(stageNames).toContain(services.api!.build.target);
  });

  it('the inference service: flags the CLI knows, a health check on its health port, a grace longer than its drain', () => {
    const args = argMap(services.inference!.command);
    for (const flag of args.keys()) expect(cliFlags(), flag).toContain(flag);
    expect(services.inference!.healthcheck.test).toEqual(['CMD', 'bgcut-inference-server', 'health', '--address', `127.0.0.1:${args.get('health-port')}`]);
    for (const name of ['inference', 'api']) expect(Number.parseInt(services[name]!.stop_grace_period, 10) * 1000).toBeGreaterThan(resolveServerOptions({}).shutdownGraceMs);
  });

  it('the API service: env the app reads, the inference and Redis services by name, the port nginx proxies to', () => {
    const env = services.api!.environment as Record<string, string>;
    const read = new Set([...apiAppSource.matchAll(/process\.env\.([A-Z_]+)/g)].map((m) => m[1]));
    for (const name of Object.keys(env)) expect(read, name).toContain(name);
    const inferencePort = argMap(services.inference!.command).get('port');
    expect(env.BGCUT_INFERENCE_ADDRESS).toBe(`dns:///inference:${inferencePort}`);
    expect(new URL(env.REDIS_URL!).hostname).toBe('redis');
    const nginx = readFileSync(path.join(root, 'deploy/compose/nginx.conf'), 'utf8');
    // Resolved again while running (a variable in proxy_pass, Docker's resolver): replicas that come and go are found.
    expect(nginx).toContain(`set $api_upstream http://api:${env.PORT};`);
    expect(nginx).toContain('proxy_pass $api_upstream;');
    expect(nginx).toMatch(/resolver 127\.0\.0\.11 valid=\d+s/);
    expect(services.redis!.command.join(' ')).toMatch(/--maxmemory \S+ --maxmemory-policy noeviction/);
    expect(nginx).toMatch(new RegExp(`listen ${services.proxy!.ports[0].split(':')[1]};`));
    expect(services.proxy!.volumes[0]).toMatch(/^\.\/deploy\/compose\/nginx\.conf:/);
    expect(services.api!.healthcheck.test.join(' ')).toContain(`http://127.0.0.1:${env.PORT}/readyz`);
  });
});
