import { KeyAlreadyReplacedError, NotFoundError, TooManyKeysError } from '../../core/auth/key-records.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse, redirect } from '../http.js';
import { parseKeyForm } from '../key-form.js';
import { keysPage, keyStatus, newKeyPage, OVERLAPS, revokePage } from '../pages/keys.js';
import { holderRoute, type Route } from '../router.js';
import type { Visitor } from '../sessions.js';

/** Most keys an account may have that are not revoked or expired. */
export const MAX_ACTIVE_KEYS = 50;

/**
 * Developer settings: the account's keys; create and rotate (Post/Redirect/Get: the new key is
 * shown once, on the page the post redirects to), revoke after confirming.
 */
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

  const noActiveKey = (visitor: Visitor) => ctx.simplePage(404, 'No such key', 'This account has no such active key.', visitor);
  const alreadyReplaced = (visitor: Visitor, keyId: string, successorId: string) =>
    ctx.simplePage(
      409,
      'Key already being replaced',
      `The key ${keyId} is already being replaced by ${successorId}: it was rotated before and works only until its overlap ends. Rotate ${successorId} instead if you need another key.`,
      visitor,
    );

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
      handle: async ({ visitor, account, form }) => {
        const parsed = parseKeyForm(form);
        if ('error' in parsed) return htmlResponse(400, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), error: parsed.error, form }));
        // The ceiling is checked by the store in the same step as the write: parallel posts cannot pass it.
        const created = await keyStore.createKey({ accountId: account.id, plan: account.plan, ...parsed, maxActiveKeys: MAX_ACTIVE_KEYS }).catch((error: unknown) => {
          if (error instanceof TooManyKeysError) return error;
          throw error;
        });
        if (created instanceof TooManyKeysError) return htmlResponse(400, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), error: created.message, form }));
        ctx.reveals.hold(visitor, account.id, created);
        return redirect(`${base}/keys/new`);
      },
    }),
    holderRoute({
      method: 'GET',
      path: '/keys/new',
      handle: async ({ request, visitor, account }) => {
        const reveal = ctx.reveals.take(visitor, account.id);
        if (!reveal) return redirect(`${base}/keys?notice=key-shown`);
        return htmlResponse(200, newKeyPage(ctx.page(visitor), { ...reveal, endpointUrl: ctx.endpointUrl(request) }));
      },
    }),
    holderRoute({
      method: 'GET',
      path: '/keys/:keyId/revoke',
      handle: async ({ visitor, account, params }) => {
        const record = await ownKey(account.id, params.keyId!);
        if (!record || keyStatus(record) === 'revoked') return ctx.simplePage(404, 'No such key', 'This account has no such key, or it is revoked already.', visitor);
        return htmlResponse(200, revokePage(ctx.page(visitor), record));
      },
    }),
    holderRoute({
      method: 'POST',
      path: '/keys/:keyId/revoke',
      csrf: 'form',
      handle: async ({ visitor, account, params }) => {
        const record = await ownKey(account.id, params.keyId!);
        if (!record || keyStatus(record) !== 'active') return noActiveKey(visitor);
        await keyStore.revokeKey(record.id);
        return redirect(`${base}/keys?notice=revoked`);
      },
    }),
    holderRoute({
      method: 'POST',
      path: '/keys/:keyId/rotate',
      csrf: 'form',
      handle: async ({ visitor, account, params, form }) => {
        const record = await ownKey(account.id, params.keyId!);
        if (!record || keyStatus(record) !== 'active') return noActiveKey(visitor);
        if (record.replacedBy) return alreadyReplaced(visitor, record.id, record.replacedBy);
        const overlap = OVERLAPS.find(([value]) => value === form.get('overlap'));
        if (!overlap) return htmlResponse(400, keysPage(ctx.page(visitor), { keys: await keyRows(account.id), error: 'Pick how long the old key keeps working.' }));
        const rotated = await keyStore.rotateKey(record.id, overlap[1]).catch((error: unknown) => {
          if (error instanceof NotFoundError || error instanceof KeyAlreadyReplacedError) return error;
          throw error;
        });
        if (rotated instanceof NotFoundError) return noActiveKey(visitor);
        // Two rotations of one key at once: the store let only the first through.
        if (rotated instanceof KeyAlreadyReplacedError) return alreadyReplaced(visitor, rotated.keyId, rotated.successorId);
        ctx.reveals.hold(visitor, account.id, { key: rotated.key, record: rotated.record, rotated: rotated.old });
        return redirect(`${base}/keys/new`);
      },
    }),
  ];
}
