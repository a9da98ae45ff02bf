import type { KeyRecord } from '../../core/auth/key-store.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, layout, notice, type PageContext } from './layout.js';

export interface KeyRow {
  record: KeyRecord;
  lastUsed: string | undefined;
}

export type KeyStatus = 'active' | 'expired' | 'revoked';

export function keyStatus(record: KeyRecord, now = Date.now()): KeyStatus {
  if (record.revokedAt) return 'revoked';
  if (record.expiresAt && Date.parse(record.expiresAt) <= now) return 'expired';
  return 'active';
}

/** Choices offered for how long a rotated key keeps working beside its successor. */
export const OVERLAPS: Array<[string, number, string]> = [
  ['1h', 3_600_000, '1 hour'],
  ['24h', 86_400_000, '24 hours'],
  ['7d', 7 * 86_400_000, '7 days'],
];

/** Choices for a new key's lifetime. */
export const LIFETIMES: Array<[string, number | null, string]> = [
  ['never', null, 'Never expires'],
  ['30d', 30 * 86_400_000, '30 days'],
  ['90d', 90 * 86_400_000, '90 days'],
  ['365d', 365 * 86_400_000, '1 year'],
];

const when = (iso: string | null | undefined, none: string) =>
  iso ? html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>` : html`${none}`;

function restrictions(record: KeyRecord): SafeHtml {
  const parts: SafeHtml[] = [];
  if (record.allowedIps?.length) parts.push(html`<span>IPs: ${record.allowedIps.join(', ')}</span>`);
  if (record.allowedOrigins?.length) parts.push(html`<span>Origins: ${record.allowedOrigins.join(', ')}</span>`);
  return parts.length ? html`${parts}` : html`None`;
}

function statusLabel(record: KeyRecord): SafeHtml {
  const status = keyStatus(record);
  if (status === 'active' && record.expiresAt) return html`<span class="status active">Active</span> <span class="hint">until ${when(record.expiresAt, '')}</span>`;
  return html`<span class="status ${status}">${{ active: 'Active', expired: 'Expired', revoked: 'Revoked' }[status]}</span>`;
}

export function keysPage(ctx: PageContext, view: { keys: KeyRow[]; error?: string; info?: string; form?: URLSearchParams }): SafeHtml {
  const rows = view.keys.map(({ record, lastUsed }) => {
    const active = keyStatus(record) === 'active';
    return html`<tr>
  <td>${record.label ?? html`<span class="hint">(no label)</span>`}</td>
  <td><code>${record.id}</code></td>
  <td>${when(record.createdAt, '')}</td>
  <td>${when(lastUsed, 'Never')}</td>
  <td>${when(record.expiresAt, 'Never')}</td>
  <td>${restrictions(record)}</td>
  <td>${statusLabel(record)}</td>
  <td class="actions">${
    active
      ? html`<form method="post" action="${ctx.base}/keys/${record.id}/rotate" class="inline">
      ${csrfField(ctx)}
      <label for="overlap-${record.id}">Old key keeps working for</label>
      <select id="overlap-${record.id}" name="overlap">${OVERLAPS.map(([value, , label]) => html`<option value="${value}"${value === '24h' ? html` selected` : ''}>${label}</option>`)}</select>
      <button type="submit">Rotate</button>
    </form>
    <a class="button danger" href="${ctx.base}/keys/${record.id}/revoke">Revoke</a>`
      : ''
  }</td>
</tr>`;
  });
  const f = view.form;
  return layout(
    { ...ctx, title: 'Developer settings', current: 'keys' },
    html`${notice('error', view.error)}${notice('ok', view.info)}
<p>API keys identify your account to <code>POST /v1/remove-bg</code> in the <code>X-API-KEY</code> header. Keep them on your servers: never put a key in a web page or an app.</p>
<section aria-labelledby="keys-heading">
<h2 id="keys-heading">API keys</h2>
${
  view.keys.length === 0
    ? html`<p>No keys yet.</p>`
    : html`<div class="table-wrap"><table class="keys">
<caption class="visually-hidden">API keys of this account</caption>
<thead><tr><th scope="col">Label</th><th scope="col">ID</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Restrictions</th><th scope="col">Status</th><th scope="col">Actions</th></tr></thead>
<tbody>${rows}</tbody>
</table></div>`
}
</section>
<section class="card" aria-labelledby="create-heading">
<h2 id="create-heading">Create a key</h2>
<form method="post" action="${ctx.base}/keys">
  ${csrfField(ctx)}
  <p><label for="label">Label</label>
  <input id="label" name="label" maxlength="100" placeholder="e.g. production server" value="${f?.get('label') ?? ''}"></p>
  <p><label for="expires">Expires</label>
  <select id="expires" name="expires">${LIFETIMES.map(([value, , label]) => html`<option value="${value}"${f?.get('expires') === value ? html` selected` : ''}>${label}</option>`)}</select></p>
  <p><label for="ips">Allowed client addresses</label>
  <textarea id="ips" name="ips" rows="2" aria-describedby="ips-hint">${f?.get('ips') ?? ''}</textarea>
  <span id="ips-hint" class="hint">Optional. IP addresses or CIDR ranges, one per line; empty for anywhere.</span></p>
  <p><label for="origins">Allowed origins</label>
  <textarea id="origins" name="origins" rows="2" aria-describedby="origins-hint">${f?.get('origins') ?? ''}</textarea>
  <span id="origins-hint" class="hint">Optional. Such as https://shop.example, one per line; empty for any.</span></p>
  <p><button type="submit">Create key</button></p>
</form>
</section>`,
  );
}

/** The one time a key is visible: after creating or rotating it. */
export function newKeyPage(ctx: PageContext, view: { key: string; record: KeyRecord; endpointUrl: string; rotated?: KeyRecord }): SafeHtml {
  const curl = `curl -H "X-API-KEY: ${view.key}" -F file=@photo.jpg ${view.endpointUrl} -o photo-nobg.png`;
  return layout(
    { ...ctx, title: view.rotated ? 'Key rotated' : 'Key created', current: 'keys' },
    html`<section class="card new-key" aria-labelledby="new-key-heading">
<h2 id="new-key-heading">Your new API key</h2>
<p role="alert" class="notice warn">Copy it now: this is the only time it is shown. Only a hash of it is stored.</p>
${view.rotated ? html`<p>The old key <code>${view.rotated.id}</code> keeps working until ${when(view.rotated.expiresAt, 'never')}; switch your servers to the new one before then.</p>` : ''}
<p><label for="new-key">Key <code>${view.record.id}</code>${view.record.label ? html` (${view.record.label})` : ''}</label>
<span class="copy-row"><input id="new-key" class="secret" readonly value="${view.key}" spellcheck="false" autocomplete="off">
<button type="button" data-copy="new-key">Copy</button></span></p>
<p><label for="curl-line">Try it from a terminal</label>
<span class="copy-row"><input id="curl-line" class="secret" readonly value="${curl}" spellcheck="false" autocomplete="off">
<button type="button" data-copy="curl-line">Copy</button></span></p>
<p class="copy-status" role="status" aria-live="polite"></p>
<p><a class="button" href="${ctx.base}/keys">Done</a></p>
</section>`,
  );
}

export function revokePage(ctx: PageContext, record: KeyRecord): SafeHtml {
  return layout(
    { ...ctx, title: 'Revoke key', current: 'keys' },
    html`<section class="card narrow" aria-labelledby="revoke-heading">
<h2 id="revoke-heading">Revoke <code>${record.id}</code>${record.label ? html` (${record.label})` : ''}?</h2>
<p>Requests with this key will be refused with 401 at once. This cannot be undone.</p>
<form method="post" action="${ctx.base}/keys/${record.id}/revoke">
  ${csrfField(ctx)}
  <p><button type="submit" class="danger">Revoke key</button> <a class="button" href="${ctx.base}/keys">Cancel</a></p>
</form>
</section>`,
  );
}
