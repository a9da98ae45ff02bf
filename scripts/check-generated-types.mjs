// CI check: the committed types in src/protocol/generated must be exactly what
// proto-loader-gen-types makes of proto/ today (same flags as the gen:proto script).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const committed = 'src/protocol/generated';
const fresh = mkdtempSync(path.join(os.tmpdir(), 'bgcut-gen-'));
const command = pkg.scripts['gen:proto'].replace(`--outDir=${committed}`, `--outDir=${fresh}`);
if (command === pkg.scripts['gen:proto']) throw new Error('gen:proto does not write to ' + committed);
execFileSync('sh', ['-c', command.replace(/^proto-loader-gen-types/, 'npx --no-install proto-loader-gen-types')], { stdio: 'inherit' });

function list(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath ?? e.path, e.name)))
    .sort();
}
const a = list(committed);
const b = list(fresh);
const stale = [...new Set([...a, ...b])].filter(
  (f) => !a.includes(f) || !b.includes(f) || readFileSync(path.join(committed, f), 'utf8') !== readFileSync(path.join(fresh, f), 'utf8'),
);
rmSync(fresh, { recursive: true, force: true });
if (stale.length > 0) {
  console.error(`generated types are stale (run npm run gen:proto): ${stale.join(', ')}`);
  process.exit(1);
}
console.log(`generated types are current (${a.length} files)`);
