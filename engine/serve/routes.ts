/**
 * The local API's one route table (issue 23 §1): every route's method, path, scope, query and what it answers, and
 * the handler that answers it by calling the engine as commands/ does. The app (app.ts) registers exactly these and
 * the OpenAPI document (openapi.ts) describes exactly these, so neither can drift from the other. Bodies are the
 * CLI's `--json` documents, built by the same engine functions.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listDatasets, showDataset } from "../dataset.ts";
import { EvolveError } from "../errors.ts";
import { isSettled } from "../job/actions.ts";
import { jobShowDocument, trialShowDocument } from "../job/documents.ts";
import { choices, findJob, JOB_KINDS, JOB_STATUSES, listJobRows, parseSince, type JobFilter } from "../job/list.ts";
import { TRIAL_STATUSES } from "../trial/lifecycle.ts";
import { archiveTrial, downloadJob } from "../results/download.ts";
import { jobFolderName } from "../results/ids.ts";
import { jobConfig } from "../job/job.ts";
import { resolveTrial, trialDir, type Store, type TrialRecord } from "../store/index.ts";
import { ARTIFACT_STREAMS, streamArtifact, type ArtifactStream } from "../trace/artifacts.ts";
import { parseGrep, parseKinds } from "../trace/filter.ts";
import { followTrace, hasTrace, traceLines, type StoredLine, type TraceFilter } from "../trace/store.ts";
import { readManifest, type KeptManifest } from "../trial/changes.ts";
import { JSON_LOG_LIMIT, LOG_STREAMS, logsDocument, UNRECORDED, unrecordedDocument, type LogStream } from "../trial/logs.ts";
import { geneBankDocument, screenDocument } from "../evolve/documents.ts";
import { readRounds, roundToJson } from "../evolve/round.ts";
import { readScreen } from "../evolve/screen.ts";
import { statusDocument } from "../metaharness/documents.ts";
import { catDocument, keptChangesDocument, keptLsDocument, readKeptPath } from "../trial/kept-read.ts";
import { checkSegment, checkTreePath, jsonResponse } from "./http.ts";
import type { TokenScope } from "./tokens.ts";
import { inScope, parseJobScope, type Viewer } from "../org/mod.ts";

/** What a route answers, for the OpenAPI document. */
export type Produces = "json" | "ndjson" | "sse" | "text" | "tar.gz";

/** What a handler gets: the store, the home, the request, its path parameters (already checked) and its query. */
export interface RouteContext {
  store: Store;
  home: string;
  req: Request;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Who asks (engine/org): `store` is already what they may see; `job list --scope` filters on it. */
  viewer: Viewer;
  /** Starts a job from `run`'s flags in this process (POST /jobs); absent where serve was built without it. */
  startJob?: (flags: Record<string, unknown>) => Promise<{ id: string }>;
  /** The evolution project whose records /evolve/* serves (`serve --project`): only it, never one a client names. */
  project?: string;
  /** The Meta-Harness run folder /metaharness/* serves (`serve --metaharness-run`). */
  metaharnessRun?: string;
  /** The OpenAPI document of this table (openapi.ts builds it from ROUTES, so it is handed in, not imported). */
  openapi: () => unknown;
}

/** One query parameter, for the OpenAPI document. */
export interface QueryParam {
  name: string;
  description: string;
  repeatable?: boolean;
}

export interface Route {
  method: "GET" | "POST";
  /** Under /api/v1, hono syntax (`:id`). */
  path: string;
  /** The least scope a token needs. */
  scope: TokenScope;
  summary: string;
  query?: readonly QueryParam[];
  produces: Produces;
  handle(c: RouteContext): Promise<Response> | Response;
}

/** Lists answer at most this many rows per page (`limit`), 20 when not asked: `job list`'s own default. */
export const MAX_PAGE = 1000;
const DEFAULT_PAGE = 20;
/** A trace page answers at most this many events; `cursor` (the last seq) fetches the next. */
export const MAX_TRACE_PAGE = 10_000;
/** The largest kept file `files/content` answers inline; the trial download carries bigger ones. */
export const MAX_FILE_BYTES = 8 * 1024 * 1024;
/** How often a live trace is polled for new events. */
const FOLLOW_POLL_MS = 250;
/** The header naming the cursor of the next page, when there is one (the body stays the CLI's document). */
export const NEXT_CURSOR = "x-next-cursor";

const usage = (message: string, hint = "") => new EvolveError("usage", message, hint);

/** A whole number from the query, within [min, max]; `dflt` when absent. */
function intParam(q: URLSearchParams, name: string, dflt: number | undefined, min: number, max: number): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return dflt;
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw usage(`${name}=${v}: expected a whole number from ${min} to ${max}`, `e.g. ${name}=${Math.min(max, Math.max(min, 10))}`);
  return Number(v);
}

/** Every value of a repeatable query parameter (`status=SCORED&status=CANCELLED`, or comma lists). */
const all = (q: URLSearchParams, name: string) => (q.getAll(name).length ? q.getAll(name) : undefined);

/** The trial a path names, by the same resolution the CLI uses (id, unique start or end). */
const trialOf = (c: RouteContext): TrialRecord => resolveTrial(c.store, c.params.trial!);

/** The trace filter from `type`, `grep`, `tail`, `cursor`: `trial trace`'s flags by their own parsers. */
function traceFilter(q: URLSearchParams): TraceFilter {
  return {
    types: parseKinds(all(q, "type"), "type"),
    grep: parseGrep(q.get("grep") ?? undefined, "grep"),
    // bounded like a page: the last N are held in memory until the trace has been read through
    tail: intParam(q, "tail", undefined, 0, MAX_TRACE_PAGE),
    after: intParam(q, "cursor", undefined, 0, Number.MAX_SAFE_INTEGER),
  };
}

function noTrace(t: TrialRecord): EvolveError {
  return isSettled(t)
    ? new EvolveError("trace_not_recorded", `trial ${t.id} stored no parsed trace (${t.status}; agent ${t.agent})`, "its agent has no trace parser, or never ran")
    : new EvolveError("trace_not_recorded", `trial ${t.id} has no parsed trace yet (${t.status})`, "follow it as it arrives: ?follow=1");
}

/**
 * A trial's trace as Server-Sent Events: each stored event (filtered) as `id: <seq>`, `event: trace`, `data: <line>`,
 * then what is appended while the client stays, until the trial settles (`event: end`). `Last-Event-ID` (or
 * `cursor`) resumes after that seq.
 */
function traceEvents(c: RouteContext, t: TrialRecord): Response {
  const f = traceFilter(c.query);
  const last = c.req.headers.get("last-event-id");
  if (last !== null && /^\d+$/.test(last)) f.after = Number(last);
  const follow = followTrace(c.home, t.id, f);
  const enc = new TextEncoder();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      const stop = () => {
        if (closed) return;
        closed = true;
        if (timer) clearTimeout(timer);
        try {
          ctl.close();
        } catch {
          /* the client went first */
        }
      };
      c.req.signal?.addEventListener("abort", stop);
      const tick = () => {
        if (closed) return;
        try {
          c.store.refresh();
          const now = c.store.getTrial(t.id) ?? t;
          const settled = isSettled(now);
          const lines = follow.poll();
          if (lines.length) ctl.enqueue(enc.encode(lines.map((s: StoredLine) => `id: ${s.seq}\nevent: trace\ndata: ${s.json}\n\n`).join("")));
          if (settled) {
            ctl.enqueue(enc.encode(`event: end\ndata: ${JSON.stringify({ status: now.status })}\n\n`));
            return stop();
          }
          // a comment keeps proxies from timing the stream out while the agent thinks
          if (!lines.length) ctl.enqueue(enc.encode(": waiting\n\n"));
        } catch (e) {
          ctl.enqueue(enc.encode(`event: error\ndata: ${JSON.stringify({ message: String((e as Error)?.message ?? e) })}\n\n`));
          return stop();
        }
        timer = setTimeout(tick, FOLLOW_POLL_MS);
      };
      tick();
    },
    cancel() {
      closed = true;
      if (timer) clearTimeout(timer);
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } });
}

/** A page of the trace as NDJSON, the lines `trial trace --json` prints; `x-next-cursor` when the page was cut. */
function tracePage(c: RouteContext, t: TrialRecord): Response {
  if (!hasTrace(c.home, t.id)) throw noTrace(t);
  const f = traceFilter(c.query);
  const limit = intParam(c.query, "limit", MAX_TRACE_PAGE, 1, MAX_TRACE_PAGE)!;
  const lines: string[] = [];
  let next: number | undefined;
  for (const s of traceLines(c.home, t.id, f)) {
    if (lines.length === limit) {
      next = Number(JSON.parse(lines.at(-1)!).seq);
      break;
    }
    lines.push(s.json);
  }
  const headers: Record<string, string> = { "content-type": "application/x-ndjson; charset=utf-8" };
  if (next !== undefined) headers[NEXT_CURSOR] = String(next);
  return new Response(lines.map((l) => l + "\n").join(""), { headers });
}

/**
 * An artifact's bytes (`trial download --stream`), streamed through the engine's sink as it writes them: a slow
 * client slows the read, a million-event trace is never held whole. An artifact the trial never stored is refused
 * before any byte is sent (the engine throws before its first write).
 */
async function artifact(c: RouteContext, name: string): Promise<Response> {
  if (!(ARTIFACT_STREAMS as readonly string[]).includes(name)) throw usage(`no artifact stream ${JSON.stringify(name)}`, `streams: ${ARTIFACT_STREAMS.join(", ")}`);
  const t = trialOf(c);
  // a queue of a few chunks the engine fills and the client drains (pull); a client that goes away cancels it, and
  // the read stops at the next chunk, quietly
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  let wake: (() => void) | undefined;
  let gone = false;
  const body = new ReadableStream<Uint8Array>(
    {
      start: (c) => void (ctl = c),
      pull: () => {
        wake?.();
        wake = undefined;
      },
      cancel: () => {
        gone = true;
        wake?.();
      },
    },
    { highWaterMark: 4 },
  );
  const enc = new TextEncoder();
  let started!: () => void;
  const first = new Promise<void>((r) => (started = r));
  const done = streamArtifact(c.home, t, name as ArtifactStream, async (chunk) => {
    started();
    if (!gone) ctl.enqueue(typeof chunk === "string" ? enc.encode(chunk) : new Uint8Array(chunk));
    while (!gone && (ctl.desiredSize ?? 0) <= 0) await new Promise<void>((r) => (wake = r));
    if (gone) throw new EvolveError("internal", "the client went away");
  }).then(
    () => void (gone || ctl.close()),
    (e) => {
      if (!gone) ctl.error(e);
      throw e;
    },
  );
  // a refusal before the first byte is the route's error; one after it cuts the body short
  await Promise.race([first, done]);
  done.catch(() => {});
  const type = name === "trace-parsed" ? "application/x-ndjson" : name === "trace-atif" || name === "agent-home" ? "application/json" : "text/plain";
  return new Response(body, { headers: { "content-type": `${type}; charset=utf-8` } });
}

/** A settled trial's kept tree (the API reads no live box: it holds no container engine). */
async function keptTree(c: RouteContext): Promise<{ t: TrialRecord; dir: string; m: KeptManifest }> {
  const t = trialOf(c);
  if (!isSettled(t)) throw new EvolveError("files_unavailable", `trial ${t.id} is ${t.status}: the API reads the kept tree of a settled trial`, `a live box is read from its machine: evolve trial files ls ${t.id}`);
  const dir = trialDir(c.home, t.id);
  const m = await readManifest(dir);
  if (!m) throw new EvolveError("files_unavailable", `trial ${t.id} has no files to read: it settled ${t.status} without a kept tree`, "see its record: GET /api/v1/trials/{trial}");
  return { t, dir, m };
}

/** Streams a file written to a temporary folder, removing the folder once sent (or abandoned). */
function sendTemp(file: string, dir: string, name: string): Response {
  const stream = createReadStream(file);
  const cleanup = () => void rm(dir, { recursive: true, force: true });
  stream.once("close", cleanup);
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      stream.on("data", (b) => ctl.enqueue(new Uint8Array(b as Buffer)));
      stream.on("end", () => ctl.close());
      stream.on("error", (e) => ctl.error(e));
    },
    cancel() {
      stream.destroy();
    },
  });
  return new Response(body, { headers: { "content-type": "application/gzip", "content-disposition": `attachment; filename="${name}"` } });
}

/** A page of rows after `cursor` (the last row's id), at most `limit`; `x-next-cursor` when more follow. */
function page<T extends { id: string }>(rows: readonly T[], q: URLSearchParams): Response {
  const limit = intParam(q, "limit", DEFAULT_PAGE, 1, MAX_PAGE)!;
  const cursor = q.get("cursor");
  let from = 0;
  if (cursor !== null) {
    const at = rows.findIndex((r) => r.id === cursor);
    if (at < 0) throw usage(`cursor ${JSON.stringify(cursor)} names no row of this list`, "pass the x-next-cursor of the previous page");
    from = at + 1;
  }
  const shown = rows.slice(from, from + limit);
  const more = from + limit < rows.length;
  return jsonResponse(shown, more ? { headers: { [NEXT_CURSOR]: shown.at(-1)!.id } } : {});
}

/** `job list`'s filters from the query, checked by the same parser as the flags. */
function jobFilter(c: RouteContext, kind?: JobFilter["kind"]): JobFilter {
  const q = c.query;
  const scope = q.get("scope") !== null ? parseJobScope(q.get("scope")!) : undefined;
  return {
    ...(scope !== undefined ? { keep: (j) => inScope(c.viewer, j, scope) } : {}),
    status: choices("status", all(q, "status"), JOB_STATUSES, true),
    kind: kind ?? choices("kind", all(q, "kind"), JOB_KINDS, false),
    agent: q.get("agent") ?? undefined,
    dataset: q.get("dataset") ?? undefined,
    name: q.get("name") ?? undefined,
    since: q.get("since") !== null ? parseSince(q.get("since")!) : undefined,
    limit: 0,
  };
}

const PAGE_QUERY: QueryParam[] = [
  { name: "limit", description: `rows per page, 1 to ${MAX_PAGE} (default ${DEFAULT_PAGE})` },
  { name: "cursor", description: "the x-next-cursor header of the previous page" },
];
const JOB_QUERY: QueryParam[] = [
  { name: "scope", description: "my (yours), shared (teammates'), org (everything in your organizations): job list --scope" },
  { name: "status", description: "job status (job list --status)", repeatable: true },
  { name: "agent", description: "agent name, exactly" },
  { name: "dataset", description: "dataset name or name@version" },
  { name: "name", description: "the --job-name, exactly" },
  { name: "since", description: "only jobs this recent: 2h, 3d, or an ISO date" },
  ...PAGE_QUERY,
];
const TRACE_QUERY: QueryParam[] = [
  { name: "type", description: "keep events of these kinds (trial trace --type)", repeatable: true },
  { name: "grep", description: "case-insensitive regex over type and content" },
  { name: "tail", description: "keep the last N matching events" },
  { name: "cursor", description: "only events after this seq" },
];
const PATH_QUERY: QueryParam[] = [{ name: "path", description: "a path in the kept tree, relative to its root (app/out.txt)" }];

/** The project `serve --project` named; the API never reads a folder a request names. */
function projectOf(c: RouteContext): string {
  if (c.project === undefined) throw new EvolveError("evolve_project_missing", "this server serves no evolution project", "start it with `evolve serve --project <dir>`");
  return c.project;
}

/** Every route of /api/v1. */
export const ROUTES: readonly Route[] = [
  {
    method: "GET",
    path: "/openapi.json",
    scope: "read",
    summary: "this API's OpenAPI 3.1 document",
    produces: "json",
    // as built: its keys (operationId, securitySchemes) are OpenAPI's, never re-cased by jsonKeys
    handle: (c) => new Response(JSON.stringify(c.openapi()), { headers: { "content-type": "application/json; charset=utf-8" } }),
  },
  {
    method: "GET",
    path: "/jobs",
    scope: "read",
    summary: "jobs, newest first, as `job list --json` (filters of `job list`)",
    query: [{ name: "kind", description: "run, check, retry or regrade", repeatable: true }, ...JOB_QUERY],
    produces: "json",
    handle: (c) => page(listJobRows(c.store, jobFilter(c)).jobs, c.query),
  },
  {
    method: "POST",
    path: "/jobs",
    scope: "run",
    summary: "start a job in the serve process; the body is `run`'s flags as a run config file has them ({\"path\": …, \"agent\": \"oracle\", \"n-attempts\": 2})",
    produces: "json",
    handle: async (c) => {
      if (!c.startJob) throw usage("this server starts no jobs", "run `evolve serve` itself: it starts jobs");
      let body: unknown;
      try {
        body = await c.req.json();
      } catch {
        throw usage("the body is not JSON", 'send run\'s flags as one JSON object, e.g. {"path": "tasks/hello", "agent": "oracle"}');
      }
      if (body === null || typeof body !== "object" || Array.isArray(body)) throw usage("the body is not a JSON object", 'e.g. {"path": "tasks/hello", "agent": "oracle"}');
      const { id } = await c.startJob(body as Record<string, unknown>);
      c.store.refresh();
      return jsonResponse(jobShowDocument(c.store, findJob(c.store, id)).document, { status: 201, headers: { location: `/api/v1/jobs/${id}` } });
    },
  },
  {
    method: "GET",
    path: "/jobs/:job",
    scope: "read",
    summary: "one job with status counts, mean, pass@k, spend, config and trials, as `job show --json`",
    query: [{ name: "status", description: "list only trials of these statuses (the summary stays the whole job's)", repeatable: true }],
    produces: "json",
    handle: (c) => jsonResponse(jobShowDocument(c.store, findJob(c.store, c.params.job!), choices("status", all(c.query, "status"), TRIAL_STATUSES, true)).document),
  },
  {
    method: "GET",
    path: "/jobs/:job/download",
    scope: "read",
    summary: "the job archive (`job download -o x.tar.gz`) as one .tar.gz",
    produces: "tar.gz",
    handle: async (c) => {
      const job = findJob(c.store, c.params.job!);
      const dir = await mkdtemp(join(tmpdir(), "evolve-serve-"));
      const name = `${jobFolderName(job.id, jobConfig(job).name)}.tar.gz`;
      try {
        const file = await downloadJob(c.store, c.home, job.id, join(dir, name));
        return sendTemp(file, dir, name);
      } catch (e) {
        await rm(dir, { recursive: true, force: true });
        throw e;
      }
    },
  },
  {
    method: "GET",
    path: "/checks",
    scope: "read",
    summary: "check jobs (`evolve check`), newest first, as `job list --kind check --json`",
    query: JOB_QUERY,
    produces: "json",
    handle: (c) => page(listJobRows(c.store, jobFilter(c, ["check"])).jobs, c.query),
  },
  {
    method: "GET",
    path: "/trials/:trial",
    scope: "read",
    summary: "one trial's record, as `trial show --json`",
    produces: "json",
    handle: (c) => jsonResponse(trialShowDocument(c.home, trialOf(c))),
  },
  {
    method: "GET",
    path: "/trials/:trial/trace",
    scope: "read",
    summary: "the parsed trace as NDJSON (`trial trace --json`), at most 10000 events a page; with follow=1, live as Server-Sent Events",
    query: [...TRACE_QUERY, { name: "limit", description: `events per page, 1 to ${MAX_TRACE_PAGE}` }, { name: "follow", description: "1: stream as Server-Sent Events until the trial settles" }],
    produces: "ndjson",
    handle: (c) => {
      const t = trialOf(c);
      return c.query.get("follow") === "1" ? traceEvents(c, t) : tracePage(c, t);
    },
  },
  {
    method: "GET",
    path: "/trials/:trial/trace/stream",
    scope: "read",
    summary: "the parsed trace as Server-Sent Events: what is stored, then what is appended, until the trial settles",
    query: TRACE_QUERY,
    produces: "sse",
    handle: (c) => traceEvents(c, trialOf(c)),
  },
  {
    method: "GET",
    path: "/trials/:trial/atif",
    scope: "read",
    summary: "the normalized ATIF trajectory (`trial download --stream trace-atif`)",
    produces: "json",
    handle: (c) => artifact(c, "trace-atif"),
  },
  {
    method: "GET",
    path: "/trials/:trial/artifacts/:stream",
    scope: "read",
    summary: `one artifact, as \`trial download --stream\`: ${ARTIFACT_STREAMS.join(", ")}`,
    produces: "text",
    handle: (c) => artifact(c, c.params.stream!),
  },
  {
    method: "GET",
    path: "/trials/:trial/logs/:stream",
    scope: "read",
    summary: `one log stream, as \`trial logs --stream S --json\` (each file's last ${JSON_LOG_LIMIT} bytes): ${LOG_STREAMS.join(", ")}`,
    query: [{ name: "step", description: "one step of a multi-step trial (agent and verifier streams)" }],
    produces: "json",
    handle: async (c) => {
      const stream = c.params.stream!;
      if (!(LOG_STREAMS as readonly string[]).includes(stream)) throw usage(`no log stream ${JSON.stringify(stream)}`, `streams: ${LOG_STREAMS.join(", ")}`);
      const t = trialOf(c);
      const s = stream as LogStream;
      if (UNRECORDED[s]) return jsonResponse(unrecordedDocument(t.id, s));
      const step = c.query.get("step");
      return jsonResponse(await logsDocument(trialDir(c.home, t.id), t, s, step === null ? undefined : checkSegment("step", step)));
    },
  },
  {
    method: "GET",
    path: "/trials/:trial/files",
    scope: "read",
    summary: "a folder of the settled trial's kept tree, as `trial files ls --json`",
    query: PATH_QUERY,
    produces: "json",
    handle: async (c) => {
      const p = checkTreePath(c.query.get("path") ?? undefined);
      const { t, m } = await keptTree(c);
      return jsonResponse(keptLsDocument(t.id, m, p));
    },
  },
  {
    method: "GET",
    path: "/trials/:trial/files/content",
    scope: "read",
    summary: `one kept file, as \`trial files cat --json\` (at most ${MAX_FILE_BYTES} bytes; the trial download carries bigger ones)`,
    query: PATH_QUERY,
    produces: "json",
    handle: async (c) => {
      const p = checkTreePath(c.query.get("path") ?? undefined);
      const { t, dir, m } = await keptTree(c);
      const e = m.files.find((x) => x.path === p);
      if (e?.size !== undefined && e.size > MAX_FILE_BYTES) throw new EvolveError("file_too_large", `${p} is ${e.size} bytes, over the API's ${MAX_FILE_BYTES}-byte cap`, `download the trial: GET /api/v1/trials/${t.id}/download`);
      return jsonResponse(catDocument(t.id, "kept", p, await readKeptPath(t.id, dir, m, p)));
    },
  },
  {
    method: "GET",
    path: "/trials/:trial/files/changes",
    scope: "read",
    summary: "what the run changed, as `trial files changes --json` on a kept tree",
    produces: "json",
    handle: async (c) => {
      const { t, m } = await keptTree(c);
      return jsonResponse(keptChangesDocument(t.id, m));
    },
  },
  {
    method: "GET",
    path: "/trials/:trial/download",
    scope: "read",
    summary: "the trial tree (`trial download -o`) as one .tar.gz, its entries under <trial id>/",
    produces: "tar.gz",
    handle: async (c) => {
      const t = trialOf(c);
      const dir = await mkdtemp(join(tmpdir(), "evolve-serve-"));
      try {
        const file = await archiveTrial(c.home, t, join(dir, `${t.id}.tar.gz`));
        return sendTemp(file, dir, `${t.id}.tar.gz`);
      } catch (e) {
        await rm(dir, { recursive: true, force: true });
        throw e;
      }
    },
  },
  {
    method: "GET",
    path: "/datasets",
    scope: "read",
    summary: "dataset versions, as `dataset list --json`",
    produces: "json",
    handle: (c) => jsonResponse(listDatasets(c.store)),
  },
  {
    method: "GET",
    path: "/datasets/:name",
    scope: "read",
    summary: "a dataset's newest version and its tasks, as `dataset show <name> --json`",
    produces: "json",
    handle: (c) => jsonResponse(showDataset(c.store, c.params.name!)),
  },
  {
    method: "GET",
    path: "/datasets/:name/:version",
    scope: "read",
    summary: "one dataset version and its tasks, as `dataset show <name>@<version> --json`",
    produces: "json",
    handle: (c) => jsonResponse(showDataset(c.store, `${c.params.name}@${c.params.version}`)),
  },
  {
    method: "GET",
    path: "/datasets/:name/:version/tasks",
    scope: "read",
    summary: "the tasks of one dataset version (the `tasks` of `dataset show --json`)",
    produces: "json",
    handle: (c) => jsonResponse(showDataset(c.store, `${c.params.name}@${c.params.version}`).tasks),
  },
  {
    method: "GET",
    path: "/evolve/genebank",
    scope: "read",
    summary: "the served project's gene bank, as `harness genebank show --json`",
    produces: "json",
    handle: (c) => jsonResponse(geneBankDocument(projectOf(c))),
  },
  {
    method: "GET",
    path: "/evolve/rounds",
    scope: "read",
    summary: "the served project's round records, by round number (docs/json.md, round record)",
    produces: "json",
    handle: (c) => jsonResponse(readRounds(projectOf(c)).map(roundToJson)),
  },
  {
    method: "GET",
    path: "/evolve/screens/:screen",
    scope: "read",
    summary: "one screen of the served project, as `harness screen --json` printed it",
    produces: "json",
    handle: (c) => {
      const project = projectOf(c);
      return jsonResponse(screenDocument(project, readScreen(project, c.params.screen!)));
    },
  },
  {
    method: "GET",
    path: "/metaharness/status",
    scope: "read",
    summary: "the served Meta-Harness run, as `metaharness status --json`",
    produces: "json",
    handle: (c) => {
      if (c.metaharnessRun === undefined) throw new EvolveError("metaharness_run_missing", "this server serves no Meta-Harness run", "start it with `evolve serve --metaharness-run <dir>`");
      return jsonResponse(statusDocument(c.metaharnessRun));
    },
  },
];

/** Checks every path parameter of a matched route (ids, names, streams are one plain segment each). */
export function checkParams(params: Record<string, string>): Record<string, string> {
  for (const [k, v] of Object.entries(params)) checkSegment(k, v);
  return params;
}
