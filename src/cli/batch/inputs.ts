import { stat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { glob } from 'tinyglobby';

/** Extensions taken from a folder (files named one by one are always taken). */
const IMAGE_EXTENSIONS = new Set(['.jpg', '.jpeg', '.png', '.webp', '.avif', '.tif', '.tiff', '.gif']);

export interface BatchItem {
  input: string;
  /** Where the result goes, relative to --out: the path below the folder given, or the file's name. */
  output: string;
}

/**
 * Files, folders (walked recursively, images only) and globs, each file once, each with its
 * output path; `extension` is the output format's. Files that differ only by extension keep it
 * in their output's name; two inputs that would still write one output (the same name from two
 * folders) are an error.
 */
export async function expandInputs(args: string[], extension: string): Promise<{ items: BatchItem[]; unmatched: string[] }> {
  const found = new Map<string, { input: string; relative: string }>();
  const unmatched: string[] = [];
  const add = (file: string, relative: string) => {
    const absolute = path.resolve(file);
    if (!found.has(absolute)) found.set(absolute, { input: file, relative });
  };
  for (const arg of args) {
    const info = await stat(arg).catch(() => undefined);
    if (info?.isFile()) add(arg, path.basename(arg));
    else if (info?.isDirectory()) for (const file of await walk(arg)) add(file, path.relative(arg, file));
    else {
      const matches = (await glob(arg, { onlyFiles: true, expandDirectories: false })).sort();
      if (matches.length === 0) unmatched.push(arg);
      for (const file of matches) add(file, path.basename(file));
    }
  }
  // photo.jpg -> photo.png; but photo.jpg and photo.png side by side -> photo.jpg.png and photo.png.png.
  const stem = (relative: string) => relative.replace(/\.[^./\\]*$/, '');
  const stems = new Map<string, number>();
  for (const { relative } of found.values()) stems.set(stem(relative).toLowerCase(), (stems.get(stem(relative).toLowerCase()) ?? 0) + 1);
  const items: BatchItem[] = [];
  const outputs = new Map<string, string>();
  for (const { input, relative } of found.values()) {
    const output = `${stems.get(stem(relative).toLowerCase())! > 1 ? relative : stem(relative)}.${extension}`;
    const clash = outputs.get(output.toLowerCase());
    if (clash) throw new Error(`${clash} and ${input} would both be written to ${output}: pass them in separate runs or folders`);
    outputs.set(output.toLowerCase(), input);
    items.push({ input, output });
  }
  return { items, unmatched };
}

async function walk(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && IMAGE_EXTENSIONS.has(path.extname(entry.name).toLowerCase()))
    // parentPath is Node 20.12+; `path` before it.
    .map((entry) => path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name))
    .sort();
}
