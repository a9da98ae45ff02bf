// Shared by the ensure-*.mjs scripts: installs a Debian package the tests need when it is
// missing, with apt-get when run as root; elsewhere says how and fails.
import { execFileSync, spawnSync } from 'node:child_process';

export const hasCommand = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

/** `present`: whether it is there already; `why`: what needs it; `hint`: how to install it elsewhere. */
export function ensureInstalled({ present, pkg, why, hint }) {
  if (present()) return;
  if (process.getuid?.() === 0 && hasCommand('apt-get')) {
    console.log(`${pkg} not found: installing it with apt-get (${why})`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    execFileSync('apt-get', ['install', '-y', '-qq', pkg], { stdio: 'inherit', env });
  } else {
    console.error(hint);
    process.exit(1);
  }
}
