// The dashboard's browser tests drive Debian's chromium through playwright-core (Playwright's own
// browser download cannot be used offline). On a fresh Debian machine this installs it with
// apt-get when run as root; elsewhere it says how. BGCUT_CHROMIUM names another binary.
import { existsSync } from 'node:fs';
import { ensureInstalled } from './apt-ensure.mjs';

const binary = process.env.BGCUT_CHROMIUM ?? '/usr/bin/chromium';
ensureInstalled({
  present: () => existsSync(binary),
  pkg: 'chromium',
  why: 'for the dashboard browser tests',
  hint: `The dashboard browser tests need chromium at ${binary}: install it (apt-get install chromium) or set BGCUT_CHROMIUM, and run npm test again.`,
});
