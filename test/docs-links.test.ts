import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const pages = ['README.md', ...readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  for (const line of markdown.split('\n')) {
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (heading) found.add(heading[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-'));
  }
  return found;
}

// The README is the front door and the depth lives in docs/: a link that points nowhere is a
// reader lost, so every relative link (and its #anchor) must resolve.
describe('documentation links', () => {
  it.each(pages)('%s: every relative link and anchor resolves', (page) => {
    const text = readFileSync(path.join(root, page), 'utf8').replace(/```[\s\S]*?```/g, '');
    const broken: string[] = [];
    for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/i.test(target)) continue;
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file ? path.resolve(path.dirname(path.join(root, page)), file) : path.join(root, page);
      if (!existsSync(resolved)) {
        broken.push(`${target} (no file)`);
        continue;
      }
      if (anchor && resolved.endsWith('.md') && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) broken.push(`${target} (no heading)`);
    }
    expect(broken).toEqual([]);
  });

  it('README stays the front door (at most ~300 lines)', () => {
    expect(readFileSync(path.join(root, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(300);
  });
});
