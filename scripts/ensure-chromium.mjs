// The /docs test renders the reference page in a real browser (playwright-core drives the
// system's Chromium; Playwright's own browser download does not work offline). On a fresh
// Debian machine this installs it with apt-get when run as root; elsewhere it says how.
import { execFileSync, spawnSync } from 'node:child_process';

const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

if (!has('chromium')) {
  if (process.getuid?.() === 0 && has('apt-get')) {
    console.log('chromium not found: installing it with apt-get (the /docs test renders the page in it)');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env });
  } else {
    console.error('The tests need chromium on the PATH: install it (apt-get install chromium) and run npm test again.');
    process.exit(1);
  }
}
