#!/usr/bin/env node
/**
 * The package as a user installs it, and the container recipe's build and start steps, proven
 * without a container runtime:
 *
 *   npm run build && node scripts/check-package.mjs [--keep] [--model-cache DIR]
 *
 * `npm pack`s this checkout, installs the tarball with production dependencies only (plus
 * express and fastify, the optional peers) into a fresh app in a temporary folder, from npm's
 * cache where it can (`--prefer-offline`), then runs scripts/package-check/use-package.mjs there
 * beside a copy of deploy/api-app/server.mjs, the API app the Dockerfile runs. The model is
 * prepared into an empty cache in that folder, as the image build does (`--model-cache` reuses
 * one instead). CI (.ci/run) runs it after npm test; it takes about a minute.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { keep: { type: 'boolean' }, 'model-cache': { type: 'string' } } });
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const work = mkdtempSync(path.join(os.tmpdir(), 'bgcut-package-'));
const app = path.join(work, 'app');
mkdirSync(app);
// onnxruntime-node's install script would download CUDA binaries (the checkout's .npmrc skips
// them; this app has no .npmrc of ours): a CPU host needs none.
const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip', BGCUT_CACHE_DIR: values['model-cache'] ?? path.join(work, 'models') };
delete env.npm_config_onnxruntime_node_install;

try {
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8' }));
  console.log(`packed ${packed.filename}: ${packed.entryCount} files, ${(packed.size / 1e6).toFixed(1)} MB`);
  writeFileSync(
    path.join(app, 'package.json'),
    JSON.stringify(
      {
        name: 'bgcut-install-check',
        private: true,
        type: 'module',
        dependencies: { bgcut: `file:../${packed.filename}`, express: manifest.devDependencies.express, fastify: manifest.devDependencies.fastify },
      },
      null,
      2,
    ),
  );
  copyFileSync(path.join(root, 'deploy/api-app/server.mjs'), path.join(app, 'server.mjs'));
  copyFileSync(path.join(root, 'scripts/package-check/use-package.mjs'), path.join(app, 'use-package.mjs'));
  const started = Date.now();
  execFileSync('npm', ['install', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app, env, stdio: 'inherit' });
  console.log(`npm install (production, from the tarball) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  execFileSync(process.execPath, ['use-package.mjs'], { cwd: app, env, stdio: 'inherit' });
} catch (error) {
  console.error(`package check failed${values.keep ? ` (kept ${work})` : ''}: ${error.message}`);
  process.exitCode = 1;
} finally {
  if (!values.keep && process.exitCode !== 1) rmSync(work, { recursive: true, force: true });
}
