import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Budget } from '../../src/core/limits/budget.js';

describe('Budget: background work (jobs) waits behind synchronous requests', () => {
  it('a normal waiter that came after a low-priority one is granted first; the low one gets the next free unit', async () => {
    const slots = new Budget(1);
    const first = slots.tryTake(1)!;
    const order: string[] = [];
    const low = slots.lowPriority().take(1).then((release) => (order.push('job'), release));
    const normal = slots.take(1).then((release) => (order.push('request'), release));
    first();
    (await normal)();
    (await low)();
    expect(order).toEqual(['request', 'job']);
  });

  it('a free unit goes to a normal request at once even while jobs wait; a job never jumps a waiting request', async () => {
    const slots = new Budget(2);
    const held = slots.tryTake(2)!;
    const job = slots.lowPriority().take(1);
    held();
    expect(slots.inUse).toBe(1); // the job got one of the two
    expect(slots.tryTake(1)).toBeTypeOf('function'); // a request still gets the other at once
    (await job)();
    expect(slots.tryTake(1, true)).toBeTypeOf('function');
    expect(slots.tryTake(1, true)).toBeUndefined();
  });
});

describe('Budget: background work among itself', () => {
  it('jobs are granted in their arrival order, behind every request', async () => {
    const slots = new Budget(1);
    const held = slots.tryTake(1)!;
    const order: string[] = [];
    // Each waiter, once granted, notes its name and gives the one unit back for the next.
    const wait = (name: string, taking: Promise<() => void>) => taking.then((release) => (order.push(name), release()));
    const all = [wait('job 1', slots.lowPriority().take(1)), wait('request', slots.take(1)), wait('job 2', slots.lowPriority().take(1)), wait('job 3', slots.lowPriority().take(1))];
    held();
    await Promise.all(all);
    expect(order).toEqual(['request', 'job 1', 'job 2', 'job 3']);
  });

  it('a waiter that leaves on abort stops listening to its signal', async () => {
    const slots = new Budget(1);
    const held = slots.tryTake(1)!;
    const controller = new AbortController();
    const leaving = slots.take(1, controller.signal);
    controller.abort(new Error('left'));
    await expect(leaving).rejects.toThrow('left');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    held();
  });
});
