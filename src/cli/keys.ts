#!/usr/bin/env node
/**
 * bgcut-keys: manage API keys, accounts and plans.
 *
 *   bgcut-keys keys create --account A --plan P [--expires 30d] [--ip 10.0.0.0/8] [--origin https://x]
 *   bgcut-keys keys list [--account A]
 *   bgcut-keys keys revoke KEY_ID
 *   bgcut-keys keys rotate KEY_ID [--overlap 24h]
 *   bgcut-keys accounts list | suspend ACCOUNT | resume ACCOUNT
 *   bgcut-keys accounts set-holder ACCOUNT --email E   (password on stdin, or BGCUT_HOLDER_PASSWORD)
 *   bgcut-keys plans list
 *
 * Store: --redis URL (or REDIS_URL) for the Redis store, else --file PATH (or BGCUT_KEYS_FILE,
 * default .data/keys.json). Plans: --plans FILE (or BGCUT_PLANS_FILE), else the built-in plans.
 * A new key is printed once, on stdout; it is stored only as a hash and cannot be shown again.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FileKeyStore } from '../core/auth/file-key-store.js';
import { InvalidAllowListEntryError, validateAllowedIps } from '../core/auth/ip-allow-list.js';
import { InvalidAllowedOriginError, validateAllowedOrigins } from '../core/auth/origin-allow-list.js';
import type { KeyAdmin, KeyRecord } from '../core/auth/key-store.js';
import { RedisKeyStore } from '../core/auth/redis-key-store.js';
import { connectRedis, redisReady } from '../core/redis.js';
import { DEFAULT_PLANS, loadPlansFile, type Plans } from '../core/limits/plans.js';
import { setAccountHolder } from '../dashboard/holders.js';
import { FileDashboardStore } from '../dashboard/stores/file-store.js';
import { RedisDashboardStore } from '../dashboard/stores/redis-store.js';

const USAGE = `usage:
  bgcut-keys keys create --account A --plan P [--expires 30d] [--ip CIDR]... [--origin URL]...
  bgcut-keys keys list [--account A]
  bgcut-keys keys revoke KEY_ID
  bgcut-keys keys rotate KEY_ID [--overlap 24h]
  bgcut-keys accounts list | suspend ACCOUNT | resume ACCOUNT
  bgcut-keys accounts set-holder ACCOUNT --email E   (dashboard sign-in; password on stdin or BGCUT_HOLDER_PASSWORD)
  bgcut-keys plans list
  bgcut-keys redis migrate   (copies keys stored by releases before Redis Cluster support; docs/redis.md)
options: --redis URL | --file PATH, --plans FILE, --json`;

class UsageError extends Error {}

/** `30d`, `12h`, `15m`, `45s` to milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+)([smhd])$/.exec(text);
  if (!match) throw new UsageError(`"${text}" is not a duration like 30d, 12h, 15m or 45s`);
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit;
}

function describeKey(k: KeyRecord): string {
  const state = k.revokedAt ? `revoked ${k.revokedAt}` : k.expiresAt ? `expires ${k.expiresAt}` : 'no expiry';
  const limits = [k.allowedIps?.length ? `ips ${k.allowedIps.join(',')}` : '', k.allowedOrigins?.length ? `origins ${k.allowedOrigins.join(',')}` : '']
    .filter(Boolean)
    .join(' ');
  return `${k.id}  account ${k.accountId}  created ${k.createdAt}  ${state}${limits ? `  ${limits}` : ''}`;
}

export async function main(argv: string[], out: (line: string) => void = console.log): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      account: { type: 'string' },
      email: { type: 'string' },
      label: { type: 'string' },
      plan: { type: 'string' },
      expires: { type: 'string' },
      overlap: { type: 'string' },
      ip: { type: 'string', multiple: true },
      origin: { type: 'string', multiple: true },
      redis: { type: 'string' },
      file: { type: 'string' },
      plans: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [group, action, target] = positionals;
  if (values.help || !group) {
    out(USAGE);
    return values.help ? 0 : 2;
  }

  const plansFile = values.plans ?? process.env.BGCUT_PLANS_FILE;
  const plans: Plans = plansFile ? loadPlansFile(plansFile) : DEFAULT_PLANS;
  if (group === 'plans' && action === 'list') {
    if (values.json) out(JSON.stringify(plans, null, 2));
    else for (const [name, plan] of Object.entries(plans)) out(`${name}  ${JSON.stringify(plan)}`);
    return 0;
  }

  const redisUrl = values.redis ?? process.env.REDIS_URL;
  // No resending after a reconnect: a key change whose reply was lost is reported, not made twice.
  const redis = redisUrl ? connectRedis(redisUrl, { lazyConnect: true, commandTimeoutMs: 10_000, onStateChange: () => {} }) : undefined;
  const store: KeyAdmin = redis
    ? new RedisKeyStore({ redis, cacheTtlMs: 0 })
    : new FileKeyStore({ file: values.file ?? process.env.BGCUT_KEYS_FILE ?? '.data/keys.json' });
  const print = (value: unknown, text: string) => out(values.json ? JSON.stringify(value, null, 2) : text);
  try {
    if (redis) await redisReady(redis);
    const need = (value: string | undefined, what: string) => {
      if (!value) throw new UsageError(`${group} ${action} needs ${what}`);
      return value;
    };
    switch (`${group} ${action}`) {
      case 'keys create': {
        const plan = need(values.plan, '--plan');
        if (!plans[plan]) throw new UsageError(`no plan "${plan}" (plans: ${Object.keys(plans).join(', ')})`);
        const { key, record } = await store.createKey({
          accountId: need(values.account, '--account'),
          plan,
          ...(values.label ? { label: values.label } : {}),
          expiresAt: values.expires ? new Date(Date.now() + parseDuration(values.expires)) : null,
          allowedIps: validateAllowedIps(values.ip),
          allowedOrigins: validateAllowedOrigins(values.origin),
        });
        print({ key, record }, `${key}\n(key id ${record.id}; shown once, store it now)`);
        return 0;
      }
      case 'keys list': {
        const keys = await store.listKeys(values.account);
        print(keys, keys.map(describeKey).join('\n') || '(no keys)');
        return 0;
      }
      case 'keys revoke': {
        const record = await store.revokeKey(need(target, 'a key id'));
        print(record, `revoked ${describeKey(record)}`);
        return 0;
      }
      case 'keys rotate': {
        const overlap = parseDuration(values.overlap ?? '24h');
        const { key, record, old } = await store.rotateKey(need(target, 'a key id'), overlap);
        print({ key, record, old }, `${key}\n(new key id ${record.id}; ${old.id} keeps working until ${old.expiresAt})`);
        return 0;
      }
      case 'accounts list': {
        const accounts = await store.listAccounts();
        print(accounts, accounts.map((a) => `${a.id}  plan ${a.plan}  ${a.status}`).join('\n') || '(no accounts)');
        return 0;
      }
      case 'accounts suspend':
      case 'accounts resume': {
        const account = await store.setAccountStatus(need(target, 'an account id'), action === 'suspend' ? 'suspended' : 'active');
        print(account, `${account.id}  ${account.status}`);
        return 0;
      }
      case 'accounts set-holder': {
        const accountId = need(target, 'an account id');
        const email = need(values.email, '--email');
        const password = process.env.BGCUT_HOLDER_PASSWORD ?? (await readPassword());
        const dashboardStore = redis ? new RedisDashboardStore({ redis }) : new FileDashboardStore(store as FileKeyStore);
        try {
          await setAccountHolder(dashboardStore, accountId, email, password);
        } catch (error) {
          if (error instanceof RangeError) throw new UsageError(error.message);
          throw error;
        }
        print({ accountId, email: email.trim().toLowerCase() }, `${email.trim().toLowerCase()} can now sign in to the dashboard for ${accountId}`);
        return 0;
      }
      case 'redis migrate': {
        if (!redis) throw new UsageError('redis migrate needs --redis URL (or REDIS_URL)');
        const copied = await (store as RedisKeyStore).migrateLegacyLayout();
        const holders = await new RedisDashboardStore({ redis }).migrateLegacyHolders();
        print({ ...copied, holders }, `copied ${copied.keys} keys, ${copied.accounts} accounts and ${holders} dashboard holders into the per-account layout`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${positionals.join(' ')}"\n${USAGE}`);
    }
  } catch (error) {
    console.error(`bgcut-keys: ${(error as Error).message}`);
    return error instanceof UsageError || error instanceof InvalidAllowListEntryError || error instanceof InvalidAllowedOriginError ? 2 : 1;
  } finally {
    redis?.disconnect();
  }
}

/** The first line of stdin: the password, piped in so it stays out of the shell history and `ps`. */
async function readPassword(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('password: ');
  let text = '';
  for await (const chunk of process.stdin) {
    text += String(chunk);
    if (text.includes('\n') || text.length > 1024) break;
  }
  return text.split(/\r?\n/)[0] ?? '';
}

// Run as a program (also through node_modules/.bin's link), not when imported by tests.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
