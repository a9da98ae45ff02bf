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
  if (status === 'active' && record.replacedBy) return html`<span class="status replaced">Being replaced</span> <span class="hint">by <code>${record.replacedBy}</code>, works until ${when(record.expiresAt, '')}</span>`;
  if (status === 'active' && record.expiresAt) return html`<span class="status active">Active</span> <span class="hint">until ${when(record.expiresAt, '')}</span>`;
  return html`<span class="status ${status}">${{ active: 'Active', expired: 'Expired', revoked: 'Revoked' }[status]}</span>`;
}

function actions(ctx: PageContext, record: KeyRecord): SafeHtml {
  const revoke = html`<a class="button danger" href="${ctx.base}/keys/${record.id}/revoke">Revoke</a>`;
  // A key being replaced is not rotated again (its successor would inherit its short deadline).
  if (record.replacedBy) return html`<span class="hint">Rotated already: rotate its successor.</span> ${revoke}`;
  return html`<form method="post" action="${ctx.base}/keys/${record.id}/rotate" class="rotate">
      ${csrfField(ctx)}
      <label for="overlap-${record.id}">Old key keeps working for</label>
      <span class="controls"><select id="overlap-${record.id}" name="overlap">${OVERLAPS.map(([value, , label]) => html`<option value="${value}"${value === '24h' ? html` selected` : ''}>${label}</option>`)}</select>
      <button type="submit">Rotate</button>
      ${revoke}</span>
    </form>`;
}

/**
 * One table of keys. Each cell carries its column's name (data-label): on a narrow screen the
 * rows stack as cards that show it (dashboard.css), so every action is on screen; on a wide one
 * the table sits in a labelled region that can be focused and scrolled if it is still too wide.
 */
function keyTable(ctx: PageContext, rows: KeyRow[], caption: string, withActions: boolean): SafeHtml {
  const body = rows.map(({ record, lastUsed }) => html`<tr>
  <td data-label="Label" class="key-label">${record.label ?? html`<span class="hint">(no label)</span>`}</td>
  <td data-label="ID"><code>${record.id}</code></td>
  <td data-label="Created">${when(record.createdAt, '')}</td>
  <td data-label="Last used">${when(lastUsed, 'Never')}</td>
  <td data-label="Expires">${when(record.expiresAt, 'Never')}</td>
  <td data-label="Restrictions">${restrictions(record)}</td>
  <td data-label="Status">${statusLabel(record)}</td>
  ${withActions ? html`<td data-label="Actions" class="actions">${actions(ctx, record)}</td>` : ''}
</tr>`);
  return html`<div class="table-wrap" role="region" tabindex="0" aria-label="${caption}"><table class="keys">
<caption class="visually-hidden">${caption}</caption>
<thead><tr><th scope="col">Label</th><th scope="col">ID</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Restrictions</th><th scope="col">Status</th>${withActions ? html`<th scope="col">Actions</th>` : ''}</tr></thead>
<tbody>${body}</tbody>
</table></div>`;
}

export function keysPage(ctx: PageContext, view: { keys: KeyRow[]; error?: string; info?: string; form?: URLSearchParams }): SafeHtml {
  // Keys that work are the list; revoked and expired ones are kept out of the way, folded.
  const live = view.keys.filter(({ record }) => keyStatus(record) === 'active');
  const ended = view.keys.filter(({ record }) => keyStatus(record) !== 'active');
  const f = view.form;
  return layout(
    { ...ctx, title: 'Developer settings', current: 'keys' },
    html`${notice('error', view.error)}${notice('ok', view.info)}
<p>API keys identify your account to <code>POST /v1/remove-bg</code> in the <code>X-API-KEY</code> header. Keep them on your servers: never put a key in a web page or an app.</p>
<section aria-labelledby="keys-heading">
<h2 id="keys-heading">API keys</h2>
${live.length === 0 ? html`<p>No active keys${ended.length ? '' : ' yet'}.</p>` : keyTable(ctx, live, 'Active API keys of this account', true)}
${
  ended.length
    ? html`<details class="ended"><summary>Revoked and expired keys (${ended.length})</summary>
${keyTable(ctx, ended, 'Revoked and expired API keys of this account', false)}
</details>`
    : ''
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
<p role="alert" class="notice warn">Copy it now: this is the only time it is shown (reloading this page will not show it again). Only a hash of it is stored.</p>
${
  view.rotated
    ? html`<p>The old key <code>${view.rotated.id}</code> keeps working until ${when(view.rotated.expiresAt, 'never')}; switch your servers to the new one before then.
The new key has its label and restrictions, and ${view.record.expiresAt ? html`the expiry it was created with: ${when(view.record.expiresAt, '')}` : 'never expires'}.</p>`
    : ''
}
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
