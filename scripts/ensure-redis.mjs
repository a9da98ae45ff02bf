// npm test needs a real redis-server binary (the tests start their own on a free port). On a
// fresh Debian machine this installs it with apt-get when run as root; elsewhere it says how.
import { ensureInstalled, hasCommand } from './apt-ensure.mjs';

ensureInstalled({
  present: () => hasCommand('redis-server'),
  pkg: 'redis-server',
  why: 'the tests start their own',
  hint: 'The tests need redis-server on the PATH: install it (apt-get install redis-server, brew install redis) and run npm test again.',
});
