import net from 'node:net';

export interface ReplyDroppingProxy {
  port: number;
  url: string;
  /** From now on Redis's replies are discarded: commands still reach Redis and run there. */
  dropReplies(): void;
  /** From now on commands are lost on the way to Redis (they never run), and so are replies: the client cannot tell this from a lost reply. */
  dropRequests(): void;
  /** Closes every client connection (the client reconnects) and passes replies again. */
  cut(): void;
  /** The next command containing `fragment` reaches Redis, then its connection is closed before the reply. */
  cutAfter(fragment: string): void;
  /** Commands seen since the proxy started, as raw RESP text. */
  readonly sent: string[];
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of Redis that can lose Redis's replies while still forwarding the commands:
 * the network failure after which a client cannot know whether its command ran.
 */
export async function startReplyDroppingProxy(redisPort: number): Promise<ReplyDroppingProxy> {
  let dropping = false;
  let droppingRequests = false;
  let cutAfter: string | undefined;
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  const sent: string[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(redisPort, '127.0.0.1');
    const pair = { client, upstream };
    pairs.add(pair);
    client.on('data', (chunk) => {
      const text = chunk.toString('latin1');
      sent.push(text);
      if (droppingRequests) return;
      upstream.write(chunk);
      if (cutAfter !== undefined && text.includes(cutAfter)) {
        cutAfter = undefined;
        dropping = true; // whatever Redis answers is lost with the connection
        upstream.end(() => end());
      }
    });
    upstream.on('data', (chunk) => {
      if (!dropping) client.write(chunk);
    });
    const end = () => {
      if (!pairs.has(pair)) return;
      dropping = false;
      droppingRequests = false;
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    sent,
    dropReplies: () => (dropping = true),
    dropRequests: () => {
      droppingRequests = true;
      dropping = true;
    },
    cutAfter: (fragment) => (cutAfter = fragment),
    cut() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      dropping = false;
      droppingRequests = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const { client, upstream } of pairs) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
