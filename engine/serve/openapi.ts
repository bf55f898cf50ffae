/**
 * The OpenAPI 3.1 document of the local API, generated from the route table (routes.ts) and nothing else: a route
 * exists in the app exactly when it exists here.
 */
import { ROUTES, NEXT_CURSOR, type Produces, type Route } from "./routes.ts";

/** Where every route lives. */
export const API_BASE = "/api/v1";

const MEDIA: Record<Produces, string> = {
  json: "application/json",
  ndjson: "application/x-ndjson",
  sse: "text/event-stream",
  text: "text/plain",
  "tar.gz": "application/gzip",
};

/** `/trials/:trial` → `/trials/{trial}`. */
export function openApiPath(path: string): string {
  return API_BASE + path.replace(/:([A-Za-z_]+)/g, "{$1}");
}

const ERROR = { $ref: "#/components/responses/Error" };

function operation(r: Route) {
  const params = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => ({ name: m[1], in: "path", required: true, schema: { type: "string" } }));
  const query = (r.query ?? []).map((q) => ({
    name: q.name,
    in: "query",
    required: false,
    description: q.description,
    schema: q.repeatable ? { type: "array", items: { type: "string" } } : { type: "string" },
    ...(q.repeatable ? { explode: true } : {}),
  }));
  return {
    operationId: `${r.method.toLowerCase()}${r.path.replace(/[/:{}.-]+(\w)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ""))}`,
    summary: r.summary,
    "x-evolve-scope": r.scope,
    ...(params.length + query.length ? { parameters: [...params, ...query] } : {}),
    ...(r.method === "POST" ? { requestBody: { required: true, content: { "application/json": { schema: { type: "object" } } } } } : {}),
    responses: {
      [r.method === "POST" ? "201" : "200"]: {
        description: r.summary,
        ...(r.query?.some((q) => q.name === "cursor" || q.name === "limit") ? { headers: { [NEXT_CURSOR]: { description: "the cursor of the next page, when there is one", schema: { type: "string" } } } } : {}),
        content: { [MEDIA[r.produces]]: {} },
      },
      "400": ERROR,
      "401": ERROR,
      ...(r.scope === "run" ? { "403": ERROR } : {}),
      "404": ERROR,
    },
  };
}

/** The document served at /api/v1/openapi.json. */
export function openApiDocument(version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of ROUTES) (paths[openApiPath(r.path)] ??= {})[r.method.toLowerCase()] = operation(r);
  return {
    openapi: "3.1.0",
    info: { title: "evolve local API", version, description: "The CLI's --json documents over HTTP (docs/json.md). Every request over TCP carries `Authorization: Bearer <token>` (evolve auth token create)." },
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      responses: {
        Error: {
          description: "an error with a stable code (engine/error-codes.ts)",
          content: { "application/json": { schema: { type: "object", required: ["error"], properties: { error: { type: "object", required: ["code", "message", "hint"], properties: { code: { type: "string" }, message: { type: "string" }, hint: { type: "string" } } } } } } },
        },
      },
    },
  };
}
