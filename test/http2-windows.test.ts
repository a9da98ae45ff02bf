import http2 from 'node:http2';
import { describe, expect, inject, it } from 'vitest';
import { SERVER_FLOW_CONTROL_WINDOW } from '../src/inference-server/http2-windows.js';

/**
 * The inference server's HTTP/2 windows, as any client sees them on the wire: a plain node:http2
 * client connects to the suite's real server (test/global-setup.ts) and reads the SETTINGS and
 * the connection WINDOW_UPDATE the server sent. With HTTP/2's defaults (64 KiB both), a 3 MiB
 * request tensor crosses 32 KiB per turn of the server's event loop (src/inference-server/http2-windows.ts).
 */
describe('inference server HTTP/2 flow-control windows', () => {
  it('opens each stream window and the connection window to 4 MiB for the request tensor', async () => {
    const [host, port] = inject('inferenceAddress').split(/:(?=\d+$)/);
    const session = http2.connect(`http://${host}:${port}`);
    try {
      const settings = await new Promise<http2.Settings>((resolve, reject) => {
        session.once('remoteSettings', resolve);
        session.once('error', reject);
      });
      expect(settings.initialWindowSize).toBe(SERVER_FLOW_CONTROL_WINDOW);
      // The server's WINDOW_UPDATE for the connection is sent as it accepts it, before it answers
      // anything: once a PING comes back, it has arrived.
      await new Promise<void>((resolve, reject) => session.ping((error) => (error ? reject(error) : resolve())));
      expect(session.state.remoteWindowSize).toBe(SERVER_FLOW_CONTROL_WINDOW);
    } finally {
      session.close();
    }
  });
});
