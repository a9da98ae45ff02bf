import { html, type SafeHtml } from '../html.js';

export interface PageContext {
  /** Where the dashboard is mounted, e.g. `/dashboard`. */
  base: string;
  title: string;
  /** Product name in the header. */
  product: string;
  /** The signed-in account, absent on the sign-in page. */
  accountId?: string;
  /** The anti-forgery token for this browser's forms. */
  csrfToken: string;
  /** Embedded sign-in (password page and sign-out form), or the host's own. */
  embedded: boolean;
  /** The host's sign-out address when it owns sign-in. */
  signOutUrl?: string | undefined;
  current?: 'keys' | 'usage' | 'try' | 'webhooks' | 'account';
}

const NAV: Array<[NonNullable<PageContext['current']>, string, string]> = [
  ['keys', '/keys', 'Developer settings'],
  ['usage', '/usage', 'Usage'],
  ['try', '/try', 'Try it'],
  ['webhooks', '/webhooks', 'Webhooks'],
  ['account', '/account', 'Account'],
];

/** The page frame: header, navigation, a main landmark, the dashboard's own CSS and script. */
export function layout(ctx: PageContext, content: SafeHtml): SafeHtml {
  // Sign out is the list's last item, so links and it wrap as one flow (two lines on a phone).
  const signOut = ctx.embedded
    ? html`<li class="sign-out-item"><form method="post" action="${ctx.base}/sign-out" class="sign-out">
              <input type="hidden" name="_csrf" value="${ctx.csrfToken}">
              <button type="submit">Sign out</button>
            </form></li>`
    : ctx.signOutUrl
      ? html`<li class="sign-out-item"><a class="sign-out" href="${ctx.signOutUrl}">Sign out</a></li>`
      : '';
  const nav = ctx.accountId
    ? html`<nav aria-label="Dashboard">
        <ul>
          ${NAV.filter(([id]) => id !== 'account' || ctx.embedded).map(
            ([id, path, label]) => html`<li><a href="${ctx.base}${path}"${id === ctx.current ? html` aria-current="page"` : ''}>${label}</a></li>`,
          )}
          ${signOut}
        </ul>
      </nav>`
    : '';
  return html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="${ctx.csrfToken}">
<meta name="dashboard-base" content="${ctx.base}">
<title>${ctx.title} · ${ctx.product}</title>
<link rel="icon" href="${ctx.base}/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${ctx.base}/assets/dashboard.css">
<script src="${ctx.base}/assets/dashboard.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header>
  <p class="brand">${ctx.product}</p>
  ${ctx.accountId ? html`<p class="account">Account <strong>${ctx.accountId}</strong></p>` : ''}
  ${nav}
</header>
<main id="main">
<h1>${ctx.title}</h1>
${content}
</main>
</body>
</html>`;
}

/** A status line (role=status) or an error (role=alert) at the top of a page. */
export function notice(kind: 'ok' | 'error' | undefined, text: string | undefined): SafeHtml {
  if (!kind || !text) return html``;
  return kind === 'error' ? html`<p class="notice error" role="alert">${text}</p>` : html`<p class="notice ok" role="status">${text}</p>`;
}

export function csrfField(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${ctx.csrfToken}">`;
}
