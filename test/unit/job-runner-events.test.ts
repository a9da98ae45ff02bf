import { describe, expect, it } from 'vitest';
import { newJob, type JobRecord } from '../../src/core/jobs/job.js';
import { MemoryJobStore } from '../../src/core/jobs/job-store.js';
import { runJob, type RunnerDeps } from '../../src/core/jobs/runner.js';

/** A job taken over from an instance that died may have missed its events: a run sends them again (they are idempotent by webhook-id). */
describe('the runner re-sends the events a dead instance may have missed', () => {
  const spec = () => ({ id: 'j1', accountId: 'a', plan: 'free', fields: {}, sources: [{ kind: 'url' as const, url: 'https://example.test/a.png' }], createdAt: new Date(0).toISOString(), retentionMs: 1000 });
  const deps = (jobs: MemoryJobStore, events: string[]): RunnerDeps => ({
    jobs,
    results: { put: async () => {}, get: async () => undefined, delete: async () => {}, expireAt: async () => {}, sweep: async () => {} } as unknown as RunnerDeps['results'],
    cutout: async () => {
      throw new Error('no image runs here');
    },
    imageUrl: {} as RunnerDeps['imageUrl'],
    maxUploadBytes: 1,
    onEvent: async (type) => void events.push(type),
    onInternalError: (error) => {
      throw error;
    },
  });

  it('a job found running (its images all done) sends job.started again, then ends and sends job.completed', async () => {
    const jobs = new MemoryJobStore();
    const job: JobRecord = { ...newJob(spec()), state: 'running', images: [{ state: 'done' }] };
    await jobs.create(job);
    const events: string[] = [];
    await runJob('j1', new AbortController().signal, deps(jobs, events));
    expect(events).toEqual(['job.started', 'job.completed']);
    expect((await jobs.get('j1'))?.state).toBe('succeeded');
  });

  it('a job found ended (its instance died before the queue heard) sends job.completed again and runs nothing', async () => {
    const jobs = new MemoryJobStore();
    await jobs.create({ ...newJob(spec()), state: 'succeeded', images: [{ state: 'done' }] });
    const events: string[] = [];
    await runJob('j1', new AbortController().signal, deps(jobs, events));
    expect(events).toEqual(['job.completed']);
  });
});
