/**
 * Warns when the host app trusts every proxy. API keys limited to client addresses
 * (`allowedIps`) are checked against the address the framework reports (Express `req.ip`,
 * Fastify `request.ip`); when the app trusts every proxy, that is the left-most
 * X-Forwarded-For entry, which any client can write, so the limit holds for nobody.
 * As express-rate-limit's validations do, this warns (once per app) rather than refusing.
 */

/** The `code` of the warning (a Node process warning: `process.on('warning')`, `--no-warnings`). */
export const PERMISSIVE_TRUST_PROXY_WARNING = 'BGCUT_PERMISSIVE_TRUST_PROXY';

const warned = new WeakSet<object>();

const SETTING = {
  express: { name: "'trust proxy'", fix: "app.set('trust proxy', 1) for one proxy, or its addresses ('loopback', '10.0.0.0/8')" },
  fastify: { name: 'trustProxy', fix: "Fastify({ trustProxy: 1 }) for one proxy, or its addresses ('127.0.0.1', '10.0.0.0/8')" },
} as const;

/** Express: call with `req.app` (the setting may change after the router is made, so per request). */
export function checkExpressTrustProxy(app: { get(name: string): unknown }): void {
  warnIfTrustingEveryProxy(app, 'express', app.get('trust proxy'));
}

/**
 * Fastify: call with the plugin's instance. Fastify keeps its options under an internal symbol
 * on the root instance (trustProxy is not in `initialConfig`); if a version moves it, this is silent.
 */
export function checkFastifyTrustProxy(instance: object): void {
  for (let o: object | null = instance; o; o = Object.getPrototypeOf(o) as object | null) {
    const symbol = Object.getOwnPropertySymbols(o).find((s) => s.description === 'fastify.options');
    if (symbol) return warnIfTrustingEveryProxy(o, 'fastify', (o as Record<symbol, { trustProxy?: unknown } | undefined>)[symbol]?.trustProxy);
  }
}

/** Emits the warning the first time it sees `app` with its trusted-proxy setting set to `true`. */
function warnIfTrustingEveryProxy(app: object, framework: keyof typeof SETTING, setting: unknown): void {
  if (setting !== true || warned.has(app)) return;
  warned.add(app);
  const { name, fix } = SETTING[framework];
  process.emitWarning(
    `bgcut: the app's ${name} setting is true, so the client address is the left-most X-Forwarded-For entry, ` +
      'which any client can set: API keys limited to addresses (allowedIps) can then be used from anywhere. ' +
      `Trust only your own proxies: ${fix}. See "Client addresses behind proxies" in bgcut's docs/configuration.md.`,
    { code: PERMISSIVE_TRUST_PROXY_WARNING, type: 'BgcutWarning' },
  );
}
