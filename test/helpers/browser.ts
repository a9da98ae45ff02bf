import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's chromium, headless, driven by playwright-core, with nothing that reaches beyond
 * loopback (no component updates, sync, QUIC or background networking). playwright-core gives
 * every launch a fresh temporary --user-data-dir of its own (it refuses one in `args`).
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.BGCUT_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
