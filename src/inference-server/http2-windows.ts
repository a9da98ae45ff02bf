/**
 * The HTTP/2 flow-control windows of the server's connections. grpc-js's client takes a window
 * option (`grpc-node.flow_control_window`, set by the API: core/inference/grpc-channel.ts), its
 * server does not: every connection accepted opens with HTTP/2's 64 KiB stream and connection
 * windows. A 3 MiB request tensor then crosses 32 KiB at a time: the client waits for a
 * WINDOW_UPDATE per half window, and Node's HTTP/2 sends it from the server's event loop
 * (setImmediate), so the call waits on about a hundred turns of that loop, which on a host
 * with other work are the slow part of the call (bench/infer-server-cpu.ts and
 * bench/request-timeline.ts measure it: docs/inference-server.md).
 *
 * Here the server's stream window (its SETTINGS_INITIAL_WINDOW_SIZE) and each connection's window
 * are opened to `windowBytes`, as the API opens its own for the answer. grpc-js exposes neither,
 * so this reaches two of its fields (`commonServerOptions`, the options it creates its HTTP/2
 * servers with, and `http2Servers`, those servers): when a grpc-js version lacks them, nothing
 * changes but the windows and the caller is told (it logs it), and test/http2-windows.test.ts,
 * which reads the settings a plain HTTP/2 client receives, fails.
 */
import type * as grpc from '@grpc/grpc-js';
import type http2 from 'node:http2';

/** The windows opened, in bytes: a 1024x1024 8-bit tensor (3 MiB) and its framing in one go. */
export const SERVER_FLOW_CONTROL_WINDOW = 4 * 1024 * 1024;

interface GrpcServerInternals {
  commonServerOptions?: http2.ServerOptions;
  http2Servers?: Map<http2.Http2Server, unknown>;
}

/**
 * Opens the windows of the connections `server` will accept: call it before bindAsync (the
 * stream window is a setting the HTTP/2 servers are created with) and call what it returns once
 * bound (each connection's window is opened as it is accepted). Returns undefined when grpc-js's
 * internals are not as expected (the windows stay HTTP/2's defaults).
 */
export function openFlowControlWindows(server: grpc.Server, windowBytes = SERVER_FLOW_CONTROL_WINDOW): (() => boolean) | undefined {
  const internals = server as unknown as GrpcServerInternals;
  const options = internals.commonServerOptions;
  if (!options || typeof options !== 'object') return undefined;
  options.settings = { ...options.settings, initialWindowSize: windowBytes };
  return () => {
    const servers = internals.http2Servers;
    if (!(servers instanceof Map) || servers.size === 0) return false;
    for (const http2Server of servers.keys()) {
      http2Server.on('session', (session: http2.ServerHttp2Session) => {
        // Before the first DATA frame: the client sees the wider window with the server's SETTINGS.
        session.setLocalWindowSize(windowBytes);
      });
    }
    return true;
  };
}
