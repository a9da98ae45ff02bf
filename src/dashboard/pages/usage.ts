import type { AccountSummary } from '../../core/account-summary.js';
import { QUALITY_QUOTA_WEIGHT } from '../../core/image/multi-pass.js';
import type { MonthlyQuota } from '../../core/limits/plans.js';
import { html, type SafeHtml } from '../html.js';
import { layout, type PageContext } from './layout.js';

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1 });

/** Requests per day as an SVG bar chart (no script), with the numbers in a table beside it. */
export function dailyChart(days: string[], counts: number[]): SafeHtml {
  const width = 720;
  const height = 180;
  const top = Math.max(1, ...counts);
  const bar = width / days.length;
  const bars = days.map((day, i) => {
    const h = Math.round(((counts[i] ?? 0) / top) * (height - 20));
    return html`<rect x="${(i * bar + 2).toFixed(1)}" y="${height - h}" width="${(bar - 4).toFixed(1)}" height="${h}" class="bar"><title>${day}: ${counts[i] ?? 0} requests</title></rect>`;
  });
  const total = counts.reduce((a, b) => a + b, 0);
  return html`<figure class="chart">
<svg viewBox="0 0 ${width} ${height + 18}" role="img" aria-labelledby="chart-title" preserveAspectRatio="none">
<title id="chart-title">Requests per day, last ${days.length} days: ${total} in all, at most ${top === 1 && total === 0 ? 0 : top} in a day</title>
<line x1="0" y1="${height}" x2="${width}" y2="${height}" class="axis"></line>
${bars}
<text x="0" y="${height + 14}" class="label">${days[0]}</text>
<text x="${width}" y="${height + 14}" class="label end">${days[days.length - 1]}</text>
</svg>
<figcaption>Requests per day (UTC), last ${days.length} days: ${total} in all.</figcaption>
</figure>
<details><summary>Requests per day as a table</summary>
<table class="daily"><thead><tr><th scope="col">Day</th><th scope="col">Requests</th></tr></thead>
<tbody>${days.map((day, i) => html`<tr><td>${day}</td><td>${counts[i] ?? 0}</td></tr>`).reverse()}</tbody></table>
</details>`;
}

/**
 * A quota counts credits, not images or megapixels as such: a megapixel quota charges each
 * cutout its size rounded up to whole megapixels (at least 1), and quality best counts several
 * times (core's quotaCost and QUALITY_QUOTA_WEIGHT). The page names them so, beside the
 * megapixels actually processed.
 */
const creditName = (quota: MonthlyQuota) => (quota.unit === 'images' ? 'image credits' : 'megapixel credits');
const creditRule = (quota: MonthlyQuota) =>
  `${quota.unit === 'images' ? 'Each cutout uses 1' : 'Each cutout uses its size in megapixels, rounded up (at least 1)'}; quality best uses ${QUALITY_QUOTA_WEIGHT.best} times as many.`;

export function usagePage(ctx: PageContext, view: { summary: AccountSummary; days: string[]; counts: number[] }): SafeHtml {
  const { plan, usage, quota, rate, inProgress } = view.summary;
  const quotaBlock = quota
    ? html`<p><label for="quota-meter">This month's quota: ${fmt(quota.used)} of ${fmt(quota.amount)} ${creditName(quota)} used</label>
<meter id="quota-meter" min="0" max="${quota.amount}" value="${quota.used}" high="${quota.amount * 0.8}" optimum="0" aria-describedby="quota-rule">${fmt(quota.used)} / ${fmt(quota.amount)}</meter>
<span class="hint">${fmt(quota.remaining)} left; resets <time datetime="${quota.resetsAt}">${quota.resetsAt.slice(0, 10)}</time>.</span>
<span class="hint" id="quota-rule">${creditRule(quota)}</span></p>`
    : html`<p>No monthly quota.</p>`;
  return layout(
    { ...ctx, title: 'Usage', current: 'usage' },
    html`<div class="grid">
<section class="card" aria-labelledby="month-heading">
<h2 id="month-heading">This month (${usage.month})</h2>
<dl class="figures">
<div><dt>Images</dt><dd id="usage-images">${fmt(usage.images)}</dd></div>
<div><dt>Megapixels processed</dt><dd id="usage-megapixels">${fmt(usage.megapixels)}</dd></div>
</dl>
${quotaBlock}
</section>
<section class="card" aria-labelledby="rate-heading">
<h2 id="rate-heading">Rate limit now</h2>
<dl class="figures">
<div><dt>Requests left this minute</dt><dd id="rate-remaining">${rate.remaining} of ${rate.limit}</dd></div>
<div><dt>Window resets in</dt><dd>${rate.resetSeconds} s</dd></div>
<div><dt>In progress</dt><dd>${inProgress}${plan.maxConcurrent ? html` of ${plan.maxConcurrent}` : ''}</dd></div>
</dl>
</section>
<section class="card" aria-labelledby="plan-heading">
<h2 id="plan-heading">Plan: ${plan.name}</h2>
<dl class="limits">
<dt>Requests per minute</dt><dd>${plan.requestsPerMinute}${plan.burst ? html` (+${plan.burst} burst per hour)` : ''}</dd>
<dt>Monthly quota</dt><dd>${plan.monthlyQuota ? `${fmt(plan.monthlyQuota.amount)} ${creditName(plan.monthlyQuota)}` : 'None'}</dd>
<dt>Requests at once</dt><dd>${plan.maxConcurrent ?? 'No limit'}</dd>
<dt>Largest upload</dt><dd>${fmt(plan.maxUploadBytes / 1048576)} MiB</dd>
<dt>Largest image</dt><dd>${fmt(plan.maxInputMegapixels)} MP</dd>
${plan.maxOutputMegapixels ? html`<dt>Largest output</dt><dd>${fmt(plan.maxOutputMegapixels)} MP</dd>` : ''}
<dt>Models</dt><dd>${plan.models.join(', ')}</dd>
<dt>Output options</dt><dd>${plan.outputOptions ? plan.outputOptions.join(', ') : 'All'}</dd>
</dl>
</section>
</div>
<section class="card" aria-labelledby="daily-heading">
<h2 id="daily-heading">Requests per day</h2>
${dailyChart(view.days, view.counts)}
</section>`,
  );
}
