import { html, type SafeHtml } from '../html.js';
import { csrfField, layout, notice, type PageContext } from './layout.js';

export function signInPage(ctx: PageContext, view: { email?: string; error?: string; next?: string; info?: string }): SafeHtml {
  return layout(
    { ...ctx, title: 'Sign in' },
    html`${view.error ? html`<p class="notice error" role="alert" id="sign-in-error">${view.error}</p>` : ''}${notice('ok', view.info)}
<form method="post" action="${ctx.base}/sign-in" class="card narrow">
  ${csrfField(ctx)}
  ${view.next ? html`<input type="hidden" name="next" value="${view.next}">` : ''}
  <p><label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="username" required maxlength="254" value="${view.email ?? ''}"${view.email ? '' : html` autofocus`}></p>
  <p><label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="256"${view.email ? html` autofocus` : ''}${view.error ? html` aria-describedby="sign-in-error"` : ''}></p>
  <p><button type="submit">Sign in</button></p>
</form>`,
  );
}
