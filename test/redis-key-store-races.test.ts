import { describe, expect, it } from 'vitest';
import { RedisKeyStore } from '../src/core/auth/redis-key-store.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { useRedis } from './helpers/use-redis.js';

describe('RedisKeyStore: concurrent changes to one key or account are not lost', () => {
  const shared = useRedis();
  const store = () => new RedisKeyStore({ redis: shared.redis, keyPrefix: `r${Math.random().toString(36).slice(2)}`, cacheTtlMs: 0 });

  it('a revocation racing a rotation of the same key stays a revocation', async () => {
    const keys = store();
    const { key, record } = await keys.createKey({ accountId: 'acct_race', plan: 'free' });
    recordIssuedKeys([key]);
    const [rotated] = await Promise.allSettled([keys.rotateKey(record.id, 3_600_000), keys.revokeKey(record.id)]);
    if (rotated.status === 'fulfilled') recordIssuedKeys([rotated.value.key]);
    const old = (await keys.listKeys('acct_race')).find((k) => k.id === record.id)!;
    expect(old.revokedAt).not.toBeNull();
  });

  it('a suspension racing a new key for the account stays a suspension', async () => {
    const keys = store();
    const first = await keys.createKey({ accountId: 'acct_susp', plan: 'free' });
    recordIssuedKeys([first.key]);
    const [created] = await Promise.allSettled([keys.createKey({ accountId: 'acct_susp', plan: 'pro' }), keys.setAccountStatus('acct_susp', 'suspended')]);
    if (created.status === 'fulfilled') recordIssuedKeys([created.value.key]);
    const account = (await keys.listAccounts()).find((a) => a.id === 'acct_susp')!;
    expect(account).toMatchObject({ status: 'suspended', plan: 'pro' });
  });
});
