import { describe, expect, it } from 'vitest';
import { getEventListeners } from 'node:events';
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

describe('Budget: the queue, read back', () => {
  it('take() of units that fit is granted at once, without queueing', async () => {
    const budget = new Budget(5);
    const taking = budget.take(2);
    // Decided synchronously: nothing waits, the units are already held.
    expect(budget.queued).toBe(0);
    expect(budget.inUse).toBe(2);
    (await taking)();
    expect(budget.inUse).toBe(0);
  });

  it('queued counts the waiters, and drops to 0 as they are granted or leave', async () => {
    const budget = new Budget(2);
    const held = budget.tryTake(2)!;
    const leaving = new AbortController();
    const a = budget.take(1);
    const b = budget.take(1, leaving.signal);
    const c = budget.lowPriority().take(1);
    expect(budget.queued).toBe(3);
    leaving.abort(new Error('left'));
    await expect(b).rejects.toThrow('left');
    expect(budget.queued).toBe(2);
    held();
    expect(budget.queued).toBe(0);
    (await a)();
    (await c)();
    expect(budget.inUse).toBe(0);
  });

  it('a normal tryTake is not held back by waiting background work; a background one is', () => {
    const budget = new Budget(3);
    const held = budget.tryTake(2)!;
    void budget.lowPriority().take(2); // does not fit: queued
    expect(budget.queued).toBe(1);
    expect(budget.tryTake(1, true)).toBeUndefined(); // another job waits behind it
    const request = budget.tryTake(1); // a request goes past jobs
    expect(request).toBeTypeOf('function');
    expect(budget.inUse).toBe(3);
    request!();
    held();
  });

  it('a granted waiter stops listening to its signal (a long-lived signal collects no listeners)', async () => {
    const budget = new Budget(1);
    const held = budget.tryTake(1)!;
    const controller = new AbortController();
    const waiting = budget.take(1, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    held();
    const release = await waiting;
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    controller.abort(new Error('too late'));
    expect(budget.inUse).toBe(1); // the abort after the grant takes nothing back
    release();
    expect(budget.inUse).toBe(0);
  });
});
