import { describe, expect, it } from 'vitest';
import { categoryOf, turns } from '../../bench/perf-turns.js';

/** A perf event of the recorded thread at `ms`. */
const at = (ms: number, event: string, stack: string[] = []) => ({ ms, event, stack });
const exit = (ms: number) => at(ms, 'syscalls:sys_exit_epoll_pwait');
const enter = (ms: number) => at(ms, 'syscalls:sys_enter_epoll_pwait');
const cpu = (ms: number, ...stack: string[]) => at(ms, 'cpu-clock', stack);

describe('perf-turns: event-loop turns by the CPU they took', () => {
  it('counts a turn from the return from epoll to the next call into it, its CPU as its cpu-clock samples x their period, and none of the samples taken while the thread waited in epoll', () => {
    const result = turns(
      [cpu(0, 'epoll_pwait'), exit(10), cpu(11, 'v8::internal::ValueDeserializer::ReadObject'), cpu(11.5, 'v8::internal::ValueDeserializer::ReadObject'), cpu(12, 'v8::internal::ScavengerCollector::CollectGarbage'), enter(40), cpu(41, 'epoll_pwait'), exit(50), enter(51)],
      0.5,
    );
    expect(result.map((t) => [t.startMs, t.wallMs, t.cpuMs])).toEqual([
      [10, 30, 1.5],
      [50, 1, 0],
    ]);
    expect(result[0]!.ran).toEqual([
      ['postMessage: deserialize', 1],
      ['GC scavenge', 0.5],
    ]);
  });

  it('merges two turns when a call into epoll was lost, rather than dropping the first one', () => {
    const result = turns([exit(0), cpu(1, 'a'), exit(5), cpu(6, 'b'), enter(9)], 0.5);
    expect(result.map((t) => [t.startMs, t.wallMs, t.cpuMs])).toEqual([[0, 9, 1]]);
  });

  it('ends a turn at a sample taken inside epoll_pwait, when the call\'s own event was lost', () => {
    const result = turns([exit(0), cpu(1, 'a'), cpu(2, 'schedule', 'epoll_pwait', 'uv__io_poll'), cpu(3, 'epoll_pwait'), exit(20), cpu(21, 'b'), enter(22)], 0.5);
    expect(result.map((t) => [t.startMs, t.wallMs, t.cpuMs])).toEqual([
      [0, 2, 0.5],
      [20, 2, 0.5],
    ]);
  });

  it('names what a sample ran by its stack', () => {
    expect(categoryOf(['__memmove_avx512_unaligned_erms', 'v8::internal::ValueDeserializer::ReadObjectInternal', 'node::worker::Message::Deserialize'])).toBe('postMessage: deserialize');
    expect(categoryOf(['v8::internal::RememberedSetUpdatingItem::Process', 'v8::internal::MarkCompactCollector::UpdatePointersAfterEvacuation'])).toBe('GC mark-compact');
    expect(categoryOf(['LazyCompile:~feed /x/streamsearch/lib/sbmh.js:116'])).toBe('js: ~feed /x/streamsearch/lib/sbmh.js:116');
  });
});
