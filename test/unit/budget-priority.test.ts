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
