import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SRC = path.join(ROOT, 'src');

/** Every module specifier a file imports or re-exports, type-only imports and dynamic import() included. */
function specifiersOf(file: string): string[] {
  return ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
}

function tsFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** A relative `./x.js` specifier as the .ts file it names. */
const sourceOf = (from: string, specifier: string) => path.resolve(path.dirname(from), specifier).replace(/\.js$/, '.ts');

/**
 * What `start` reaches through the import graph that it must not: files under a forbidden folder
 * and forbidden packages, each with the chain of imports that leads there.
 */
function forbiddenReach(start: string, folders: string[], packages: RegExp): string[] {
  const found: string[] = [];
  const seen = new Set<string>();
  const visit = (file: string, chain: string[]) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of specifiersOf(file)) {
      const here = [...chain, path.relative(ROOT, file)];
      if (!specifier.startsWith('.')) {
        if (packages.test(specifier)) found.push(`${here.join(' -> ')} -> ${specifier}`);
        continue;
      }
      const target = sourceOf(file, specifier);
      if (folders.some((folder) => target.startsWith(folder + path.sep))) found.push(`${here.join(' -> ')} -> ${path.relative(ROOT, target)}`);
      else visit(target, here);
    }
  };
  visit(start, []);
  return found;
}

describe('module boundaries', () => {
  it('nothing under src/core imports src/openapi, express, fastify or onnxruntime, directly or through other files', () => {
    const files = tsFilesUnder(path.join(SRC, 'core'));
    expect(files.length).toBeGreaterThan(40);
    const violations = files.flatMap((file) =>
      forbiddenReach(file, [path.join(SRC, 'openapi'), path.join(SRC, 'adapters'), path.join(SRC, 'dashboard')], /^(express|fastify|onnxruntime(-node|-web|-common)?)(\/|$)/),
    );
    expect([...new Set(violations)]).toEqual([]);
  });

  it('the check sees an import it must refuse (the adapters reach express and src/openapi)', () => {
    const reach = forbiddenReach(path.join(SRC, 'adapters', 'express.ts'), [path.join(SRC, 'openapi')], /^express$/);
    expect(reach.some((chain) => chain.endsWith('-> express'))).toBe(true);
    expect(reach.some((chain) => chain.includes('src/openapi/'))).toBe(true);
  });

  it('nothing under src/inference-server imports src/core (or the API tiers), directly or through other files', () => {
    const files = tsFilesUnder(path.join(SRC, 'inference-server'));
    expect(files.length).toBeGreaterThan(15);
    const apiTiers = ['core', 'adapters', 'openapi', 'dashboard', 'client', 'cli'].map((folder) => path.join(SRC, folder));
    const violations = files.flatMap((file) => forbiddenReach(file, apiTiers, /^(express|fastify)(\/|$)/));
    expect([...new Set(violations)]).toEqual([]);
  });

  it('src/models is a leaf: its files import only each other, no package and neither tier', () => {
    const leaf = path.join(SRC, 'models');
    const files = tsFilesUnder(leaf);
    expect(files.length).toBeGreaterThan(2);
    const outside = files.flatMap((file) =>
      specifiersOf(file)
        .filter((specifier) => !specifier.startsWith('.') || !sourceOf(file, specifier).startsWith(leaf + path.sep))
        .map((specifier) => `${path.relative(ROOT, file)} -> ${specifier}`),
    );
    expect(outside).toEqual([]);
  });

  it('both tiers take the model facts from src/models', () => {
    const importsOf = (folder: string) => tsFilesUnder(path.join(SRC, folder)).flatMap((file) => specifiersOf(file).filter((s) => s.startsWith('.')).map((s) => sourceOf(file, s)));
    for (const tier of ['core', 'inference-server']) expect(importsOf(tier)).toContain(path.join(SRC, 'models', 'families.ts'));
  });

  it('the dashboard and the core share their stream helpers from src/util, not from each other', () => {
    const dashboardImports = tsFilesUnder(path.join(SRC, 'dashboard')).flatMap((file) => specifiersOf(file).map((s) => (s.startsWith('.') ? sourceOf(file, s) : s)));
    expect(dashboardImports.filter((target) => target.startsWith(path.join(SRC, 'core', 'pipeline')))).toEqual([]);
    expect(dashboardImports).toContain(path.join(SRC, 'util', 'settle-body.ts'));
  });
});
