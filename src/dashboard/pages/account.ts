import { html, type SafeHtml } from '../html.js';
import { MIN_PASSWORD_LENGTH } from '../passwords.js';
import { csrfField, layout, notice, type PageContext } from './layout.js';

export function accountPage(ctx: PageContext, view: { email?: string; error?: string; info?: string }): SafeHtml {
  return layout(
    { ...ctx, title: 'Account', current: 'account' },
    html`${notice('error', view.error)}${notice('ok', view.info)}
<section class="card narrow" aria-labelledby="password-heading">
<h2 id="password-heading">Change password</h2>
${view.email ? html`<p>Signed in as <strong>${view.email}</strong>.</p>` : ''}
<form method="post" action="${ctx.base}/account/password">
  ${csrfField(ctx)}
  <input type="text" name="username" autocomplete="username" value="${view.email ?? ''}" hidden>
  <p><label for="current">Current password</label>
  <input id="current" name="current" type="password" autocomplete="current-password" required maxlength="256"></p>
  <p><label for="new">New password</label>
  <input id="new" name="new" type="password" autocomplete="new-password" required minlength="${MIN_PASSWORD_LENGTH}" maxlength="256" aria-describedby="new-hint">
  <span id="new-hint" class="hint">At least ${MIN_PASSWORD_LENGTH} characters. Other browsers signed in to this account are signed out.</span></p>
  <p><label for="confirm">New password again</label>
  <input id="confirm" name="confirm" type="password" autocomplete="new-password" required maxlength="256"></p>
  <p><button type="submit">Change password</button></p>
</form>
</section>`,
  );
}
