import { existsSync, readFileSync } from 'node:fs';
import type { CoreResponse } from '../core/http-types.js';

/**
 * The dashboard's stylesheet, script and icon, shipped in the package (no CDN: it works offline).
 * They are plain files in src/dashboard/assets, read once at start-up.
 */
// Beside this module when run from source; from dist/src/dashboard, back in src/dashboard.
const FOLDER = [new URL('./assets/', import.meta.url), new URL('../../../src/dashboard/assets/', import.meta.url)].find((url) => existsSync(url))!;
const TYPES: Record<string, string> = { 'dashboard.css': 'text/css; charset=utf-8', 'dashboard.js': 'text/javascript; charset=utf-8', 'favicon.svg': 'image/svg+xml' };

export function loadAssets(): Map<string, CoreResponse> {
  const assets = new Map<string, CoreResponse>();
  for (const [name, type] of Object.entries(TYPES)) {
    const body = readFileSync(new URL(name, FOLDER));
    assets.set(`/assets/${name}`, {
      status: 200,
      headers: { 'content-type': type, 'content-length': String(body.length), 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' },
      body,
    });
  }
  return assets;
}
