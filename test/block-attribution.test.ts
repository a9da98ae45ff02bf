import { describe, expect, it } from 'vitest';
import { longestBlocks, type CpuProfile } from '../bench/block-attribution.js';

const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0 });
/**
 * A main thread that ran `work` for three 1 ms samples, went idle, then collected garbage for two
 * samples with a 50 ms wait for a core between them (one long delta), and went idle again.
 */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 3, 4] },
    { id: 2, callFrame: frame('(idle)') },
    { id: 3, callFrame: frame('work', 'file:///app/work.js') },
    { id: 4, callFrame: frame('(garbage collector)') },
  ],
  startTime: 0,
  endTime: 57_000,
  samples: [2, 3, 3, 3, 2, 4, 4, 2],
  timeDeltas: [0, 1000, 1000, 1000, 1000, 1000, 50_000, 1000],
};

describe('block attribution (bench)', () => {
  it('splits the main thread at idle samples and ranks blocks by the time they ran, not their wall length', () => {
    const blocks = longestBlocks(profile, 5, 1);
    expect(blocks.map((b) => [b.ms, b.samples, b.sampledMs])).toEqual([
      [3, 3, 3],
      [51, 2, 2],
    ]);
    expect(blocks[0]!.self).toEqual([{ frame: 'work work.js:1', ms: 3 }]);
    expect(blocks[0]!.stack).toEqual(['work work.js:1']);
  });

  it("charges a block's functions their samples, not the waits inside their deltas", () => {
    const gc = longestBlocks(profile, 5, 1)[1]!;
    expect(gc.self).toEqual([{ frame: '(garbage collector)', ms: 2 }]);
  });

  it('leaves out blocks that ran less than the floor', () => {
    expect(longestBlocks(profile, 5, 2.5).map((b) => b.samples)).toEqual([3]);
  });
});
