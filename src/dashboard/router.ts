import type { Account } from '../core/auth/key-store.js';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import type { Visitor } from './sessions.js';

/** What a route's handler gets: the request, and what the router has found out and checked. */
export interface RouteInput {
  request: CoreRequest;
  url: URL;
  /** The `:name` parts of the route's path. */
  params: Record<string, string>;
  visitor: Visitor;
  /** The signed-in account: always there on a `holder` route. */
  account: Account;
  /** A POST's form (read and checked for the anti-forgery token); empty otherwise. */
  form: URLSearchParams;
}

export interface Route {
  method: 'GET' | 'POST';
  /** Below the dashboard's base path; `:name` matches one key-id-like segment. */
  path: string;
  /** `anyone` (the sign-in pages) or `holder` (a signed-in account holder). */
  access: 'anyone' | 'holder';
  /** Only with the embedded sign-in (not when the host app signs people in). */
  embeddedOnly?: boolean;
  /**
   * How a POST shows it came from this dashboard, beside its Origin: `form`, an `_csrf` field
   * (the router reads the form); `header`, an `x-csrf-token` header (the body is left to the
   * handler, and refusals are problem+json for the page's script).
   */
  csrf?: 'form' | 'header';
  /** A suspended account may still do it (every GET may; POSTs only when this says so). */
  whileSuspended?: boolean;
  handle(input: Omit<RouteInput, 'account'> & { account: Account | undefined }): Promise<CoreResponse>;
}

/** A route whose handler only runs for a signed-in holder (the router sends anyone else to sign in first). */
export function holderRoute(route: Omit<Route, 'access' | 'handle'> & { handle(input: RouteInput): Promise<CoreResponse> }): Route {
  return { ...route, access: 'holder', handle: (input) => route.handle(input as RouteInput) };
}

const SEGMENT = '([A-Za-z0-9_]{1,64})';

/** A route table: finds the routes of a path, with its parameters. */
export class RouteTable {
  private readonly compiled: Array<{ route: Route; pattern: RegExp; names: string[] }>;

  constructor(routes: Route[]) {
    this.compiled = routes.map((route) => {
      // Every state-changing route must say how it is protected: a forgotten check fails at start-up.
      if (route.method === 'POST' && !route.csrf) throw new Error(`dashboard route POST ${route.path} declares no anti-forgery check`);
      const names: string[] = [];
      const source = route.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:([a-zA-Z]+)/g, (_, name: string) => {
        names.push(name);
        return SEGMENT;
      });
      return { route, pattern: new RegExp(`^${source}$`), names };
    });
  }

  /** Every route at `path` (one per method), with the path's parameters. */
  match(path: string, embedded: boolean): Array<{ route: Route; params: Record<string, string> }> {
    const found: Array<{ route: Route; params: Record<string, string> }> = [];
    for (const { route, pattern, names } of this.compiled) {
      if (route.embeddedOnly && !embedded) continue;
      const match = pattern.exec(path);
      if (match) found.push({ route, params: Object.fromEntries(names.map((name, i) => [name, match[i + 1]!])) });
    }
    return found;
  }
}
