import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryDeliveryLog, MemoryWebhookSecretStore } from '../src/core/index.js';
import { startDashboardApp, HOLDER, OTHER, type DashboardApp } from './helpers/dashboard-app.js';
import { DirectClient } from './helpers/dashboard-direct.js';

describe('dashboard: webhooks page', () => {
  const secrets = new MemoryWebhookSecretStore();
  const deliveries = new MemoryDeliveryLog();
  let app: DashboardApp;
  beforeAll(async () => {
    app = await startDashboardApp({ dashboard: { webhooks: { secrets, deliveries } } });
  });
  afterAll(async () => app?.close());

  it('a holder makes a signing secret (shown once, usable by standardwebhooks), replaces it, and sees only their own deliveries', async () => {
    const browser = new DirectClient(app.dashboard);
    expect((await browser.signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    const before = await browser.request('GET', '/dashboard/webhooks');
    expect(before.status).toBe(200);
    expect(before.text).toContain('No signing secret yet');
    expect(before.text).toContain('href="/dashboard/webhooks"');

    const made = await browser.request('POST', '/dashboard/webhooks/secret', { _csrf: DirectClient.token(before.text) });
    expect(made.status).toBe(200);
    const shown = /id="secret" readonly value="(whsec_[^"]+)"/.exec(made.text)![1]!;
    expect(shown).toBe(await secrets.get(HOLDER.accountId));
    const signed = new Webhook(shown).sign('msg_1', new Date(), '{}');
    expect(new Webhook(shown).verify('{}', { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': signed })).toEqual({});
    const later = await browser.request('GET', '/dashboard/webhooks');
    expect(later.text).not.toContain(shown);
    expect(later.text).toContain('A signing secret is set');

    const replaced = await browser.request('POST', '/dashboard/webhooks/secret', { _csrf: DirectClient.token(later.text) });
    expect(await secrets.get(HOLDER.accountId)).not.toBe(shown);
    expect(replaced.text).toContain(String(await secrets.get(HOLDER.accountId)));

    const delivery = (accountId: string, jobId: string) => ({
      id: `msg_${jobId}_job.completed`, accountId, jobId, type: 'job.completed', url: 'https://hooks.example/in', state: 'delivered' as const,
      createdAt: new Date().toISOString(), attempts: [{ at: new Date().toISOString(), status: 503, ms: 5 }, { at: new Date().toISOString(), status: 204, ms: 4 }],
    });
    await deliveries.claim(delivery(HOLDER.accountId, 'job-of-ada'));
    await deliveries.claim(delivery(OTHER.accountId, 'job-of-bob'));
    const listed = await browser.request('GET', '/dashboard/webhooks');
    expect(listed.text).toContain('job-of-ada');
    expect(listed.text).toContain('503 → 204');
    expect(listed.text).not.toContain('job-of-bob');
  });

  it('the secret form needs the anti-forgery token', async () => {
    const browser = new DirectClient(app.dashboard);
    await browser.signIn(OTHER.email, OTHER.password);
    const refused = await browser.request('POST', '/dashboard/webhooks/secret', { _csrf: 'forged' });
    expect(refused.status).toBe(403);
    expect(await secrets.get(OTHER.accountId)).toBeUndefined();
  });
});
