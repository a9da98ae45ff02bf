// The dashboard's browser tests drive Debian's chromium through playwright-core (Playwright's own
// browser download cannot be used offline). On a fresh Debian machine this installs it with
// apt-get when run as root; elsewhere it says how. BGCUT_CHROMIUM names another binary.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const binary = process.env.BGCUT_CHROMIUM ?? '/usr/bin/chromium';
const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

if (!existsSync(binary)) {
  if (process.getuid?.() === 0 && has('apt-get')) {
    console.log('chromium not found: installing it with apt-get (for the dashboard browser tests)');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: 'inherit', env });
  } else {
    console.error(`The dashboard browser tests need chromium at ${binary}: install it (apt-get install chromium) or set BGCUT_CHROMIUM, and run npm test again.`);
    process.exit(1);
  }
}
