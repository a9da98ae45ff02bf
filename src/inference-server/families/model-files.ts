import { stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { KnownModel } from '../../models/known-models.js';

const expandHome = (dir: string) => (dir === '~' || dir.startsWith('~/') ? path.join(os.homedir(), dir.slice(1)) : dir);

/**
 * The folders rembg keeps its models in, in the order bgcut looks: `$U2NET_HOME`, then
 * `$XDG_DATA_HOME/.u2net` (rembg's default when that is set), then `~/.u2net`. rembg itself uses
 * only the first that applies; bgcut also looks further, so a file is found wherever rembg left
 * it. (rembg: rembg/sessions/base.py, `u2net_home`.)
 */
export function modelFolders(env: NodeJS.ProcessEnv = process.env): string[] {
  const folders: string[] = [];
  if (env.U2NET_HOME) folders.push(path.resolve(expandHome(env.U2NET_HOME)));
  if (env.XDG_DATA_HOME) folders.push(path.join(path.resolve(expandHome(env.XDG_DATA_HOME)), '.u2net'));
  folders.push(path.join(os.homedir(), '.u2net'));
  return [...new Set(folders)];
}

export class ModelFileNotFoundError extends Error {
  override readonly name = 'ModelFileNotFoundError';
  constructor(
    readonly model: string,
    readonly tried: string[],
    message: string,
  ) {
    super(message);
  }
}

/**
 * The file of a known model: the first of its file names (rembg's `NAME.onnx`, then the name it
 * is published under) found in the model folders. Never downloads: a missing file is an error
 * naming every path tried and where rembg users get the file.
 */
export async function findModelFile(model: KnownModel, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const tried = modelFolders(env).flatMap((folder) => model.fileNames.map((name) => path.join(folder, name)));
  for (const file of tried) {
    const info = await stat(file).catch(() => undefined);
    if (info?.isFile()) return file;
  }
  throw new ModelFileNotFoundError(
    model.name,
    tried,
    [
      `model "${model.name}" (${model.family}) has no file here; looked for:`,
      ...tried.map((file) => `  ${file}`),
      `rembg users have it once rembg has run with "-m ${model.name}"${model.name === 'ben2' ? ' (rembg: ben_custom with its model_path)' : ''}; ` +
        `otherwise get it from ${model.download} and put it in ${modelFolders(env)[0]} as ${model.fileNames[0]}, ` +
        `or serve it from anywhere with --model-file PATH --family ${model.name}. bgcut never downloads models.`,
    ].join('\n'),
  );
}
