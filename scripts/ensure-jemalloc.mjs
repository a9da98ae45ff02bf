// Optional for npm test: jemalloc (libjemalloc2), which `npm start` preloads for the API with
// BGCUT_MALLOC=jemalloc (src/runtime/allocator.ts) and the benchmark's memory section measures
// when it is there. Installed with apt-get when run as root on Debian and
// missing; anywhere else, or if that fails, the tests that need it are skipped: never an error.
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { hasCommand } from './apt-ensure.mjs';

const PATHS = ['/usr/lib/x86_64-linux-gnu/libjemalloc.so.2', '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2', '/usr/lib64/libjemalloc.so.2', '/usr/lib/libjemalloc.so.2', '/usr/local/lib/libjemalloc.so.2'];

if (process.platform === 'linux' && !PATHS.some((p) => existsSync(p))) {
  if (process.getuid?.() === 0 && hasCommand('apt-get')) {
    console.log('libjemalloc2 not found: installing it with apt-get (optional: npm start preloads it for the API with BGCUT_MALLOC=jemalloc)');
    try {
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
      execFileSync('apt-get', ['install', '-y', '-qq', 'libjemalloc2'], { stdio: 'inherit', env });
    } catch {
      console.log('libjemalloc2 could not be installed: the jemalloc tests are skipped');
    }
  } else {
    console.log('libjemalloc2 not found (apt-get install libjemalloc2): the jemalloc tests are skipped');
  }
}
