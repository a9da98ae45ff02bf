import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { RedisClient } from '../../redis.js';
import writeFileAtomic from 'write-file-atomic';

/**
 * Each account's webhook signing secret, made (and remade) by its holder in the dashboard.
 * Standard Webhooks' form: `whsec_` and 24 random bytes in base64. The API needs the secret
 * itself to sign, so it is stored as it is (as every webhook sender does); it signs only.
 */
export interface WebhookSecretStore {
  get(accountId: string): Promise<string | undefined>;
  /** Makes a new secret for the account, replacing any old one at once; resolves with it. */
  rotate(accountId: string): Promise<string>;
}

export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

export class MemoryWebhookSecretStore implements WebhookSecretStore {
  private readonly secrets = new Map<string, string>();

  async get(accountId: string): Promise<string | undefined> {
    return this.secrets.get(accountId);
  }

  async rotate(accountId: string): Promise<string> {
    const secret = newWebhookSecret();
    this.secrets.set(accountId, secret);
    return secret;
  }
}

/** Secrets in a JSON file (`{ "<accountId>": "whsec_..." }`, mode 0600), for one instance. */
export class FileWebhookSecretStore implements WebhookSecretStore {
  private writing: Promise<unknown> = Promise.resolve();

  constructor(private readonly file: string) {}

  async get(accountId: string): Promise<string | undefined> {
    const all = await this.read();
    return Object.hasOwn(all, accountId) ? all[accountId] : undefined;
  }

  rotate(accountId: string): Promise<string> {
    // One write at a time in this process: two rotations must not lose each other.
    const next = this.writing.then(async () => {
      const all = await this.read();
      const secret = newWebhookSecret();
      all[accountId] = secret;
      await writeFileAtomic(this.file, JSON.stringify(all, null, 2), { mode: 0o600 });
      return secret;
    });
    this.writing = next.catch(() => {});
    return next;
  }

  private async read(): Promise<Record<string, string>> {
    try {
      return JSON.parse(await readFile(this.file, 'utf8')) as Record<string, string>;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return Object.create(null) as Record<string, string>;
      throw error;
    }
  }
}

export class RedisWebhookSecretStore implements WebhookSecretStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix = 'bgcut',
  ) {}

  async get(accountId: string): Promise<string | undefined> {
    return (await this.redis.get(this.key(accountId))) ?? undefined;
  }

  async rotate(accountId: string): Promise<string> {
    const secret = newWebhookSecret();
    await this.redis.set(this.key(accountId), secret);
    return secret;
  }

  private key(accountId: string): string {
    return `${this.prefix}:webhook-secret:{${accountId}}`;
  }
}
