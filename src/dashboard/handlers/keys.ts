import { NotFoundError, TooManyKeysError } from '../../core/auth/key-records.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse, redirect } from '../http.js';
import { parseKeyForm } from '../key-form.js';
import { keysPage, keyStatus, newKeyPage, OVERLAPS, revokePage } from '../pages/keys.js';
import { holderRoute, type Route } from '../router.js';

/** Most keys an account may have that are not revoked or expired. */
export const MAX_ACTIVE_KEYS = 50;

/** Developer settings: the account's keys; create (shown once), rotate with an overlap, revoke after confirming. */
export function keysRoutes(ctx: DashboardContext): Route[] {
  const { base, config } = ctx;
  const { keyStore } = config;

  async function keyRows(accountId: string) {
    const records = (await keyStore.listKeys(accountId)).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    const used = await ctx.activity.lastUsed(records.map((r) => r.id));
    return records.map((record) => ({ record, lastUsed: used[record.id] }));
  }

  async function ownKey(accountId: string, keyId: string) {
    return (await keyStore.listKeys(accountId)).find((k) => k.id === keyId);
  }

  const noActiveKey = () => ctx.simplePage(404, 'No such key', 'This account has no such active key.');

  return [
    holderRoute({ method: 'GET', path: '/', handle: async () => redirect(`${base}/keys`) }),
    holderRoute({
      method: 'GET',
      path: '/keys',
      handle: async ({ visitor, account, url }) => {
        const info = ctx.notice(url);
        return htmlResponse(200, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), ...(info ? { info } : {}) }));
      },
    }),
    holderRoute({
      method: 'POST',
      path: '/keys',
      csrf: 'form',
      handle: async ({ request, visitor, account, form }) => {
        const parsed = parseKeyForm(form);
        if ('error' in parsed) return htmlResponse(400, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), error: parsed.error, form }));
        // The ceiling is checked by the store in the same step as the write: parallel posts cannot pass it.
        const created = await keyStore.createKey({ accountId: account.id, plan: account.plan, ...parsed, maxActiveKeys: MAX_ACTIVE_KEYS }).catch((error: unknown) => {
          if (error instanceof TooManyKeysError) return error;
          throw error;
        });
        if (created instanceof TooManyKeysError) return htmlResponse(400, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), error: created.message, form }));
        return htmlResponse(201, newKeyPage(ctx.page(visitor), { ...created, endpointUrl: ctx.endpointUrl(request) }));
      },
    }),
    holderRoute({
      method: 'GET',
      path: '/keys/:keyId/revoke',
      handle: async ({ visitor, account, params }) => {
        const record = await ownKey(account.id, params.keyId!);
        if (!record || keyStatus(record) === 'revoked') return ctx.simplePage(404, 'No such key', 'This account has no such key, or it is revoked already.');
        return htmlResponse(200, revokePage(ctx.page(visitor), record));
      },
    }),
    holderRoute({
      method: 'POST',
      path: '/keys/:keyId/revoke',
      csrf: 'form',
      handle: async ({ account, params }) => {
        const record = await ownKey(account.id, params.keyId!);
        if (!record || keyStatus(record) !== 'active') return noActiveKey();
        await keyStore.revokeKey(record.id);
        return redirect(`${base}/keys?notice=revoked`);
      },
    }),
    holderRoute({
      method: 'POST',
      path: '/keys/:keyId/rotate',
      csrf: 'form',
      handle: async ({ request, visitor, account, params, form }) => {
        const record = await ownKey(account.id, params.keyId!);
        if (!record || keyStatus(record) !== 'active') return noActiveKey();
        const overlap = OVERLAPS.find(([value]) => value === form.get('overlap'));
        if (!overlap) return htmlResponse(400, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), error: 'Pick how long the old key keeps working.' }));
        const rotated = await keyStore.rotateKey(record.id, overlap[1]).catch((error: unknown) => {
          if (error instanceof NotFoundError) return undefined;
          throw error;
        });
        if (!rotated) return noActiveKey();
        return htmlResponse(201, newKeyPage(ctx.page(visitor), { key: rotated.key, record: rotated.record, rotated: rotated.old, endpointUrl: ctx.endpointUrl(request) }));
      },
    }),
  ];
}
