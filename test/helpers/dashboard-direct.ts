import { Readable } from 'node:stream';
import type { CoreResponse } from '../../src/core/index.js';
import type { Dashboard } from '../../src/dashboard/index.js';

export interface DirectResponse {
  status: number;
  headers: CoreResponse['headers'];
  text: string;
  setCookie: string | undefined;
}

/**
 * A browser-like client that calls `dashboard.handle` directly, as an adapter would, so a test
 * can choose the client address and the scheme the adapter reports (no proxy set-up needed).
 * Keeps cookies, sends the page's Origin on posts.
 */
export class DirectClient {
  readonly cookies = new Map<string, string>();

  constructor(
    private readonly dashboard: Dashboard,
    private readonly options: { clientIp?: string; protocol?: 'http' | 'https'; host?: string } = {},
  ) {}

  private get origin(): string {
    return `${this.options.protocol ?? 'http'}://${this.options.host ?? 'dash.example'}`;
  }

  async request(method: string, url: string, form?: Record<string, string>): Promise<DirectResponse> {
    const headers: Record<string, string> = { host: this.options.host ?? 'dash.example' };
    if (method === 'POST') headers.origin = this.origin;
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    if (this.cookies.size) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const body = Readable.from(form ? [Buffer.from(new URLSearchParams(form).toString())] : []);
    const response = await this.dashboard.handle({
      method,
      url,
      headers,
      body,
      signal: new AbortController().signal,
      protocol: this.options.protocol ?? 'http',
      clientIp: this.options.clientIp ?? '127.0.0.1',
    });
    const setCookie = response.headers['set-cookie'] as string | undefined;
    if (setCookie) {
      const [pair] = setCookie.split(';');
      const eq = pair!.indexOf('=');
      const [name, value] = [pair!.slice(0, eq), pair!.slice(eq + 1)];
      if (value) this.cookies.set(name, value);
      else this.cookies.delete(name);
    }
    const text = Buffer.isBuffer(response.body) ? response.body.toString() : '';
    return { status: response.status, headers: response.headers, text, setCookie };
  }

  /** The anti-forgery token the page put in its forms. */
  static token(html: string): string {
    return /name="csrf-token" content="([^"]+)"/.exec(html)![1]!;
  }

  /** The sign-in page's token (fetching the page once sets this client's anti-forgery cookie). */
  async signInToken(): Promise<string> {
    return DirectClient.token((await this.request('GET', '/dashboard/sign-in')).text);
  }

  async signIn(email: string, password: string, token?: string): Promise<DirectResponse> {
    return this.request('POST', '/dashboard/sign-in', { _csrf: token ?? (await this.signInToken()), email, password });
  }
}
