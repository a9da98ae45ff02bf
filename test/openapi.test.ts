import { Validator } from '@seriousme/openapi-schema-validator';
import { captureInternalError } from './helpers/log-capture.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import type { Server } from 'node:http';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { createRemoveBgHandler, ERROR_CATALOG, OUTPUT_OPTION_DEFINITIONS, type KeyStore, type RemoveBgHandler } from '../src/core/index.js';
import { parseOutputOptions } from '../src/core/output-options.js';
import { buildOpenApiDocument } from '../src/openapi/document.js';
import { baseUrlOf } from './conformance/suite.js';

const keyStore: KeyStore = { findByHash: async () => undefined };
const context = { serverUrl: '/api', maxUploadBytes: 1024, models: ['isnet'], defaultModel: 'isnet', problemTypeBase: 'urn:bgcut:problem:' };

describe('OpenAPI document', () => {
  const document = buildOpenApiDocument(context) as any;

  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
  });

  it('lists every error code of the catalogue, each under its own status', () => {
    expect(document.components.schemas.Problem.properties.code.enum.sort()).toEqual(Object.keys(ERROR_CATALOG).sort());
    const responses = document.paths['/v1/remove-bg'].post.responses;
    const jobs = document.paths['/v1/jobs'].post.responses;
    const codesAt = (operation: Record<string, any>, status: number): string[] => operation[String(status)]?.content['application/problem+json'].schema.allOf[1].properties.code.enum ?? [];
    for (const [code, { status }] of Object.entries(ERROR_CATALOG)) {
      // bad_request: the host app's own parts (the examples); unknown_foreground, malformed_base64: remove.bg's route only.
      if (['not_found', 'client_closed', 'bad_request', 'unknown_foreground', 'malformed_base64'].includes(code)) continue;
      // The jobs' own codes are documented on the jobs' operations.
      const readJob = ['job_not_found', 'result_not_ready', 'results_expired'].includes(code);
      const where = readJob ? document.paths['/v1/jobs/{id}/results/{n}'].get.responses : ['batch_empty', 'batch_too_large', 'callback_url_refused', 'webhook_secret_missing'].includes(code) ? jobs : responses;
      expect(codesAt(where, status), code).toContain(code);
    }
    expect(responses['429'].headers['Retry-After']).toBeDefined();
    expect(document.components.securitySchemes.ApiKey).toEqual(expect.objectContaining({ type: 'apiKey', in: 'header', name: 'X-API-KEY' }));
  });

  // The document and the handler read the same table; this shows they agree value by value.
  describe('accepts exactly what the handler accepts', () => {
    const ajv = new Ajv2020({ strict: false });
    const parameters = document.paths['/v1/remove-bg'].post.parameters as { name: string; schema: object }[];
    const samples: Record<string, string[]> = {
      format: ['png', 'jpeg', 'JPG', 'zip', 'gif', 'bmp', ''],
      channels: ['rgba', 'alpha', 'rgb'],
      bg_color: ['#00ff00', 'red', 'transparent'],
      crop: ['true', 'false', '1', 'maybe'],
      crop_margin: ['10px', '5%', '500px', '10pt', 'ten', '10px 5%', '1px 2px 3px 4px', '1px 2px 3px', '10px  5%'],
      size: ['preview', 'medium', 'hd', 'full', 'auto', 'huge'],
      model: ['isnet', 'a b', 'x'.repeat(65)],
      quality: ['fast', 'balanced', 'BEST', 'better', ''],
      scale: ['80%', '10%', '100%', 'original', '5%', '101%', '80', ''],
      position: ['original', 'center', '25%', '0% 100%', '10px', '120%', '1% 2% 3%'],
      add_shadow: ['true', 'false', '1', 'maybe'],
      shadow_opacity: ['0', '50', '100', '101', '-1', 'half'],
      roi: ['10% 0% 90% 100%', '0px 0px 400px 300px', '0 0 10 10', 'a b c d', '10% 0%', '1  2 3 4'],
      bg_image_url: ['https://example.com/b.jpg', '', 'x'.repeat(2100)],
      output_size: ['300x200', '300X200', '0x10', '6000x6000', '10x', '10 x 10', 'big'],
      padding: ['10%', '40px 20px', '5% 5% 0 5%', '50%', '1px 2px 3px', '10pt'],
    };
    for (const name of Object.keys(OUTPUT_OPTION_DEFINITIONS)) {
      it(name, () => {
        const schema = parameters.find((p) => p.name === name)!.schema;
        expect(schema).toBeDefined();
        const validate = ajv.compile(schema);
        for (const value of samples[name]!) {
          const needs: Record<string, Record<string, string>> = { crop_margin: { crop: 'true' }, shadow_opacity: { add_shadow: 'true' }, padding: { output_size: '1000x1000' } };
          const fields = { ...needs[name], [name]: value };
          let parsed = true;
          try {
            parseOutputOptions(fields, '/', {});
          } catch {
            parsed = false;
          }
          // The schema may be looser than the parser (a range, a colour name), never stricter,
          // except for the letter case of enum words, which the document says is ignored.
          const documented = validate(value) || ('enum' in schema && validate(value.trim().toLowerCase()));
          if (parsed) expect(documented, `${name}=${value} is parsed but the schema refuses it`).toBe(true);
          if (!documented) expect(parsed, `${name}=${value} is refused by the schema but parsed`).toBe(false);
        }
      });
    }
  });
});

describe('served document and reference page', () => {
  let handler: RemoveBgHandler;
  let server: Server;
  let base: string;
  beforeAll(async () => {
    handler = createRemoveBgHandler({ keyStore, onInternalError: captureInternalError });
    const app = express();
    app.use('/api', createRemoveBgRouter(handler));
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = baseUrlOf(server);
  });
  afterAll(async () => {
    server?.close();
    await handler?.close();
  });

  it('GET /v1/openapi.json: the document, its server where it was fetched from', async () => {
    const response = await fetch(`${base}/api/v1/openapi.json`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const served = (await response.json()) as any;
    expect(served.servers).toEqual([{ url: '/api' }]);
    expect(served.paths['/v1/remove-bg'].post.operationId).toBe('removeBackground');
    expect(served.components.schemas.Account.properties.plan.properties.maxUploadBytes.maximum).toBe(25 * 1024 * 1024);
  });

  it('GET /docs: a page whose scripts and styles are all served here (no CDN)', async () => {
    const response = await fetch(`${base}/api/docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await response.text();
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBe(3);
    for (const asset of assets) {
      const file = await fetch(new URL(asset, `${base}/api/docs`));
      expect(file.status, asset).toBe(200);
      expect((await file.arrayBuffer()).byteLength, asset).toBeGreaterThan(100);
    }
  });

  it('405 for POST to the document', async () => {
    const response = await fetch(`${base}/api/v1/openapi.json`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
  });
});
