// npm test needs a real redis-server binary (the tests start their own on a free port). On a
// fresh Debian machine this installs it with apt-get when run as root; elsewhere it says how.
import { execFileSync, spawnSync } from 'node:child_process';

const has = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

if (!has('redis-server')) {
  if (process.getuid?.() === 0 && has('apt-get')) {
    console.log('redis-server not found: installing it with apt-get (the tests start their own)');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    execFileSync('apt-get', ['install', '-y', '-qq', 'redis-server'], { stdio: 'inherit', env });
  } else {
    console.error('The tests need redis-server on the PATH: install it (apt-get install redis-server, brew install redis) and run npm test again.');
    process.exit(1);
  }
}
