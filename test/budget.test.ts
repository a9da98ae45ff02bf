import { describe, expect, it } from 'vitest';
import { Budget } from '../src/core/limits/budget.js';

describe('Budget (weighted semaphore)', () => {
  it('grants up to the capacity, then in arrival order as units come back', async () => {
    const budget = new Budget(10);
    const a = budget.tryTake(6)!;
    expect(budget.tryTake(6)).toBeUndefined();
    const order: string[] = [];
    const b = budget.take(6).then((release) => (order.push('b'), release));
    const c = budget.take(1).then((release) => (order.push('c'), release));
    await new Promise((r) => setTimeout(r, 10));
    // c would fit, but b came first: no overtaking, so a large request is never starved.
    expect(order).toEqual([]);
    a();
    (await b)();
    (await c)();
    expect(order).toEqual(['b', 'c']);
    expect(budget.inUse).toBe(0);
  });

  it('lets a request larger than the capacity through when it is alone', async () => {
    const budget = new Budget(10);
    const small = budget.tryTake(2)!;
    const big = budget.take(25);
    let granted = false;
    void big.then(() => (granted = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(granted).toBe(false);
    small();
    (await big)();
    expect(budget.inUse).toBe(0);
  });

  it('ignores a second release', () => {
    const budget = new Budget(4);
    const release = budget.tryTake(3)!;
    release();
    release();
    expect(budget.inUse).toBe(0);
  });
});

describe('Budget: waiting with a signal', () => {
  it('a waiter whose signal aborts leaves the queue, and the ones behind it move up', async () => {
    const budget = new Budget(1);
    const first = budget.tryTake(1)!;
    const leaving = new AbortController();
    const gone = budget.take(1, leaving.signal);
    const next = budget.take(1);
    leaving.abort(new Error('client left'));
    await expect(gone).rejects.toThrow('client left');
    first();
    (await next)();
    expect(budget.inUse).toBe(0);
  });

  it('an already-aborted signal is refused without queueing', async () => {
    const budget = new Budget(1);
    const held = budget.tryTake(1)!;
    await expect(budget.take(1, AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
    held();
    expect(budget.inUse).toBe(0);
  });
});
