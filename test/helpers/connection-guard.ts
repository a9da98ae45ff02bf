import net from 'node:net';

/** True for 127.0.0.0/8, ::1 and their IPv4-mapped form: the only places tests may connect to. */
export function isLoopbackAddress(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').replace(/^::ffff:/i, '');
  return (net.isIPv4(bare) && bare.startsWith('127.')) || bare === '::1';
}

/**
 * Makes every outgoing TCP connection of this process to anything but a loopback address (or to
 * a host name, which would need a lookup) throw before a packet is sent, and records it: a test
 * asserts `attempts` is empty. Unix sockets pass.
 */
export function guardConnections(): { attempts: string[]; restore(): void } {
  const attempts: string[] = [];
  const original = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    const options = (typeof first === 'object' && first !== null ? first : { port: first, host: typeof args[1] === 'string' ? args[1] : undefined }) as {
      host?: string;
      port?: number;
      path?: string;
    };
    if (!options.path) {
      const host = options.host ?? 'localhost';
      if (!isLoopbackAddress(host)) {
        attempts.push(`${host}:${options.port}`);
        throw new Error(`connection guard: a test tried to connect to ${host}:${options.port}, outside the loopback range`);
      }
    }
    return (original as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof net.Socket.prototype.connect;
  return {
    attempts,
    restore: () => {
      net.Socket.prototype.connect = original;
    },
  };
}
