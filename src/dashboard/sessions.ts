import { createHash, randomBytes } from 'node:crypto';
import type { Account } from '../core/auth/key-store.js';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import { readCookies, serializeCookie, sign, unsign } from './cookies.js';
import type { ResolvedDashboardOptions } from './options.js';
import type { SessionRecord } from './store.js';

/** Who is asking, as far as the dashboard can tell, and what the response must set. */
export interface Visitor {
  https: boolean;
  account?: Account;
  /** The embedded sign-in's session, with the hash it is stored under. */
  session?: SessionRecord;
  sessionIdHash?: string;
  /** The token this browser's forms carry: the session's, or before sign-in a cookie's. */
  csrfToken: string;
  /** One cookie to set on the response (the dashboard never needs two at once). */
  setCookie?: string;
}

const random = () => randomBytes(32).toString('base64url');
const hashId = (id: string) => createHash('sha256').update(id).digest('hex');

/**
 * Embedded sign-in sessions: a random 256-bit id in a signed, HttpOnly, SameSite=Strict cookie
 * (Secure and `__Host-` named under HTTPS, or as `secureCookies` says); the store holds only the id's SHA-256, the account
 * and the session's anti-forgery token. A new id at every sign-in (no fixation).
 */
export class Sessions {
  constructor(private readonly config: ResolvedDashboardOptions) {}

  /**
   * Whether this response's cookies are Secure, and so `__Host-` named (a browser accepts such a
   * name only on a Secure, Path=/ cookie with no Domain): both follow from this one answer.
   */
  private cookieNames(https: boolean) {
    const secure = this.config.secureCookies === 'auto' ? https : this.config.secureCookies;
    return secure
      ? { secure, session: '__Host-bgcut_session', csrf: '__Host-bgcut_csrf', path: '/' }
      : { secure, session: 'bgcut_session', csrf: 'bgcut_csrf', path: this.config.basePath };
  }

  async visitor(request: CoreRequest): Promise<Visitor> {
    const https = request.protocol === 'https';
    const names = this.cookieNames(https);
    const cookies = readCookies(request.headers);
    const visitor: Visitor = { https, csrfToken: '' };
    if (this.config.authenticateAccountHolder) {
      const accountId = await this.config.authenticateAccountHolder(request);
      if (accountId) visitor.account = await this.config.store.findAccount(accountId);
    } else {
      const id = unsign(cookies.get(names.session), this.config.secret);
      if (id) {
        const idHash = hashId(id);
        const session = await this.config.store.findSession(idHash);
        const account = session && Date.parse(session.expiresAt) > Date.now() ? await this.config.store.findAccount(session.accountId) : undefined;
        if (session && account) Object.assign(visitor, { session, sessionIdHash: idHash, account, csrfToken: session.csrfToken });
      }
    }
    if (!visitor.csrfToken) {
      // Before sign-in (and with the host's own sign-in): a signed double-submit cookie.
      const token = unsign(cookies.get(names.csrf), this.config.secret);
      if (token) visitor.csrfToken = token;
      else {
        visitor.csrfToken = random();
        visitor.setCookie = serializeCookie(names.csrf, sign(visitor.csrfToken, this.config.secret), { path: names.path, secure: names.secure });
      }
    }
    return visitor;
  }

  async start(visitor: Visitor, accountId: string, email: string): Promise<void> {
    if (visitor.sessionIdHash) await this.config.store.deleteSession(visitor.sessionIdHash);
    const id = random();
    const now = Date.now();
    const session: SessionRecord = {
      accountId,
      email,
      csrfToken: random(),
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + this.config.sessionTtlMs).toISOString(),
    };
    await this.config.store.createSession(hashId(id), session);
    const names = this.cookieNames(visitor.https);
    visitor.setCookie = serializeCookie(names.session, sign(id, this.config.secret), {
      path: names.path,
      secure: names.secure,
      maxAge: Math.floor(this.config.sessionTtlMs / 1000),
    });
  }

  async end(visitor: Visitor): Promise<void> {
    if (visitor.sessionIdHash) await this.config.store.deleteSession(visitor.sessionIdHash);
    const names = this.cookieNames(visitor.https);
    visitor.setCookie = serializeCookie(names.session, '', { path: names.path, secure: names.secure, maxAge: 0 });
  }

  finish(visitor: Visitor, response: CoreResponse): CoreResponse {
    if (!visitor.setCookie) return response;
    return { ...response, headers: { ...response.headers, 'set-cookie': visitor.setCookie } };
  }
}
