import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import writeFileAtomic from 'write-file-atomic';

const LOCK_STALE_MS = 10_000;
const LOCK_WAIT_MS = 30_000;

/**
 * One JSON document in a file, shared by processes: reads parse the file as it is now; updates
 * are read-modify-write under a proper-lockfile lock and replace the file with write-file-atomic
 * (temp file, fsync, rename), the same discipline as FileKeyStore's, so no reader sees half a
 * file and no two writers interleave.
 */
export class JsonFile<T> {
  readonly file: string;

  constructor(
    file: string,
    private readonly empty: () => T,
  ) {
    this.file = path.resolve(file);
  }

  /** The document, or undefined when the file does not exist yet. */
  async read(): Promise<T | undefined> {
    const text = await readFile(this.file, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  /** Read-modify-write under the lock; `seed` gives the first content when the file does not exist. */
  async update(change: (data: T) => void | Promise<void>, seed: () => Promise<T | undefined> = async () => undefined): Promise<void> {
    await mkdir(path.dirname(this.file), { recursive: true });
    let compromised: Error | undefined;
    const release = await lockfile.lock(this.file, {
      lockfilePath: `${this.file}.lock`,
      realpath: false, // the file need not exist yet
      stale: LOCK_STALE_MS,
      retries: { retries: Math.ceil(LOCK_WAIT_MS / 100), minTimeout: 10, maxTimeout: 100, randomize: true },
      onCompromised: (error) => (compromised = error),
    });
    try {
      const data = (await this.read()) ?? (await seed()) ?? this.empty();
      await change(data);
      if (compromised) throw new Error(`lost the lock on ${this.file}; the change was not written`, { cause: compromised });
      await writeFileAtomic(this.file, `${JSON.stringify(data)}\n`, { mode: 0o600, fsync: true });
    } finally {
      await release().catch(() => {});
    }
  }
}
