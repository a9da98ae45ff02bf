import diagnostics from 'node:diagnostics_channel';
import http from 'node:http';
import { captureInternalError } from './helpers/log-capture.js';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { ApiError, ERROR_CATALOG, type ErrorCode } from '../src/core/errors.js';
import { checkAddress } from '../src/core/image-url/address-policy.js';
import { fetchImage, nextHop } from '../src/core/image-url/fetch-image.js';
import { resolveImageUrlOptions, type ImageUrlOptions, type Resolver } from '../src/core/image-url/options.js';
import { createExpressApp } from '../examples/express-app.js';
import express from 'express';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { baseUrlOf } from './conformance/suite.js';
import { guardConnections } from './helpers/connection-guard.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { OpenApiResponseChecker } from './helpers/openapi-check.js';
import { alphaIoU, decodeAlpha, objectOnTexture } from './helpers/synthetic-image.js';

// Every connection this file's process makes outside 127.0.0.0/8 and ::1 throws and is recorded.
const guard = guardConnections();
afterEach(() => expect(guard.attempts, 'connections attempted outside the loopback range').toEqual([]));
afterAll(() => guard.restore());

/** A resolver from a table, counting its calls; names not in it do not exist. */
function fakeDns(table: Record<string, string[]>) {
  const calls: string[] = [];
  const resolver: Resolver = async (hostname) => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return { resolver, calls };
}

/** Counts the TCP client sockets created while `work` runs (Node's net.client.socket channel sees every one). */
async function socketsDuring<T>(work: () => Promise<T>): Promise<{ value: T; sockets: number }> {
  let sockets = 0;
  const count = () => sockets++;
  diagnostics.subscribe('net.client.socket', count);
  try {
    return { value: await work(), sockets };
  } finally {
    diagnostics.unsubscribe('net.client.socket', count);
  }
}

async function refusal(url: string, options: ImageUrlOptions = {}): Promise<ApiError> {
  const resolved = resolveImageUrlOptions({ resolver: fakeDns({}).resolver, ...options }, () => {});
  const error = await fetchImage(url, { ...resolved, maxBytes: 1024 * 1024, signal: new AbortController().signal }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, url).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('address policy', () => {
  it.each(['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '64:ff9b::808:808', '::ffff:8.8.8.8'])('allows the public address %s', (address) => {
    expect(checkAddress(address)).toEqual({ allowed: true });
  });
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'linkLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['::ffff:127.0.0.1', 'IPv4-mapped form of a loopback'],
    ['::ffff:169.254.169.254', 'IPv4-mapped form of a linkLocal'],
    // (ipaddr.js reads '::127.0.0.1' as IPv4-mapped; the URL parser writes it '::7f00:1'.)
    ['::7f00:1', 'IPv4-compatible form of a loopback'],
    ['::a00:1', 'IPv4-compatible form of a private'],
    ['64:ff9b::127.0.0.1', 'NAT64 form of a loopback'],
    ['64:ff9b::10.0.0.1', 'NAT64 form of a private'],
    ['64:ff9b:1::a00:1', 'rfc6052'],
    ['2002:7f00:1::1', '6to4'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
  ])('refuses %s (%s)', (address, reason) => {
    const verdict = checkAddress(address);
    expect(verdict.allowed).toBe(false);
    expect((verdict as { reason: string }).reason).toContain(reason);
  });
  it('lets loopback through only with the test-only option, and nothing else', () => {
    expect(checkAddress('127.0.0.1', { allowLoopback: true }).allowed).toBe(true);
    expect(checkAddress('::1', { allowLoopback: true }).allowed).toBe(true);
    expect(checkAddress('10.0.0.1', { allowLoopback: true }).allowed).toBe(false);
    expect(checkAddress('169.254.169.254', { allowLoopback: true }).allowed).toBe(false);
  });
});

describe('refusals before any connection (injected resolver)', () => {
  it.each([
    ['http://127.0.0.1/a.jpg', 'image_url_unreachable'],
    ['http://2130706433/a.jpg', 'image_url_unreachable'], // decimal 127.0.0.1
    ['http://0x7f.0.0.1/a.jpg', 'image_url_unreachable'], // hex
    ['http://0177.0.0.1/a.jpg', 'image_url_unreachable'], // octal
    ['http://127.1/a.jpg', 'image_url_unreachable'], // short form
    ['http://[::1]/a.jpg', 'image_url_unreachable'],
    ['http://[::ffff:127.0.0.1]/a.jpg', 'image_url_unreachable'],
    ['http://[::ffff:a9fe:a9fe]/latest/meta-data/', 'image_url_unreachable'], // mapped 169.254.169.254
    ['http://[64:ff9b::10.0.0.1]/a.jpg', 'image_url_unreachable'],
    ['http://169.254.169.254/latest/meta-data/', 'image_url_unreachable'],
    ['http://10.0.0.1:8080/a.jpg', 'image_url_port_not_allowed'],
    ['http://images.test:22/a.jpg', 'image_url_port_not_allowed'],
    ['https://images.test:6379/a.jpg', 'image_url_port_not_allowed'],
    ['http://0.0.0.0/a.jpg', 'image_url_unreachable'],
    ['http://[fd00::1]/a.jpg', 'image_url_unreachable'],
    ['https://[fe80::1]/a.jpg', 'image_url_unreachable'],
    ['ftp://example.com/a.jpg', 'image_url_scheme_not_allowed'],
    ['file:///etc/passwd', 'image_url_scheme_not_allowed'],
    ['gopher://example.com/', 'image_url_scheme_not_allowed'],
    ['data:image/png;base64,AAAA', 'image_url_scheme_not_allowed'],
    ['http://user:secret@images.test/a.jpg', 'image_url_invalid'],
    ['not a url', 'image_url_invalid'],
    [`https://images.test/${'a'.repeat(2100)}`, 'image_url_invalid'],
    ['https://no-such-host.test/a.jpg', 'image_url_unreachable'],
  ])('%s -> %s, before any connection is made', async (url, code) => {
    const { value, sockets } = await socketsDuring(() => refusal(url));
    expect(value.code).toBe(code);
    expect(sockets).toBe(0);
  });

  it('a name is refused when any one of its addresses is not public (every address checked)', async () => {
    const dns = fakeDns({ 'mixed.test': ['8.8.8.8', '10.0.0.7'], 'localhost.test': ['127.0.0.1', '::1'], 'meta.test': ['::ffff:169.254.169.254'] });
    for (const host of ['mixed.test', 'localhost.test', 'meta.test']) {
      const error = await refusal(`https://${host}/a.jpg`, { resolver: dns.resolver });
      expect(error.code).toBe('image_url_unreachable');
      expect(error.status).toBe(422);
    }
    expect(dns.calls).toEqual(['mixed.test', 'localhost.test', 'meta.test']);
  });

  it('the allow-list refuses other hosts before resolving them', async () => {
    const dns = fakeDns({ 'cdn.shop.test': ['8.8.8.8'], 'evil.test': ['8.8.8.8'] });
    const error = await refusal('https://evil.test/a.jpg', { resolver: dns.resolver, allowedHosts: ['*.shop.test'] });
    expect(error.code).toBe('image_url_host_not_allowed');
    expect(dns.calls).toEqual([]);
    // On the list, but its address is private: still refused.
    const internal = fakeDns({ 'img.shop.test': ['10.0.0.9'] });
    expect((await refusal('https://img.shop.test/a.jpg', { resolver: internal.resolver, allowedHosts: ['*.shop.test'] })).code).toBe('image_url_unreachable');
  });
});

describe('fetching from a loopback test server (allowLoopbackForTesting)', () => {
  let server: http.Server;
  let port: number;
  let image: Buffer;
  const hits: { url: string; host: string }[] = [];
  const routes: Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => void> = {};

  beforeAll(async () => {
    image = (await objectOnTexture(160, 120)).bytes;
    server = http.createServer((req, res) => {
      hits.push({ url: req.url!, host: req.headers.host! });
      const route = routes[req.url!.split('?')[0]!];
      if (route) route(req, res);
      else {
        res.writeHead(404);
        res.end();
      }
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    port = (server.address() as AddressInfo).port;
    routes['/photo.jpg'] = (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.end(image);
    };
    routes['/relative'] = (_req, res) => {
      res.writeHead(302, { location: '/photo.jpg' });
      res.end();
    };
    routes['/to-metadata'] = (_req, res) => {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' });
      res.end();
    };
    routes['/to-internal-name'] = (_req, res) => {
      res.writeHead(307, { location: `http://intranet.test:${port}/photo.jpg` });
      res.end();
    };
    routes['/to-file'] = (_req, res) => {
      res.writeHead(301, { location: 'file:///etc/passwd' });
      res.end();
    };
    for (let i = 0; i < 5; i++) {
      routes[`/hop${i}`] = (_req, res) => {
        res.writeHead(302, { location: `/hop${i + 1}` });
        res.end();
      };
    }
    routes['/hop3'] = (_req, res) => {
      res.writeHead(302, { location: '/photo.jpg' });
      res.end();
    };
    routes['/big-declared'] = (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(2 * 1024 * 1024) });
      res.end();
    };
    routes['/big-chunked'] = (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      const chunk = Buffer.alloc(64 * 1024, 1);
      let sent = 0;
      const pump = () => {
        while (sent < 40 && res.write(chunk)) sent++;
        if (sent < 40) res.once('drain', pump);
        else res.end();
      };
      pump();
    };
    routes['/slow'] = (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.write(image.subarray(0, 100)); // and never the rest
    };
    routes['/missing'] = (_req, res) => {
      res.writeHead(404);
      res.end('no');
    };
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  const fetchVia = (url: string, extra: ImageUrlOptions & { maxBytes?: number } = {}) => {
    const dns = fakeDns({ 'images.test': ['127.0.0.1'], 'intranet.test': ['10.0.0.5'] });
    const options = resolveImageUrlOptions({ resolver: dns.resolver, allowLoopbackForTesting: true, timeoutMs: 2_000, allowedPorts: [port], ...extra }, () => {});
    return { dns, result: fetchImage(url, { ...options, maxBytes: extra.maxBytes ?? 1024 * 1024, signal: new AbortController().signal }) };
  };
  const codeOf = (promise: Promise<unknown>) => promise.then(() => 'ok', (e: ApiError) => e.code);

  it('fetches through the name resolved once, connecting to that checked address with the name in Host', async () => {
    hits.length = 0;
    const { dns, result } = fetchVia(`http://images.test:${port}/photo.jpg`);
    const fetched = await result;
    expect(fetched.file.equals(image)).toBe(true);
    expect(fetched.filename).toBe('photo.jpg');
    expect(dns.calls).toEqual(['images.test']);
    expect(hits).toEqual([{ url: '/photo.jpg', host: `images.test:${port}` }]);
  });

  it('follows a relative redirect, resolving the name again for the new hop only', async () => {
    const { dns, result } = fetchVia(`http://images.test:${port}/relative`);
    expect((await result).file.length).toBe(image.length);
    expect(dns.calls).toEqual(['images.test', 'images.test']);
  });

  it('checks every redirect hop: to the metadata address, to a name with a private address, to file:', async () => {
    expect(await codeOf(fetchVia(`http://images.test:${port}/to-metadata`).result)).toBe('image_url_port_not_allowed');
    expect(await codeOf(fetchVia(`http://images.test:${port}/to-metadata`, { allowedPorts: [port, 80] }).result)).toBe('image_url_unreachable');
    const internal = fetchVia(`http://images.test:${port}/to-internal-name`);
    expect(await codeOf(internal.result)).toBe('image_url_unreachable');
    expect(internal.dns.calls).toEqual(['images.test', 'intranet.test']);
    expect(await codeOf(fetchVia(`http://images.test:${port}/to-file`).result)).toBe('image_url_scheme_not_allowed');
  });

  it('3 redirects are followed, a 4th is refused', async () => {
    expect(await codeOf(fetchVia(`http://images.test:${port}/hop1`).result)).toBe('ok'); // hop1 -> hop2 -> hop3 -> photo
    expect(await codeOf(fetchVia(`http://images.test:${port}/hop0`).result)).toBe('image_url_too_many_redirects');
  });

  it('size cap: a declared length over it, and an undeclared body that grows past it', async () => {
    expect(await codeOf(fetchVia(`http://images.test:${port}/big-declared`).result)).toBe('image_url_too_large');
    expect(await codeOf(fetchVia(`http://images.test:${port}/big-chunked`).result)).toBe('image_url_too_large');
  });

  it('time cap: a server that stops sending', async () => {
    const started = Date.now();
    expect(await codeOf(fetchVia(`http://images.test:${port}/slow`, { timeoutMs: 500 }).result)).toBe('image_url_timeout');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('a non-2xx answer, and a port with nothing listening', async () => {
    expect(await codeOf(fetchVia(`http://images.test:${port}/missing`).result)).toBe('image_url_http_error');
    const closed = http.createServer();
    closed.listen(0, '127.0.0.1');
    await new Promise((resolve) => closed.once('listening', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(await codeOf(fetchVia(`http://images.test:${deadPort}/photo.jpg`, { allowedPorts: [deadPort] }).result)).toBe('image_url_unreachable');
  });

  it('without the test-only option, the same loopback server is refused before connecting', async () => {
    hits.length = 0;
    const { result } = fetchVia(`http://images.test:${port}/photo.jpg`, { allowLoopbackForTesting: false });
    expect(await codeOf(result)).toBe('image_url_unreachable');
    expect(hits).toEqual([]);
  });

  it('a scanner learns nothing: an unknown name, a name with a private address, a private literal and a refused connection all read the same; the specifics go to onRefusal', async () => {
    const closed = http.createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => closed.once('listening', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const told: string[] = [];
    const dns = fakeDns({ 'internal.test': ['10.1.2.3'], 'images.test': ['127.0.0.1'] });
    const attempt = async (url: string, allowLoopbackForTesting = false) => {
      const options = resolveImageUrlOptions({ resolver: dns.resolver, allowLoopbackForTesting, allowedPorts: [80, deadPort] }, () => {});
      const error = await fetchImage(url, { ...options, maxBytes: 1024, signal: new AbortController().signal, onRefusal: (r) => told.push(r.message) }).catch((e: ApiError) => e);
      return { code: (error as ApiError).code, status: (error as ApiError).status, detail: (error as ApiError).message };
    };
    const answers = [
      await attempt('http://nowhere.test/a.jpg'),
      await attempt('http://internal.test/a.jpg'),
      await attempt('http://10.0.0.1/a.jpg'),
      await attempt(`http://images.test:${deadPort}/a.jpg`, true),
    ];
    const generic = { code: 'image_url_unreachable', status: 422, detail: ERROR_CATALOG.image_url_unreachable.detail };
    expect(answers).toEqual([generic, generic, generic, generic]);
    expect(told).toHaveLength(4);
    expect(told[0]).toMatch(/nowhere\.test.*could not be resolved.*ENOTFOUND/);
    expect(told[1]).toMatch(/internal\.test.*10\.1\.2\.3.*private/);
    expect(told[2]).toMatch(/10\.0\.0\.1.*private/);
    expect(told[3]).toMatch(/ECONNREFUSED/);
  });

  it('a redirect to a port not allowed is refused before connecting to it', async () => {
    routes['/to-other-port'] = (_req, res) => {
      res.writeHead(302, { location: `http://images.test:${port + 1}/photo.jpg` });
      res.end();
    };
    hits.length = 0;
    const { value, sockets } = await socketsDuring(() => codeOf(fetchVia(`http://images.test:${port}/to-other-port`).result));
    expect(value).toBe('image_url_port_not_allowed');
    expect(hits.map((h) => h.url)).toEqual(['/to-other-port']);
    expect(sockets).toBe(1);
  });

  it('a redirect from https down to http is refused; https to https and http to https are followed', () => {
    const options = resolveImageUrlOptions({ resolver: fakeDns({}).resolver }, () => {});
    const told: string[] = [];
    const refuse = (code: ErrorCode, specifics: string) => (told.push(specifics), new ApiError(code));
    expect(() => nextHop(new URL('https://images.test/a'), 'http://images.test/b.jpg', options, refuse)).toThrow(expect.objectContaining({ code: 'image_url_scheme_not_allowed' }));
    expect(told).toEqual(['a redirect from https://images.test downgrades to http://images.test']);
    expect(nextHop(new URL('https://images.test/a'), '//cdn.test/b.jpg', options, refuse).href).toBe('https://cdn.test/b.jpg');
    expect(nextHop(new URL('http://images.test/a'), 'https://images.test/b.jpg', options, refuse).href).toBe('https://images.test/b.jpg');
  });

  it('a path with a stray % escape is fetched, and the file keeps the raw segment as its name', async () => {
    routes['/photo%zz.jpg'] = (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/jpeg' });
      res.end(image);
    };
    const fetched = await fetchVia(`http://images.test:${port}/photo%zz.jpg`).result;
    expect(fetched.file.equals(image)).toBe(true);
    expect(fetched.filename).toBe('photo%zz.jpg');
  });

  describe('through the API', () => {
    let keys: TestKeys;
    let handler: RemoveBgHandler;
    let api: http.Server;
    let endpoint: string;
    let checker: OpenApiResponseChecker;
    let scene: Awaited<ReturnType<typeof objectOnTexture>>;

    beforeAll(async () => {
      keys = await createTestKeys();
      scene = await objectOnTexture(160, 120);
      image = scene.bytes;
      const dns = fakeDns({ 'images.test': ['127.0.0.1'], 'intranet.test': ['10.0.0.5'] });
      handler = createRemoveBgHandler({
        keyStore: keys.store,
        plans: TEST_PLANS,
        inference: { address: inject('inferenceAddress') },
        imageUrl: { resolver: dns.resolver, allowLoopbackForTesting: true, allowedPorts: [80, port] },
        onInternalError: captureInternalError,
      });
      await handler.ready();
      api = http.createServer(createExpressApp(handler));
      api.listen(0, '127.0.0.1');
      await new Promise((resolve) => api.once('listening', resolve));
      endpoint = `${baseUrlOf(api)}/v1/remove-bg`;
      checker = new OpenApiResponseChecker(await (await fetch(`${baseUrlOf(api)}/v1/openapi.json`)).json());
    });
    afterAll(async () => {
      api.closeAllConnections();
      api.close();
      await handler.close();
    });

    const post = async (init: RequestInit) => {
      const response = await fetch(endpoint, { method: 'POST', ...init, headers: { 'x-api-key': keys.good, ...(init.headers as Record<string, string>) } });
      const body = Buffer.from(await response.arrayBuffer());
      expect(checker.check('POST', endpoint, response.status, response.headers, body), 'conforms to /v1/openapi.json').toEqual([]);
      return { response, body };
    };
    const form = (fields: Record<string, string>) => {
      const data = new FormData();
      for (const [k, v] of Object.entries(fields)) data.append(k, v);
      return data;
    };

    it('image_url as a form field: the cut-out of the fetched image, named after it', async () => {
      const { response, body } = await post({ body: form({ image_url: `http://images.test:${port}/photo.jpg` }) });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-disposition')).toContain('photo-nobg.png');
      expect(alphaIoU((await decodeAlpha(body)).alpha, scene.truth)).toBeGreaterThan(0.9);
    });

    it('image_url in a JSON body, with options', async () => {
      const { response } = await post({
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ image_url: `http://images.test:${port}/photo.jpg`, format: 'webp', size: 'preview' }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('image/webp');
    });

    it.each([
      [{ image_url: 'http://169.254.169.254/latest/meta-data/' }, 422, 'image_url_unreachable'],
      [{ image_url: 'http://[::ffff:10.0.0.1]/' }, 422, 'image_url_unreachable'],
      [{ image_url: 'file:///etc/passwd' }, 400, 'image_url_scheme_not_allowed'],
      [{ image_url: 'http://nowhere.test/a.jpg' }, 422, 'image_url_unreachable'],
      [{ image_url: 'http://images.test:8080/a.jpg' }, 403, 'image_url_port_not_allowed'],
      [{ image_url: 'PORT/to-metadata' }, 422, 'image_url_unreachable'],
      [{ image_url: 'PORT/missing' }, 422, 'image_url_http_error'],
    ])('%j -> %i %s (problem+json)', async (fields, status, code) => {
      const url = fields.image_url.replace('PORT', `http://images.test:${port}`);
      const { response, body } = await post({ body: form({ image_url: url }) });
      expect(response.status).toBe(status);
      expect(JSON.parse(body.toString()).code).toBe(code);
    });

    it('bytes that are not an image: 415, sniffed, whatever the server declared', async () => {
      routes['/fake.jpg'] = (_req, res) => {
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        res.end('<html>not an image</html>'.repeat(10));
      };
      const { response, body } = await post({ body: form({ image_url: `http://images.test:${port}/fake.jpg` }) });
      expect(response.status).toBe(415);
      expect(JSON.parse(body.toString()).code).toBe('unsupported_image_type');
    });

    it('a file and an image_url together: 400 file_and_image_url; a JSON body without image_url: 400 missing_file', async () => {
      const both = form({ image_url: `http://images.test:${port}/photo.jpg` });
      both.append('file', new Blob([image]), 'a.jpg');
      const { response, body } = await post({ body: both });
      expect([response.status, JSON.parse(body.toString()).code]).toEqual([400, 'file_and_image_url']);
      const json = await post({ headers: { 'content-type': 'application/json' }, body: JSON.stringify({ format: 'png' }) });
      expect([json.response.status, JSON.parse(json.body.toString()).code]).toEqual([400, 'missing_file']);
      // Where no host parser reads JSON ahead of bgcut (the example app's express.json() would answer itself).
      const bare = express().use(createRemoveBgRouter(handler)).listen(0, '127.0.0.1');
      await new Promise((resolve) => bare.once('listening', resolve));
      try {
        const broken = await fetch(`${baseUrlOf(bare)}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': 'application/json' }, body: '{"image_url": ' });
        expect([broken.status, ((await broken.json()) as { code: string }).code]).toEqual([400, 'malformed_json']);
      } finally {
        bare.closeAllConnections();
        bare.close();
      }
    });
  });
});
