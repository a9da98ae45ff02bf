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
  createdAt: string;
  /** ISO time after which the key no longer works; null for never. */
  expiresAt: string | null;
  /** ISO time the key was revoked; null while it is valid. */
  revokedAt: string | null;
}

export interface KeyLookup {
  key: KeyRecord;
  account: Account;
}

/**
 * Where keys and accounts live. The embedded default is FileKeyStore; a store backed by Redis or
 * an app's own database implements the same interface.
 */
export interface KeyStore {
  /** The key with this SHA-256 hash and its account, or undefined when there is none. */
  findByHash(hash: string): Promise<KeyLookup | undefined>;
  close?(): Promise<void>;
}
