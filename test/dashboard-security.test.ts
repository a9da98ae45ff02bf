import { Redis } from 'ioredis';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SCRYPT_COST, hashPassword, PasswordHasher, setAccountHolder, verifyPassword, type DashboardOptions, type PasswordCheck } from '../src/dashboard/index.js';
import { FAST_HASHER, HOLDER, OTHER, startDashboardApp, type DashboardApp } from './helpers/dashboard-app.js';
import { DirectClient } from './helpers/dashboard-direct.js';
import { startRedis } from './helpers/redis-server.js';

/** The fast test hasher, counting how many passwords reach the check. */
class CountingHasher extends PasswordHasher {
  checks = 0;
  constructor() {
    super(FAST_HASHER.cost);
  }
  override async verify(password: string, stored: string | undefined): Promise<PasswordCheck> {
    this.checks++;
    return super.verify(password, stored);
  }
}

const apps: DashboardApp[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});
/** One request over a raw socket: status, headers and every byte after them until the server closes. */
async function rawRequest(base: string, method: string, path: string, cookie: string) {
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  socket.write(`${method} ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nCookie: ${cookie}\r\nConnection: close\r\n\r\n`);
  const chunks: Buffer[] = [];
  for await (const chunk of socket) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const end = raw.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body: raw.subarray(end + 4) };
}

async function start(dashboard: Partial<DashboardOptions> = {}): Promise<DashboardApp> {
  const app = await startDashboardApp({ dashboard });
  apps.push(app);
  return app;
}

describe('sign-in throttle', () => {
  it('twenty concurrent wrong passwords for one email from one address: at most 5 reach the password check, the rest get 429', async () => {
    const hasher = new CountingHasher();
    const app = await start({ passwordHasher: hasher });
    const client = new DirectClient(app.dashboard, { clientIp: '203.0.113.9' });
    const token = await client.signInToken();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => client.signIn(HOLDER.email, `wrong guess ${i}`, token)));
    expect(hasher.checks).toBeLessThanOrEqual(5);
    expect(answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(15);
    expect(answers.every((a) => a.status === 401 || a.status === 429)).toBe(true);
    // Locked now: even the right password is refused without being checked.
    const checks = hasher.checks;
    expect((await client.signIn(HOLDER.email, HOLDER.password, token)).status).toBe(429);
    expect(hasher.checks).toBe(checks);
  });

  it('with Redis, twenty concurrent wrong passwords spread over two instances: at most 5 reach the password check', async () => {
    const redis = await startRedis();
    const client = new Redis(redis.url);
    try {
      const hashers = [new CountingHasher(), new CountingHasher()];
      const instances = await Promise.all(hashers.map((passwordHasher) => start({ passwordHasher, redis: client, keyPrefix: 'sec' })));
      const clients = instances.map((app) => new DirectClient(app.dashboard, { clientIp: '203.0.113.9' }));
      const tokens = await Promise.all(clients.map((c) => c.signInToken()));
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => clients[i % 2]!.signIn(HOLDER.email, `wrong guess ${i}`, tokens[i % 2])));
      expect(hashers[0]!.checks + hashers[1]!.checks).toBeLessThanOrEqual(5);
      expect(answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(15);
      expect((await clients[1]!.signIn(HOLDER.email, HOLDER.password, tokens[1])).status).toBe(429);
      // From another address the holder still signs in, through either instance.
      expect((await new DirectClient(instances[0]!.dashboard, { clientIp: '198.51.100.7' }).signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    } finally {
      client.disconnect();
      await redis.stop();
    }
  });

  it("someone else's wrong passwords do not lock the holder out: counts are per email and address", async () => {
    const app = await start();
    const attacker = new DirectClient(app.dashboard, { clientIp: '203.0.113.9' });
    for (let i = 1; i <= 4; i++) expect((await attacker.signIn(HOLDER.email, `wrong guess ${i}`)).status).toBe(401);
    const fifth = await attacker.signIn(HOLDER.email, 'wrong guess 5');
    expect(fifth.status).toBe(429);
    expect(Number(fifth.headers['retry-after'])).toBeGreaterThan(800);
    expect((await attacker.signIn(HOLDER.email, HOLDER.password)).status).toBe(429);
    // The holder, from their own address, signs in.
    expect((await new DirectClient(app.dashboard, { clientIp: '198.51.100.7' }).signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
  });

  it('a per-email daily ceiling locks the email from every address once many addresses have guessed', async () => {
    const app = await start({ throttle: { perEmailPerDay: 6 } });
    const statuses: number[] = [];
    for (const ip of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
      const client = new DirectClient(app.dashboard, { clientIp: ip });
      for (let i = 0; i < 2; i++) statuses.push((await client.signIn(HOLDER.email, `wrong guess ${ip} ${i}`)).status);
    }
    // Six wrong passwords from three addresses (two each, under the per-pair limit of 5); the sixth uses the day's last point.
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    const fresh = await new DirectClient(app.dashboard, { clientIp: '198.51.100.7' }).signIn(HOLDER.email, HOLDER.password);
    expect(fresh.status).toBe(429);
    expect(Number(fresh.headers['retry-after'])).toBeGreaterThan(3600);
    // Another email is untouched.
    expect((await new DirectClient(app.dashboard, { clientIp: '198.51.100.7' }).signIn(OTHER.email, OTHER.password)).status).toBe(303);
  });

  it('a right password gives its points back: 4 wrong, right, then 4 wrong again are all checked', async () => {
    const hasher = new CountingHasher();
    const app = await start({ passwordHasher: hasher });
    const client = new DirectClient(app.dashboard, { clientIp: '203.0.113.9' });
    for (let i = 0; i < 4; i++) expect((await client.signIn(HOLDER.email, `wrong ${i}`)).status).toBe(401);
    expect((await client.signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    const other = new DirectClient(app.dashboard, { clientIp: '203.0.113.9' });
    for (let i = 0; i < 4; i++) expect((await other.signIn(HOLDER.email, `wrong again ${i}`)).status).toBe(401);
    expect(hasher.checks).toBe(9);
  });
});

describe('throttle options', () => {
  it('refuses the perEmail option of earlier versions instead of ignoring it', async () => {
    const { SignInThrottle } = await import('../src/dashboard/throttle.js');
    expect(() => new SignInThrottle({ perEmail: 5 } as never, undefined, 'x')).toThrow('throttle.perEmail is gone');
    expect(() => new SignInThrottle({ perEmailPerDay: 0 }, undefined, 'x')).toThrow('perEmailPerDay must be a positive integer');
  });
});

describe('password-change throttle', () => {
  it('counts wrong current passwords per account, apart from sign-in: the holder can still sign in, another account can still change its password', async () => {
    const app = await start({ throttle: { perAddress: 5 } });
    const bob = new DirectClient(app.dashboard);
    expect((await bob.signIn(OTHER.email, OTHER.password)).status).toBe(303);
    const bobToken = DirectClient.token((await bob.request('GET', '/dashboard/account')).text);
    const wrong = { _csrf: bobToken, current: 'not my password', new: 'a brand new passphrase', confirm: 'a brand new passphrase' };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await bob.request('POST', '/dashboard/account/password', wrong)).status);
    expect(statuses.slice(0, 4)).toEqual([400, 400, 400, 400]);
    expect(statuses[5]).toBe(429);

    // Bob's failures did not touch his sign-in.
    expect((await new DirectClient(app.dashboard).signIn(OTHER.email, OTHER.password)).status).toBe(303);
    // Nor Ada's password change (same address, another account).
    const ada = new DirectClient(app.dashboard);
    expect((await ada.signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    const adaToken = DirectClient.token((await ada.request('GET', '/dashboard/account')).text);
    const changed = await ada.request('POST', '/dashboard/account/password', { _csrf: adaToken, current: HOLDER.password, new: 'ada has a new one', confirm: 'ada has a new one' });
    expect(changed.status).toBe(303);
  });
});

describe('scrypt cost', () => {
  it("hashes at the default cost N=2^15, r=8, p=3: one of OWASP's minimum settings", async () => {
    // OWASP Password Storage Cheat Sheet: scrypt minimums, any one of them.
    const owasp = [
      { N: 2 ** 17, r: 8, p: 1 },
      { N: 2 ** 16, r: 8, p: 2 },
      { N: 2 ** 15, r: 8, p: 3 },
      { N: 2 ** 14, r: 8, p: 5 },
      { N: 2 ** 13, r: 8, p: 10 },
    ];
    const cost = DEFAULT_SCRYPT_COST;
    expect(owasp.some((m) => cost.N >= m.N && cost.r >= m.r && cost.p >= m.p)).toBe(true);
    expect(cost).toEqual({ N: 2 ** 15, r: 8, p: 3 });
    const hash = await hashPassword('a long enough password');
    expect(hash).toMatch(/^scrypt\$32768\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(await verifyPassword('a long enough password', hash)).toBe(true);
    expect(await verifyPassword('a long enough passwore', hash)).toBe(false);
  });

  it('a sign-in through a dashboard at the default cost rehashes a password stored at an older cost', async () => {
    const app = await start({ passwordHasher: new PasswordHasher() });
    const old = new PasswordHasher({ N: 2 ** 15, r: 8, p: 1 });
    await setAccountHolder(app.store, HOLDER.accountId, HOLDER.email, HOLDER.password, old);
    expect((await app.store.findHolder(HOLDER.email))!.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect((await new DirectClient(app.dashboard).signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    const rehashed = (await app.store.findHolder(HOLDER.email))!.passwordHash;
    expect(rehashed).toMatch(/^scrypt\$32768\$8\$3\$/);
    expect(await verifyPassword(HOLDER.password, rehashed)).toBe(true);
    expect((await new DirectClient(app.dashboard).signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
  });
});

describe('cookies', () => {
  /** Attributes of a Set-Cookie line, lower-cased names. */
  const parse = (line: string) => {
    const [pair, ...attributes] = line.split(';').map((p) => p.trim());
    const name = pair!.slice(0, pair!.indexOf('='));
    const attrs = new Map(attributes.map((a) => [a.split('=')[0]!.toLowerCase(), a.split('=')[1] ?? '']));
    return { name, attrs };
  };

  it('the __Host- name and the Secure flag come from one setting, whatever the scheme and secureCookies say', async () => {
    const cases: Array<{ protocol: 'http' | 'https'; secureCookies: boolean | 'auto'; secure: boolean }> = [
      { protocol: 'https', secureCookies: 'auto', secure: true },
      { protocol: 'http', secureCookies: 'auto', secure: false },
      { protocol: 'https', secureCookies: false, secure: false },
      // Behind a TLS proxy that is not trusted, the app sees http; the operator says the browser is on https.
      { protocol: 'http', secureCookies: true, secure: true },
    ];
    for (const { protocol, secureCookies, secure } of cases) {
      const app = await start({ secureCookies });
      const client = new DirectClient(app.dashboard, { protocol });
      const page = await client.request('GET', '/dashboard/sign-in');
      const signedIn = await client.signIn(HOLDER.email, HOLDER.password, DirectClient.token(page.text));
      expect(signedIn.status).toBe(303);
      for (const line of [page.setCookie!, signedIn.setCookie!]) {
        const { name, attrs } = parse(line);
        const where = `${protocol}, secureCookies ${secureCookies}: ${line.replace(/=[^;]+/, '=…')}`;
        expect(attrs.has('secure'), where).toBe(secure);
        expect(name.startsWith('__Host-'), where).toBe(secure);
        // What a browser demands of a __Host- cookie: Secure, Path=/ and no Domain.
        if (name.startsWith('__Host-')) expect([attrs.get('path'), attrs.has('domain')], where).toEqual(['/', false]);
        expect(attrs.has('httponly') && attrs.get('samesite')?.toLowerCase() === 'strict', where).toBe(true);
      }
    }
  });
});

describe('route table', () => {
  it('refuses to start with a POST route that declares no anti-forgery check', async () => {
    const { RouteTable } = await import('../src/dashboard/router.js');
    expect(() => new RouteTable([{ method: 'POST', path: '/x', access: 'holder', handle: async () => ({ status: 200, headers: {}, body: Buffer.alloc(0) }) }])).toThrow(
      'declares no anti-forgery check',
    );
  });

  it('answers a wrong method with 405 and Allow, an unknown page with 404, HEAD like GET; anyone not signed in is sent to sign in first', async () => {
    const app = await start();
    const anonymous = new DirectClient(app.dashboard);
    expect((await anonymous.request('GET', '/dashboard/nowhere')).status).toBe(303);
    const put = await anonymous.request('PUT', '/dashboard/sign-in');
    expect([put.status, put.headers.allow]).toEqual([405, 'GET, POST']);
    const client = new DirectClient(app.dashboard);
    expect((await client.signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    expect((await client.request('GET', '/dashboard/nowhere')).status).toBe(404);
    const getRotate = await client.request('GET', '/dashboard/keys/key_1/rotate');
    expect([getRotate.status, getRotate.headers.allow]).toEqual([405, 'POST']);
    expect((await client.request('GET', '/dashboard/')).headers.location).toBe('/dashboard/keys');
    // HEAD over real HTTP: GET's status and headers (the length GET's body has), and no body at all.
    const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const [head, get] = [await rawRequest(app.url, 'HEAD', '/dashboard/usage', cookie), await rawRequest(app.url, 'GET', '/dashboard/usage', cookie)];
    expect(get.status).toBe(200);
    expect(get.body.length).toBeGreaterThan(0);
    expect(Number(get.headers['content-length'])).toBe(get.body.length);
    const comparable = (headers: Record<string, string>) => Object.fromEntries(Object.entries(headers).filter(([name]) => name !== 'date'));
    expect({ status: head.status, headers: comparable(head.headers) }).toEqual({ status: get.status, headers: comparable(get.headers) });
    expect(head.body.length).toBe(0);
  });
});
