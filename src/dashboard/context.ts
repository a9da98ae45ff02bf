import type { ActivityStore } from '../core/activity/recorder.js';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import { ownOrigin } from './csrf.js';
import { html } from './html.js';
import { htmlResponse } from './http.js';
import type { ResolvedDashboardOptions } from './options.js';
import { layout, type PageContext } from './pages/layout.js';
import type { PasswordHasher } from './passwords.js';
import { Reveals } from './reveals.js';
import type { Sessions, Visitor } from './sessions.js';
import type { SignInThrottle } from './throttle.js';

/** Fixed messages a redirect may ask a page to show (never text taken from the URL). */
const NOTICES: Record<string, string> = {
  revoked: 'The key is revoked: requests with it now get 401.',
  'key-shown': 'That new key was shown once already, and only its hash is kept: if it was not copied, rotate it (or revoke it and create another).',
  'signed-out': 'You are signed out.',
  'password-changed': 'Password changed. Other browsers signed in to this account were signed out.',
};

/** What every page's handler shares: the configuration, the services, and a few answers. */
export class DashboardContext {
  readonly base: string;
  /** The embedded email-and-password sign-in (not the host app's own). */
  readonly embedded: boolean;
  /** Activity as the pages read it: the recorder (with what it has not written yet) or the store. */
  readonly activity: Pick<ActivityStore, 'dailyCounts' | 'lastUsed'>;
  /** New keys waiting to be shown once, after the redirect that follows their creation. */
  readonly reveals = new Reveals();

  constructor(
    readonly config: ResolvedDashboardOptions,
    readonly sessions: Sessions,
    readonly throttle: SignInThrottle,
    readonly passwords: PasswordHasher,
  ) {
    this.base = config.basePath;
    this.embedded = !config.authenticateAccountHolder;
    this.activity = config.activity ?? config.store;
  }

  page(visitor: Visitor, title = ''): PageContext {
    return {
      base: this.base,
      title,
      product: this.config.productName,
      accountId: visitor.account?.id,
      csrfToken: visitor.csrfToken,
      embedded: this.embedded,
      signOutUrl: this.config.signOutUrl,
    };
  }

  /** The notice a redirect asked for with `?notice=`, if it is one of the fixed ones. */
  notice(url: URL): string | undefined {
    return NOTICES[url.searchParams.get('notice') ?? ''];
  }

  /** A page with one message; for a signed-in visitor with the navigation and Sign out, like every other page. */
  simplePage(status: number, title: string, text: string, visitor?: Visitor): CoreResponse {
    const frame = visitor ? this.page(visitor, title) : { base: this.base, title, product: this.config.productName, csrfToken: '', embedded: this.embedded };
    return htmlResponse(status, layout(frame, html`<p>${text}</p><p><a href="${this.base}/keys">Back to the dashboard</a></p>`));
  }

  notFound(visitor?: Visitor): CoreResponse {
    return this.simplePage(404, 'Not found', 'There is no such page.', visitor);
  }

  crossSite(visitor?: Visitor): CoreResponse {
    return this.simplePage(403, 'Request refused', 'This request did not come from this dashboard (another site, or a page too old). Go back, reload the page and try again.', visitor);
  }

  notAllowed(allow: string, visitor?: Visitor): CoreResponse {
    const page = this.simplePage(405, 'Not allowed', 'That method is not used here.', visitor);
    return { ...page, headers: { ...page.headers, allow } };
  }

  /** The endpoint's address for the curl line. */
  endpointUrl(request: CoreRequest): string {
    return this.config.endpointUrl ?? `${ownOrigin(request) ?? ''}/v1/remove-bg`;
  }

  /** Where a visitor who is not signed in is sent, remembering where they were going. */
  signInAddress(url: URL): string {
    const next = `${url.pathname}${url.search}`;
    if (this.embedded) return `${this.base}/sign-in?next=${encodeURIComponent(next)}`;
    const target = this.config.signInUrl!;
    return `${target}${target.includes('?') ? '&' : '?'}next=${encodeURIComponent(next)}`;
  }

  /** Only a path inside the dashboard may be a place to return to after sign-in. */
  safeNext(next: string | null): string | undefined {
    if (!next || next.length > 500 || !next.startsWith(`${this.base}/`) || next.startsWith('//') || /[\\\s]/.test(next)) return undefined;
    return next;
  }
}
