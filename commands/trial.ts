/**
 * `evolve trial retry|regrade|stop|logs|files|procs`: acting on one trial and reading what it left. A live trial
 * is read through the engine (its box); a settled one from its trial folder and kept tree.
 *
 * Exit codes: 2 for a usage error or an id/path that cannot name anything (`trial_not_found`,
 * `path_outside_tree`, `trial_not_settled`); 1 when the trial was found but does not have what was asked (a stream it
 * never produced, a file it never kept, no live box for `procs`, a trial that cannot be regraded).
 */
import { existsSync } from "node:fs";
import { mkdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { openEngine } from "../engine/engine-choice.ts";
import type { Engine, EngineKind } from "../engine/driver/mod.ts";
import { EvolveError } from "../engine/errors.ts";
import { createRegrade, createRetry, isSettled, requestStop, requireTrial, taskLabel, unsettled } from "../engine/job/mod.ts";
import { trialDir, type Store, type TrialRecord } from "../engine/store/mod.ts";
import {
  archiveKept,
  archiveLive,
  boxChanges,
  boxList,
  boxPath,
  boxProcesses,
  boxReadFile,
  exclusion,
  findLiveBox,
  type KeptManifest,
  readManifest,
  type RegradeVerifier,
  skippedSummary,
} from "../engine/trial/mod.ts";
import {
  BoxFileRefused,
  streamBoxFile,
  trialPaths,
} from "../engine/box/mod.ts";
import { exceptionLine, formatDuration, formatReward, out, outJson, outJsonLine, outTable, statusWord, style, when } from "./output.ts";
import { catDocument, keptChanges, keptChangesDocument, keptLsDocument, readKeptPath, UNTOUCHED_NOTE, logsDocument, unrecordedDocument, notRecorded, streamParts, UNRECORDED, type LogStream, type StreamPart } from "../engine/trial/mod.ts";
import { driveJob, secretsFromEnv } from "./run.ts";
import { withStore } from "./store.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- retry / regrade -------------------------------------------------------------------------------------------

/** Runs a one-trial job made by retry/regrade in this process and prints its outcome. */
async function runOneTrialJob(
  store: Store,
  home: string,
  made: { job: { id: string }; trial: TrialRecord; verifier?: RegradeVerifier },
  what: "retry" | "regrade",
  opts: { json?: boolean; engine?: EngineKind },
): Promise<number> {
  const of = (what === "retry" ? made.trial.retry_of : made.trial.regrade_of)!;
  const config = (store.getJob(made.job.id)!.config ?? {}) as { secret_names?: string[] };
  const engine = await openEngine({ kind: opts.engine, home });
  if (!opts.json) {
    out(`${style.bold(`job ${made.job.id}`)}: ${what} of trial ${of} as trial ${made.trial.id}`);
    // the task and the verifier are the stored ones, by digest, not whatever the task's folder holds now
    out(style.dim(`  task ${made.trial.task_name ?? "-"} ${made.trial.task_digest}`));
    const v = made.verifier;
    if (v) out(style.dim(`  verifier ${v.script} of that stored task (${v.mode} mode, ${v.tests_dir}), on trial ${of}'s ${v.mode === "separate" ? "collected artifacts" : "kept files"}`));
  }
  await driveJob({ store, engine, home, jobId: made.job.id, secrets: secretsFromEnv(config.secret_names ?? []), json: opts.json });
  const t = store.getTrial(made.trial.id)!;
  const doc = {
    job_id: made.job.id,
    trial_id: t.id,
    [what === "retry" ? "retry_of" : "regrade_of"]: of,
    task_digest: t.task_digest,
    ...(made.verifier ? { verifier: made.verifier } : {}),
    status: t.status,
    reward: t.reward ?? null,
    rewards: t.rewards ?? null,
    exception: t.exception ?? null,
  };
  if (opts.json) outJson(doc);
  else {
    const status = statusWord(t.status);
    const why = t.exception ? style.dim(` ${exceptionLine(t.exception)}`) : "";
    out(`${status} ${taskLabel(t)} ${style.dim(t.id)}${t.reward !== null && t.reward !== undefined ? ` reward ${formatReward(t.reward)}` : ""}${why}`);
  }
  return t.status === "SCORED" ? 0 : 1;
}

/** `evolve trial retry <id>` */
export async function retryCommand(id: string, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  return withStore((store, home) => runOneTrialJob(store, home, createRetry(store, id), "retry", opts));
}

/** `evolve trial regrade <id>` */
export async function regradeCommand(id: string, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  return withStore(async (store, home) => runOneTrialJob(store, home, await createRegrade(store, home, id), "regrade", opts));
}

// ---- stop ------------------------------------------------------------------------------------------------------

/** `evolve trial stop <id>…`: waits (up to --wait seconds) until each stopped trial has settled. */
export async function stopCommand(ids: string[], opts: { json?: boolean; wait?: number }): Promise<number> {
  const waitSec = opts.wait ?? 30;
  return withStore(async (store) => {
    const outcomes = requestStop(store, ids);
    let open = outcomes.filter((o) => o.action === "requested").map((o) => o.id);
    const deadline = Date.now() + waitSec * 1000;
    while (open.length > 0 && Date.now() < deadline) {
      await sleep(200);
      open = unsettled(store, open);
    }
    const rows = outcomes.map((o) => {
      const t = store.getTrial(o.id)!;
      return { id: o.id, action: o.action, status: t.status, settled: isSettled(t) };
    });
    if (opts.json) outJson(rows);
    else {
      for (const r of rows) {
        if (r.action === "settled") out(`${r.id}: already settled ${r.status}; nothing to stop`);
        else if (r.settled) out(`${r.id}: stopped, ${r.status}`);
        else out(`${r.id}: stop requested; still ${r.status} after ${formatDuration(waitSec * 1000)} (its runner settles it when the current step returns)`);
      }
    }
    return rows.every((r) => r.settled) ? 0 : 1;
  });
}

// ---- logs ------------------------------------------------------------------------------------------------------

/** The header printed before each step's part of a multi-step trial's stream, like `tail`'s between files. */
const stepHeader = (part: StreamPart) => style.bold(part.step === null ? "==> current step <==" : `==> step ${part.step} <==`) + "\n";

type LogsOpts = { stream?: string; step?: string; follow?: boolean; json?: boolean };

/** `evolve trial logs <id> --stream S [--step NAME] [--follow]` */
export async function logsCommand(id: string, opts: LogsOpts): Promise<number> {
  try {
    return await printLogs(id, opts);
  } catch (e) {
    // a link, FIFO or device planted at a stream's name by the box: refused, naming the file and never its target
    if (e instanceof BoxFileRefused) throw new EvolveError("stream_refused", e.message, "the box planted it; the trial's other outputs are unaffected");
    throw e;
  }
}

async function printLogs(arg: string, opts: LogsOpts): Promise<number> {
  const stream = (opts.stream ?? "agent") as LogStream;
  return withStore(async (store, home) => {
    const t = requireTrial(store, arg);
    const id = t.id;
    if (UNRECORDED[stream]) {
      if (opts.json) outJson(unrecordedDocument(id, stream));
      else process.stderr.write(`${style.dim(`(empty) ${UNRECORDED[stream]}`)}\n`);
      return 0;
    }
    const tdir = trialDir(home, id);
    const decoder = new TextDecoder();
    const emitBytes = (b: Buffer) => emit(decoder.decode(b, { stream: true }));
    const emit = (text: string) => {
      if (!text) return;
      if (opts.json && opts.follow) outJsonLine({ trial_id: id, stream, text });
      else if (!opts.json) process.stdout.write(text);
    };
    if (!opts.follow && opts.step === undefined && stream === "box" && !isSettled(t) && !existsSync(trialPaths(tdir).box)) {
      // box.log is written when the box goes: while it runs, its own output is read from the engine
      const live = await liveBoxLog(home, id);
      if (live === undefined) throw notRecorded(t, stream);
      if (opts.json) outJson({ trial_id: id, stream, recorded: true, live: true, files: [], text: live });
      else process.stdout.write(live);
      return 0;
    }
    const all = streamParts(tdir, t, stream, opts.step);
    // a multi-step trial's stream, read whole, says whose each part is
    const headed = opts.step === undefined && all.some((p) => p.step !== null);
    if (!opts.follow) {
      const parts = all.filter((p) => existsSync(p.file));
      if (parts.length === 0) throw notRecorded(t, stream);
      if (opts.json) return outJson(await logsDocument(tdir, t, stream, opts.step, parts)), 0;
      let bytes = 0;
      let lastByte = 10;
      for (const p of parts) {
        if (headed) process.stdout.write((lastByte === 10 ? "" : "\n") + stepHeader(p));
        await streamBoxFile(tdir, p.file, (b: Buffer) => {
          if (b.length === 0) return;
          bytes += b.length;
          lastByte = b[b.length - 1]!;
          process.stdout.write(b);
        });
      }
      // files that exist but hold nothing: said, never a silent exit 0
      if (bytes === 0) {
        const whose = parts.map((p) => (p.step === null ? "the current step" : `step ${p.step}`));
        process.stderr.write(`${style.dim(`(empty) trial ${id}'s ${stream} stream is empty${headed || opts.step !== undefined ? ` (${whose.join(", ")})` : ""}`)}\n`);
      }
      return 0;
    }
    // --follow: earlier steps whole, then tail the current file until the trial settles
    let printed = false;
    for (const p of all.slice(0, -1)) {
      if (!existsSync(p.file)) continue;
      if (headed && !opts.json) emit(stepHeader(p));
      await streamBoxFile(tdir, p.file, emitBytes);
      printed = true;
    }
    let offset = 0;
    let path = all.at(-1)!.file;
    let headerDue = headed && !opts.json;
    const drain = async () => {
      // the agent's file name is known only once it exists
      if (stream === "agent" && !existsSync(path)) path = streamParts(tdir, store.getTrial(id) ?? t, stream, opts.step).at(-1)!.file;
      const at = await streamBoxFile(tdir, path, (b) => {
        if (headerDue) emit(stepHeader(all.at(-1)!));
        headerDue = false;
        emitBytes(b);
        printed = true;
      }, offset);
      offset = at;
    };
    for (;;) {
      const now = store.getTrial(id) ?? t;
      await drain();
      if (isSettled(now)) {
        await drain();
        if (!printed) throw notRecorded(now, stream);
        return 0;
      }
      await sleep(200);
    }
  });
}

/** A live trial's agent box's own output, as the engine keeps it (the last 1 MiB); undefined when no box of it runs. */
async function liveBoxLog(home: string, id: string): Promise<string | undefined> {
  const engine = await openEngine({ home });
  try {
    const box = await findLiveBox(engine, id);
    return box ? (await engine.logs(box.id))?.text : undefined;
  } finally {
    await engine.close();
  }
}

// ---- files -----------------------------------------------------------------------------------------------------

type Source =
  | { kind: "live"; engine: Engine; box: { id: string; role: string }; trial: TrialRecord }
  | { kind: "kept"; manifest: KeptManifest; dir: string; trial: TrialRecord }
  | { kind: "none"; reason: string; trial: TrialRecord };

async function withSource<T>(id: string, engineKind: EngineKind | undefined, fn: (s: Source, home: string) => Promise<T>): Promise<T> {
  return withStore(async (store, home) => {
    const t = requireTrial(store, id);
    const dir = trialDir(home, t.id);
    if (!isSettled(t)) {
      const engine = await openEngine({ kind: engineKind, home });
      try {
        const box = await findLiveBox(engine, id);
        if (box) return await fn({ kind: "live", engine, box, trial: t }, home);
        return await fn({ kind: "none", reason: `the trial is ${t.status}${t.attempt_phase ? ` in phase ${t.attempt_phase}` : ""} and has no running box yet`, trial: t }, home);
      } finally {
        await engine.close();
      }
    }
    const manifest = await readManifest(dir);
    if (manifest) return fn({ kind: "kept", manifest, dir, trial: t }, home);
    return fn({ kind: "none", reason: `the trial settled ${t.status} without a kept tree (its box never ran to the end of the trial)`, trial: t }, home);
  });
}

function requireReadable(s: Source): asserts s is Exclude<Source, { kind: "none" }> {
  if (s.kind === "none") throw new EvolveError("files_unavailable", `trial ${s.trial.id} has no files to read: ${s.reason}`, "see `evolve trial files status <id>`");
}


/** `evolve trial files status <id>` */
export async function filesStatusCommand(arg: string, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  return withSource(arg, opts.engine, async (s) => {
    const id = s.trial.id;
    const doc: Record<string, unknown> = { trial_id: id, status: s.trial.status, source: s.kind };
    if (s.kind === "live") Object.assign(doc, { box: s.box.id, role: s.box.role });
    if (s.kind === "kept") {
      const m = s.manifest;
      Object.assign(doc, {
        dir: join(s.dir, "fs"),
        captured_at: m.captured_at,
        files: m.files.filter((f) => f.type === "file").length,
        deleted: m.files.filter((f) => f.kind === "deleted").length,
        kept_bytes: m.kept_bytes,
        cap_bytes: m.cap_bytes,
        cap_files: m.cap_files ?? null,
        changes_from: m.changes_from ?? "engine",
        ...(m.changes_note ? { changes_note: m.changes_note } : {}),
        excluded: m.excluded.length,
        skipped: m.skipped.length,
      });
    }
    if (s.kind === "none") doc.reason = s.reason;
    if (opts.json) return outJson(doc), 0;
    if (s.kind === "live") out(`trial ${id} is ${s.trial.status}: reading its live ${s.box.role} box ${s.box.id.slice(0, 12)}`);
    else if (s.kind === "kept") {
      out(`trial ${id} settled ${s.trial.status}: serving its kept tree (${doc.files} file(s), ${doc.deleted} deletion(s), ${s.manifest.kept_bytes} bytes, captured ${when(s.manifest.captured_at)})`);
      if (s.manifest.skipped.length) out(style.yellow(`${s.manifest.skipped.length} changed path(s) could not be kept; see \`evolve trial files changes ${id}\``));
      if (s.manifest.changes_note) out(style.yellow(s.manifest.changes_note));
      out(style.dim(UNTOUCHED_NOTE));
    } else out(`trial ${id}: no files to read: ${s.reason}`);
    return 0;
  });
}

/** `trial files ls`'s columns, the same for a live box and a kept tree. */
const LS_HEADER = ["CHANGE", "TYPE", "SIZE", "MODE", "PATH"];

/**
 * A path as `files ls` and `files changes` print it: absolute in the box (the same root for both, live or kept),
 * a folder with a trailing `/`, a link with its target.
 */
function pathCell(path: string, type?: string, target?: string): string {
  return `${path}${type === "dir" && path !== "/" ? "/" : ""}${target ? ` -> ${target}` : ""}`;
}

/** `evolve trial files ls <id> [path]` */
export async function filesLsCommand(arg: string, path: string | undefined, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  const p = boxPath(path);
  return withSource(arg, opts.engine, async (s) => {
    const id = s.trial.id;
    requireReadable(s);
    if (s.kind === "live") {
      const r = await boxList(s.engine, s.box.id, p);
      if (opts.json) return outJson({ trial_id: id, source: "live", path: p, entries: r.entries, ...(r.raw !== undefined ? { raw: r.raw } : {}) }), 0;
      if (r.raw !== undefined) return process.stdout.write(r.raw), 0;
      // the CHANGE column as the kept tree has it; an engine that cannot diff leaves it `-` rather than failing ls
      const changed = new Map((await boxChanges(s.engine, s.box.id).catch(() => [])).map((c) => [c.path, c.kind]));
      outTable(LS_HEADER, r.entries.map((e) => [changed.get(e.path), e.type, e.size, e.mode, pathCell(e.path, e.type)]));
      return 0;
    }
    const doc = keptLsDocument(id, s.manifest, p);
    const entries = doc.entries;
    if (opts.json) return outJson(doc), 0;
    if (entries.length) {
      outTable(LS_HEADER, entries.map((e) => [e.kind, e.type, e.size, e.mode, pathCell(e.path, e.type, e.target)]));
    } else out(`nothing under ${p} was changed by the run`);
    out(style.dim(UNTOUCHED_NOTE));
    return 0;
  });
}

/** `evolve trial files cat <id> <path>` */
export async function filesCatCommand(arg: string, path: string, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  const p = boxPath(path);
  return withSource(arg, opts.engine, async (s) => {
    const id = s.trial.id;
    requireReadable(s);
    let data: Buffer;
    if (s.kind === "live") data = (await boxReadFile(s.engine, s.box.id, p)).data;
    else data = await readKeptPath(id, s.dir, s.manifest, p);
    if (opts.json) outJson(catDocument(id, s.kind, p, data));
    else process.stdout.write(data);
    return 0;
  });
}

/**
 * `evolve trial files changes <id>`. `--json` on a kept tree: {trial, source: "kept", changes: KeptEntry[], excluded,
 * skipped: {path, kind, reason}[] (every path not kept, by name), kept_bytes, cap_bytes, cap_files, changes_from:
 * "engine" | "box", changes_note: string | null}; on a live box: {trial, source: "live", changes: {path, kind}[]}.
 */
export async function filesChangesCommand(arg: string, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  return withSource(arg, opts.engine, async (s) => {
    const id = s.trial.id;
    requireReadable(s);
    if (s.kind === "live") {
      const all = await boxChanges(s.engine, s.box.id);
      const changes = all.filter((c) => !exclusion(c.path));
      if (opts.json) return outJson({ trial_id: id, source: "live", changes }), 0;
      outTable(["CHANGE", "PATH"], changes.map((c) => [c.kind, c.path]));
      return 0;
    }
    const m = s.manifest;
    const changes = keptChanges(m);
    if (opts.json) return outJson(keptChangesDocument(id, m)), 0;
    if (m.changes_note) out(style.yellow(m.changes_note));
    if (changes.length === 0) out("the run changed no files (outside the paths left out below)");
    else outTable(["CHANGE", "TYPE", "SIZE", "SHA256", "PATH"], changes.map((f) => [f.kind, f.type, f.size, f.sha256?.slice(0, 12), pathCell(f.path, f.type, f.target)]));
    const notKept = skippedSummary(m.skipped);
    for (const line of notKept) out(style.yellow(`not kept: ${line}`));
    if (notKept.length < m.skipped.length) out(style.dim(`every path not kept, by name: evolve trial files changes ${id} --json | jq -r '.skipped[].path'`));
    for (const x of m.excluded) out(style.dim(`left out: ${x.path}: ${x.reason}`));
    return 0;
  });
}

/** `evolve trial files archive <id> [path | --path P] [-o DIR]`: a .tar.gz of one subtree. */
export async function filesArchiveCommand(
  arg: string,
  path: string | undefined,
  opts: { path?: string; output?: string; maxBytes?: number; json?: boolean; engine?: EngineKind },
): Promise<number> {
  // the subtree may be given positionally (as `ls` and `cat` take it) or as --path; two different ones are a mistake
  if (path !== undefined && opts.path !== undefined && path !== opts.path) {
    throw new EvolveError("usage", `two paths to archive: ${path} and --path ${opts.path}`, `give one: evolve trial files archive ${arg} ${path}`);
  }
  const p = boxPath(path ?? opts.path);
  const outDir = resolve(opts.output ?? ".");
  return withSource(arg, opts.engine, async (s) => {
    const id = s.trial.id;
    requireReadable(s);
    await mkdir(outDir, { recursive: true });
    const file = join(outDir, `${id}${p === "/" ? "" : `-${p.slice(1).replace(/\//g, "_")}`}.tar.gz`);
    if (s.kind === "live") {
      if (!(await archiveLive(s.engine, s.box.id, p, file, opts.maxBytes))) throw new EvolveError("file_not_found", `${p} does not exist in the live box`, "");
    } else {
      const has = s.manifest.files.some((e) => e.kind !== "deleted" && (p === "/" || e.path === p || e.path.startsWith(`${p}/`)));
      if (!has) throw new EvolveError("file_not_kept", `the run changed nothing under ${p}: the kept tree has nothing to archive there`, `see what changed: evolve trial files changes ${id}`);
      await archiveKept(s.dir, s.manifest, p, file);
    }
    const bytes = (await stat(file)).size;
    if (opts.json) outJson({ trial_id: id, source: s.kind, path: p, file, bytes });
    else out(`wrote ${file} (${bytes} bytes, ${s.kind === "live" ? "from the live box" : "the kept tree"} under ${p})`);
    return 0;
  });
}

// ---- procs -----------------------------------------------------------------------------------------------------

/** `evolve trial procs <id>` */
export async function procsCommand(arg: string, opts: { json?: boolean; engine?: EngineKind }): Promise<number> {
  return withStore(async (store, home) => {
    const t = requireTrial(store, arg);
    const id = t.id;
    if (isSettled(t)) {
      throw new EvolveError("trial_not_live", `trial ${id} settled ${t.status}: its box is gone, there are no processes to list`, `read what it left: evolve trial files changes ${id}`);
    }
    const engine = await openEngine({ kind: opts.engine, home });
    try {
      const box = await findLiveBox(engine, id);
      if (!box) throw new EvolveError("trial_not_live", `trial ${id} is ${t.status}${t.attempt_phase ? ` in phase ${t.attempt_phase}` : ""} and has no running box yet`, "try again once it boots");
      const procs = await boxProcesses(engine, box.id);
      if (opts.json) return outJson({ trial_id: id, box: box.id, role: box.role, processes: procs }), 0;
      outTable(["PID", "PPID", "USER", "ELAPSED", "COMMAND"], procs.map((p) => [p.pid, p.ppid, p.user, p.elapsed_sec === null ? "-" : formatDuration(p.elapsed_sec * 1000), p.command]));
      return 0;
    } finally {
      await engine.close();
    }
  });
}

