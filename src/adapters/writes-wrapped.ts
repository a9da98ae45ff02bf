import type { ServerResponse } from 'node:http';

/**
 * Whether something replaced a response's own write or end (they are the prototype's otherwise):
 * a host middleware (compression, a cache) that may hold the body past the response's `finish`,
 * so an adapter leaves the body's memory to the collector (CoreResponse.release uncalled).
 */
export function writesWrapped(res: ServerResponse): boolean {
  return Object.hasOwn(res, 'write') || Object.hasOwn(res, 'end') || Object.hasOwn(res, 'writev');
}
