import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string }; dependencies: Record<string, string> };

/** Node APIs the runtime code uses that arrived after Node 20.0, and the release that brought each. */
const NODE_APIS: Record<string, string> = {
  'zlib.crc32 (src/core/auth/api-key.ts)': '20.15.0',
};

describe('package.json engines.node', () => {
  it.each(Object.entries(NODE_APIS))('admits no Node release without %s', (_api, since) => {
    expect(semver.subset(pkg.engines.node, `>=${since}`), `engines "${pkg.engines.node}" admits Node releases older than ${since}`).toBe(true);
  });

  it('admits no Node release that a runtime dependency refuses', () => {
    const refused: string[] = [];
    for (const name of Object.keys(pkg.dependencies)) {
      const manifest = JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8')) as { engines?: { node?: string } };
      const theirs = manifest.engines?.node;
      if (theirs && !semver.subset(pkg.engines.node, theirs)) refused.push(`${name} needs node ${theirs}`);
    }
    expect(refused).toEqual([]);
  });
});
