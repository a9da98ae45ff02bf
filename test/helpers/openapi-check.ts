import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ValidateFunction } from 'ajv';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;

type Json = Record<string, any>;

/**
 * Checks one HTTP response against an OpenAPI 3.1 document: a documented operation and status,
 * a documented content type, every required header present, every documented header and the
 * body valid against their schemas. Returns what is wrong (empty when it conforms). Paths the
 * document does not describe (the host app's own) are skipped.
 */
export class OpenApiResponseChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly compiled = new Map<string, ValidateFunction>();
  checked = 0;

  constructor(private readonly document: Json) {
    addFormats(this.ajv);
    this.ajv.addSchema(document, 'openapi.json');
  }

  check(method: string, url: string, status: number, headers: Headers, body: Buffer): string[] {
    const pathname = new URL(url, 'http://localhost').pathname;
    // Templates (`/v1/jobs/{id}`) match one path segment per parameter.
    const template = Object.keys(this.document.paths).find((p) =>
      new RegExp(`${p.split(/\{[^}]+\}/).map((piece) => piece.replace(/[.*+?^$()|[\]\\]/g, '\\$&')).join('[^/]+')}$`).test(pathname),
    );
    if (!template) return [];
    this.checked++;
    const where = `${method} ${template} -> ${status}`;
    const operation = this.document.paths[template][method.toLowerCase()];
    if (!operation) {
      // A method the document does not list: the only documented answer is 405 problem+json.
      const problems = status === 405 ? [] : [`${where}: undocumented method answered ${status}, not 405`];
      return [...problems, ...this.checkBody(where, headers, body, 'application/problem+json', '#/components/schemas/Problem')];
    }
    const responsePointer = `#/paths/${escape(template)}/${method.toLowerCase()}/responses/${status}`;
    const response = operation.responses[String(status)];
    if (!response) return [`${where}: status not documented`];
    const problems: string[] = [];
    for (const [name, declared] of Object.entries<Json>(response.headers ?? {})) {
      const header = declared.$ref ? this.resolve(declared.$ref) : declared;
      const value = headers.get(name);
      if (value === null) {
        if (header.required) problems.push(`${where}: required header ${name} missing`);
        continue;
      }
      const pointer = declared.$ref ? `${declared.$ref}/schema` : `${responsePointer}/headers/${escape(name)}/schema`;
      const error = this.validate(pointer, value);
      if (error) problems.push(`${where}: header ${name}: ${value}: ${error}`);
    }
    const contentType = (headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (!response.content?.[contentType]) {
      problems.push(`${where}: content type "${contentType}" not documented (${Object.keys(response.content ?? {}).join(', ')})`);
      return problems;
    }
    const schemaPointer = `${responsePointer}/content/${escape(contentType)}/schema`;
    return [...problems, ...this.checkBody(where, headers, body, contentType, schemaPointer)];
  }

  private checkBody(where: string, headers: Headers, body: Buffer, contentType: string, pointer: string): string[] {
    const actual = (headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (actual !== contentType) return [`${where}: content type ${actual}, expected ${contentType}`];
    if (!/json$/.test(contentType)) return body.length > 0 ? [] : [`${where}: empty ${contentType} body`];
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch {
      return [`${where}: body is not JSON`];
    }
    const error = this.validate(pointer, value);
    return error ? [`${where}: body: ${error}`] : [];
  }

  private validate(pointer: string, value: unknown): string | undefined {
    let validate = this.compiled.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `openapi.json${pointer}` });
      this.compiled.set(pointer, validate);
    }
    return validate(value) ? undefined : this.ajv.errorsText(validate.errors);
  }

  private resolve(ref: string): Json {
    return ref
      .slice(2)
      .split('/')
      .reduce((node: Json, part) => node[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
  }
}

/** JSON Pointer escaping of one reference token, then URI-encoded for use in a $ref. */
function escape(token: string): string {
  return encodeURIComponent(token.replace(/~/g, '~0').replace(/\//g, '~1'));
}
