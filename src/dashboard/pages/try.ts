import { QUALITY_QUOTA_WEIGHT } from '../../core/image/multi-pass.js';
import { html, type SafeHtml } from '../html.js';
import { layout, type PageContext } from './layout.js';

/**
 * Try it: the page's script posts the picked image to the dashboard's own `/try` route, which
 * runs the cutout for the signed-in account. No API key is ever in the page.
 */
/** How each quality mode is offered: what it does, and what it counts against the quota. */
const QUALITY_LABELS: Record<string, string> = {
  fast: 'Fast',
  balanced: 'Balanced',
  best: `Best (${QUALITY_QUOTA_WEIGHT.best} model passes, counts ${QUALITY_QUOTA_WEIGHT.best}×)`,
};

export interface TryView {
  formats: string[];
  canCrop: boolean;
  canColor: boolean;
  /** The plan's quality modes (balanced, the default, among them). */
  qualities: string[];
  /** The plan's models: a choice is offered when there are several. */
  models: string[];
}

export function tryPage(ctx: PageContext, view: TryView): SafeHtml {
  return layout(
    { ...ctx, title: 'Try it', current: 'try' },
    html`<p>Each try counts against your account like any request. Needs JavaScript.</p>
<form id="try-form" class="card" action="${ctx.base}/try" method="post" enctype="multipart/form-data">
  <div class="drop" id="drop-zone">
    <label for="file">Drop an image here, or pick one</label>
    <input id="file" name="file" type="file" accept="image/jpeg,image/png,image/webp,image/avif,image/tiff,image/gif" required>
  </div>
  <fieldset class="brush" id="brush" hidden><legend>Touch up (optional)</legend>
    <p class="brush-help">Paint over the photo: <span class="swatch keep"></span>Keep marks what must stay, <span class="swatch remove"></span>Remove what must go. The strokes are sent as <code>hints</code>.</p>
    <div class="brush-tools">
      <label><input type="radio" name="brush_mode" value="keep" checked> Keep</label>
      <label><input type="radio" name="brush_mode" value="remove"> Remove</label>
      <label>Brush size <input type="range" id="brush-size" min="4" max="64" value="24"></label>
      <button type="button" id="brush-clear">Clear strokes</button>
    </div>
    <div class="brush-stage"><img id="brush-photo" alt="The image to paint on"><canvas id="brush-canvas" aria-label="Paint keep or remove strokes over the image"></canvas></div>
  </fieldset>
  <fieldset class="options"><legend>Options</legend>
    <p><label for="format">Format</label>
    <select id="format" name="format">${view.formats.map((f) => html`<option value="${f}">${f.toUpperCase()}</option>`)}</select></p>
    ${view.qualities.length > 1
      ? html`<p><label for="quality">Quality</label>
    <select id="quality" name="quality">${view.qualities.map((q) => html`<option value="${q}"${q === 'balanced' ? html` selected` : ''}>${QUALITY_LABELS[q] ?? q}</option>`)}</select></p>`
      : ''}
    ${view.models.length > 1
      ? html`<p><label for="model">Model</label>
    <select id="model" name="model">${view.models.map((m) => html`<option value="${m}">${m}</option>`)}</select></p>`
      : ''}
    ${view.canColor
      ? html`<p><label><input type="checkbox" id="use-bg" name="use_bg"> Background colour</label>
    <input type="color" id="bg-color" name="bg_color" value="#ffffff" aria-label="Background colour"></p>`
      : ''}
    ${view.canCrop ? html`<p><label><input type="checkbox" id="crop" name="crop" value="true"> Crop to the subject</label></p>` : ''}
  </fieldset>
  <p><button type="submit" id="try-submit">Remove background</button></p>
  <p id="try-status" role="status" aria-live="polite"></p>
</form>
<div class="compare" id="compare" hidden>
  <figure><figcaption>Original</figcaption><img id="original" alt="The image you picked"></figure>
  <figure><figcaption>Cutout</figcaption><div class="checker"><img id="result" alt="The image with its background removed"></div>
  <p><a id="download" class="button" download>Download</a></p></figure>
</div>`,
  );
}
