import type { AccountSummary } from '../../core/account-summary.js';
import { QUALITY_QUOTA_WEIGHT } from '../../core/image/multi-pass.js';
import type { MonthlyQuota } from '../../core/limits/plans.js';
import { html, type SafeHtml } from '../html.js';
import { layout, type PageContext } from './layout.js';

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1 });

/** What the daily chart shows: charged cutouts and refused requests apart, or (usage kept elsewhere) requests. */
export type DailyFigures = { days: string[]; cutouts: number[]; refused: number[] } | { days: string[]; requests: number[] };

const PLOT_HEIGHT = 160;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const shortDay = (day: string) => `${MONTHS[Number(day.slice(5, 7)) - 1]} ${Number(day.slice(8, 10))}`;

/** A round step for the y-axis so that about 4 ticks cover `top`: 1, 2 or 5 times a power of ten. */
function tickStep(top: number): number {
  const rough = Math.max(1, top / 4);
  const power = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= rough)!;
}

/**
 * Per day as a stacked SVG bar chart (no script), with the numbers in a table beside it. Its
 * x positions are percentages and its y positions pixels, with no viewBox: the bars stretch to
 * any width while the labels keep their size (12 px) and never squeeze into each other; the
 * y-axis is a column of its own, the x-axis names three days (first, middle, last).
 */
export function dailyChart(figures: DailyFigures): SafeHtml {
  const { days } = figures;
  const series = 'cutouts' in figures
    ? [
        { name: 'Cutouts', className: 'bar', counts: figures.cutouts },
        { name: 'Refused', className: 'bar refused', counts: figures.refused },
      ]
    : [{ name: 'Requests', className: 'bar', counts: figures.requests }];
  const perDay = days.map((_, i) => series.reduce((sum, s) => sum + (s.counts[i] ?? 0), 0));
  const step = tickStep(Math.max(...perDay, 1));
  const top = Math.max(step, Math.ceil(Math.max(...perDay, 1) / step) * step);
  const y = (value: number) => PLOT_HEIGHT - (value / top) * PLOT_HEIGHT;
  const ticks: number[] = [];
  for (let value = 0; value <= top; value += step) ticks.push(value);
  const slot = 100 / days.length;
  const bars = days.map((day, i) => {
    let base = 0;
    const parts = series.map((s) => {
      const value = s.counts[i] ?? 0;
      const rect = value > 0 ? html`<rect x="${(i * slot + slot * 0.15).toFixed(3)}%" width="${(slot * 0.7).toFixed(3)}%" y="${y(base + value).toFixed(1)}" height="${(y(base) - y(base + value)).toFixed(1)}" class="${s.className}"></rect>` : '';
      base += value;
      return rect;
    });
    return html`<g><title>${day}: ${series.map((s) => `${s.counts[i] ?? 0} ${s.name.toLowerCase()}`).join(', ')}</title>${parts}</g>`;
  });
  const totals = series.map((s) => ({ ...s, total: s.counts.reduce((a, b) => a + b, 0) }));
  const summary = totals.map((s) => `${s.total} ${s.name.toLowerCase()}`).join(', ');
  const middle = Math.floor((days.length - 1) / 2);
  return html`<figure class="chart">
<div class="chart-body" role="img" aria-label="${series.map((s) => s.name).join(' and ')} per day (UTC), last ${days.length} days: ${summary}">
<svg class="y-axis" width="44" height="${PLOT_HEIGHT + 8}" aria-hidden="true">
${ticks.map((value) => html`<text x="38" y="${(y(value) + 4).toFixed(1)}" data-axis="y" class="label end">${fmt(value)}</text>`)}
</svg>
<div class="chart-plot">
<svg class="plot" width="100%" height="${PLOT_HEIGHT + 8}" aria-hidden="true">
${ticks.map((value) => html`<line x1="0" x2="100%" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}" class="${value === 0 ? 'axis' : 'grid'}"></line>`)}
${bars}
</svg>
<svg class="x-axis" width="100%" height="18" aria-hidden="true">
<text x="0" y="13" data-axis="x" class="label">${shortDay(days[0]!)}</text>
<text x="${((middle + 0.5) * slot).toFixed(3)}%" y="13" data-axis="x" class="label middle">${shortDay(days[middle]!)}</text>
<text x="100%" y="13" data-axis="x" class="label end">${shortDay(days[days.length - 1]!)}</text>
</svg>
</div>
</div>
<figcaption>${
    series.length > 1
      ? html`<span class="key"><span class="swatch bar"></span> Cutouts (charged): ${totals[0]!.total}</span> <span class="key"><span class="swatch refused"></span> Refused or failed (not charged): ${totals[1]!.total}</span>`
      : html`Requests per day: ${totals[0]!.total} in all.`
  } <span class="hint">Per UTC day, last ${days.length} days.</span></figcaption>
</figure>
<details><summary>Per day as a table</summary>
<table class="daily"><thead><tr><th scope="col">Day</th>${series.map((s) => html`<th scope="col">${s.name}</th>`)}</tr></thead>
<tbody>${days.map((day, i) => html`<tr><td>${day}</td>${series.map((s) => html`<td>${s.counts[i] ?? 0}</td>`)}</tr>`).reverse()}</tbody></table>
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

export function usagePage(ctx: PageContext, view: { summary: AccountSummary; daily: DailyFigures }): SafeHtml {
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
<div><dt>Images (cutouts charged)</dt><dd id="usage-images">${fmt(usage.images)}</dd></div>
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
<h2 id="daily-heading">${'cutouts' in view.daily ? 'Cutouts and refusals per day' : 'Requests per day'}</h2>
${dailyChart(view.daily)}
</section>`,
  );
}
