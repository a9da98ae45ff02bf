import { createRequire } from 'node:module';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import type { RemoveBgHandler } from '../core/handler.js';
import { ApiError, problemOf } from '../core/errors.js';
import type { CoreRequest, CoreResponse, Route } from '../core/http-types.js';
import { buildOpenApiDocument, type OpenApiContext } from './document.js';

export const OPENAPI_PATH = '/v1/openapi.json';
export const DOCS_PATH = '/docs';

/**
 * Everything an adapter mounts for a handler: its API routes, and the API reference's routes
 * unless the handler was created with `apiDocs: false`. The core knows nothing of OpenAPI; the
 * reference is built here from what the handler says about its configuration.
 */
export function mountedRoutes(handler: Pick<RemoveBgHandler, 'routes' | 'apiDocs'>): Route[] {
  return handler.apiDocs ? [...handler.routes, ...apiDocsRoutes(handler.apiDocs)] : handler.routes;
}

/**
 * `GET /v1/openapi.json` (the document) and `GET /docs` (a Swagger UI reference page, served from
 * the swagger-ui-dist package: no CDN). The document's server URL is where it was fetched from,
 * less `/v1/openapi.json`, unless `serverUrl` is configured.
 */
export function apiDocsRoutes(context: Omit<OpenApiContext, 'serverUrl'> & { serverUrl?: string | undefined }): Route[] {
  const documents = new Map<string, Buffer>();
  const openApi = async (request: CoreRequest): Promise<CoreResponse> => {
    if (!isGet(request)) return methodNotAllowed();
    const pathname = new URL(request.url, 'http://localhost').pathname;
    const serverUrl = context.serverUrl ?? pathname.slice(0, pathname.length - OPENAPI_PATH.length);
    let body = documents.get(serverUrl);
    if (!body) {
      body = Buffer.from(JSON.stringify(buildOpenApiDocument({ ...context, serverUrl })));
      if (documents.size < 16) documents.set(serverUrl, body);
    }
    return { status: 200, headers: { 'content-type': 'application/json', 'content-length': String(body.length), 'cache-control': 'no-cache' }, body };
  };
  return [
    { path: OPENAPI_PATH, handle: openApi },
    { path: DOCS_PATH, handle: staticFile(() => Promise.resolve(Buffer.from(DOCS_HTML)), 'text/html; charset=utf-8', 'no-cache') },
    { path: `${DOCS_PATH}/init.js`, handle: staticFile(() => Promise.resolve(Buffer.from(INIT_JS)), 'text/javascript; charset=utf-8', 'no-cache') },
    { path: `${DOCS_PATH}/swagger-ui.css`, handle: staticFile(() => swaggerUiFile('swagger-ui.css'), 'text/css; charset=utf-8') },
    { path: `${DOCS_PATH}/swagger-ui-bundle.js`, handle: staticFile(() => swaggerUiFile('swagger-ui-bundle.js'), 'text/javascript; charset=utf-8') },
  ];
}

// Relative URLs, so the page works wherever the routes are mounted (`/docs` -> `v1/openapi.json`).
const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bgcut API reference</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
`;

// In its own file, so the page's Content-Security-Policy needs no inline script.
const INIT_JS = `window.ui = SwaggerUIBundle({
  url: new URL('v1/openapi.json', document.baseURI).href,
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
});
`;

const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

let swaggerUiDir: string | undefined;
const cache = new Map<string, Promise<Buffer>>();

function swaggerUiFile(name: string): Promise<Buffer> {
  swaggerUiDir ??= path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  let file = cache.get(name);
  if (!file) {
    file = readFile(path.join(swaggerUiDir, name));
    file.catch(() => cache.delete(name));
    cache.set(name, file);
  }
  return file;
}

function staticFile(read: () => Promise<Buffer>, contentType: string, cacheControl = 'public, max-age=86400') {
  return async (request: CoreRequest): Promise<CoreResponse> => {
    if (!isGet(request)) return methodNotAllowed();
    const body = await read();
    return {
      status: 200,
      headers: {
        'content-type': contentType,
        'content-length': String(body.length),
        'cache-control': cacheControl,
        'content-security-policy': CSP,
        'x-content-type-options': 'nosniff',
      },
      body,
    };
  };
}

const isGet = (request: CoreRequest) => request.method === 'GET' || request.method === 'HEAD';

function methodNotAllowed(): CoreResponse {
  const body = Buffer.from(JSON.stringify(problemOf(new ApiError('method_not_allowed', { detail: 'Use GET.' }))));
  return { status: 405, headers: { allow: 'GET, HEAD', 'content-type': 'application/problem+json', 'content-length': String(body.length) }, body };
}
