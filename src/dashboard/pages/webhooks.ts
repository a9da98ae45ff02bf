import type { Delivery } from '../../core/jobs/webhooks/deliveries.js';
import { html, type SafeHtml } from '../html.js';
import { csrfField, layout, notice, type PageContext } from './layout.js';

export interface WebhooksView {
  /** False when the API sends no webhooks (no secret store configured). */
  enabled: boolean;
  hasSecret: boolean;
  /** A secret just made: shown this once. */
  newSecret?: string | undefined;
  deliveries: Delivery[];
}

/** Webhook signing secret (made or remade here) and the latest deliveries with each attempt. */
export function webhooksPage(ctx: PageContext, view: WebhooksView): SafeHtml {
  if (!view.enabled) {
    return layout({ ...ctx, title: 'Webhooks', current: 'webhooks' }, html`<section class="card"><h2>Webhooks</h2><p>This server sends no webhooks.</p></section>`);
  }
  const rows = view.deliveries.map(
    (d) => html`<tr>
<td><time datetime="${d.createdAt}">${d.createdAt.replace('T', ' ').slice(0, 19)}</time></td>
<td>${d.type}</td><td><code>${d.jobId}</code></td><td>${d.url}</td>
<td class="state-${d.state}">${d.state}</td>
<td>${d.attempts.map((a) => `${a.status || '—'}${a.error && !a.status ? ` (${a.error})` : ''}`).join(' → ')}</td>
</tr>`,
  );
  return layout(
    { ...ctx, title: 'Webhooks', current: 'webhooks' },
    html`${view.newSecret ? notice('ok', 'A new signing secret was made. Copy it now: it is not shown again.') : ''}
<section class="card" aria-labelledby="secret-heading">
<h2 id="secret-heading">Signing secret</h2>
<p>Jobs started with a <code>callback_url</code> send their events there, signed per Standard Webhooks
(<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>). Verify them with this secret.</p>
${view.newSecret ? html`<p><label for="secret">Your signing secret</label> <input id="secret" readonly value="${view.newSecret}" size="50"></p>` : html`<p>${view.hasSecret ? 'A signing secret is set.' : 'No signing secret yet: jobs asking for a callback are refused until you make one.'}</p>`}
<form method="post" action="${ctx.base}/webhooks/secret">
  ${csrfField(ctx)}
  <p><button type="submit">${view.hasSecret ? 'Replace the signing secret' : 'Make a signing secret'}</button>
  ${view.hasSecret ? html`<span class="hint">The old secret stops working at once.</span>` : ''}</p>
</form>
</section>
<section class="card" aria-labelledby="deliveries-heading">
<h2 id="deliveries-heading">Recent deliveries</h2>
${view.deliveries.length === 0
  ? html`<p>None yet.</p>`
  : html`<table><thead><tr><th scope="col">Time (UTC)</th><th scope="col">Event</th><th scope="col">Job</th><th scope="col">URL</th><th scope="col">State</th><th scope="col">Attempts (HTTP status)</th></tr></thead>
<tbody>${rows}</tbody></table>`}
</section>`,
  );
}
