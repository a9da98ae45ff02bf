/** What the handler needs to know about the owner of a key. */
export interface Account {
  id: string;
  plan: string;
  status: 'active' | 'suspended';
}

export interface KeyRecord {
  /** Short id derived from the hash (see keyIdOf): the only form of a key that may be logged. */
  id: string;
  /** SHA-256 hex of the key. The key itself is never stored. */
  hash: string;
  accountId: string;
  /** The account holder's name for the key (shown in the dashboard); absent for none. */
  label?: string;
  createdAt: string;
  /** ISO time after which the key no longer works; null for never. */
  expiresAt: string | null;
  /** ISO time the key was revoked; null while it is valid. */
  revokedAt: string | null;
  /** Once the key is rotated: the id of the key that replaces it (it works only until its overlap ends). */
  replacedBy?: string;
  /** Client addresses or CIDR ranges the key may be used from; absent or empty for anywhere. */
  allowedIps?: string[];
  /** Browser origins (`https://shop.example`) the key may be used from; absent or empty for any. */
  allowedOrigins?: string[];
}

export interface KeyLookup {
  key: KeyRecord;
  account: Account;
}

/**
 * Where the handler looks keys up. The embedded default is FileKeyStore, RedisKeyStore serves
 * many instances; an app with its own database passes `resolveKey` to the handler instead.
 */
export interface KeyStore {
  /** The key with this SHA-256 hash and its account, or undefined when there is none. */
  findByHash(hash: string): Promise<KeyLookup | undefined>;
  close?(): Promise<void>;
}

export interface CreateKeyOptions {
  accountId: string;
  /** The account is created with this plan if it does not exist, or moved to it if it does. */
  plan: string;
  /** A name for the key, up to 100 characters. */
  label?: string;
  expiresAt?: Date | null;
  allowedIps?: string[];
  allowedOrigins?: string[];
  /** Revoke the account's other keys in the same write (used for the demo key). */
  revokeOthers?: boolean;
  /**
   * Refuse (TooManyKeysError) when the account already has this many active keys (not revoked,
   * not expired), checked in the same step as the write, so parallel creations cannot pass it.
   * Not checked with `revokeOthers`. Default: no ceiling.
   */
  maxActiveKeys?: number;
}

/** The write side of a key store, used by the `bgcut-keys` CLI and by apps that issue keys. */
export interface KeyAdmin extends KeyStore {
  /** Creates a key and returns it in full: the only time it is ever visible. */
  createKey(options: CreateKeyOptions): Promise<{ key: string; record: KeyRecord }>;
  listKeys(accountId?: string): Promise<KeyRecord[]>;
  revokeKey(keyId: string): Promise<KeyRecord>;
  /**
   * Issues a new key for the same account and lets the old one work until `overlapMs` from
   * now, so clients can switch without downtime. The new key keeps the old one's label,
   * restrictions and planned expiry (never the overlap's end); the old one records it as
   * `replacedBy`. A key already replaced is refused (KeyAlreadyReplacedError).
   */
  rotateKey(keyId: string, overlapMs: number): Promise<{ key: string; record: KeyRecord; old: KeyRecord }>;
  listAccounts(): Promise<Account[]>;
  setAccountStatus(accountId: string, status: Account['status']): Promise<Account>;
}
