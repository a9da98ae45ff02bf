import { PasswordHasher, passwordProblem } from './passwords.js';
import type { DashboardStore } from './store.js';

/** Lets `email` sign in to `accountId` with `password` (the CLI and npm start use it). */
export async function setAccountHolder(store: DashboardStore, accountId: string, email: string, password: string, hasher = new PasswordHasher()): Promise<void> {
  const normalized = email.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+$/.test(normalized) || normalized.length > 254) throw new RangeError(`"${email}" is not an email address`);
  const problem = passwordProblem(password);
  if (problem) throw new RangeError(`password: ${problem}`);
  if (!(await store.findAccount(accountId))) throw new RangeError(`no account ${accountId}: create a key for it first`);
  await store.setHolder({ email: normalized, accountId, passwordHash: await hasher.hash(password), updatedAt: new Date().toISOString() });
}
