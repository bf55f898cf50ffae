/**
 * The one place an id typed on the command line becomes a stored id. Every command that takes a job or trial id
 * resolves it here, so every command accepts the same short forms and refuses them the same way.
 *
 * - A job id argument names the job whose id starts with it.
 * - A trial id argument names the trial whose id starts with it, or ends with it. Ids are time-ordered (ids.ts):
 *   the trials of one job are made in the same millisecond and share their first ~24 characters, so a job's trials
 *   differ only in their last few; typing those last characters (`trial show 7QX`) picks one out. A string that is
 *   the start of one trial's id and the end of another's is ambiguous like any other.
 * - The whole id is always exact (no scan). No match: `job_not_found` / `trial_not_found`. More than one:
 *   `id_ambiguous`, naming a few of the candidates.
 */
import { EvolveError } from "../errors.ts";
import type { JobRecord, TrialRecord } from "./records.ts";
import type { Store } from "./store.ts";

/** How many candidates an `id_ambiguous` error names. */
const SHOWN = 5;

function clean(arg: string, what: string): string {
  const id = arg.trim();
  if (id === "") throw new EvolveError("usage", `the ${what} id is empty`, `see \`evolve ${what === "job" ? "job list" : "job show <job-id>"}\` for ids`);
  return id;
}

/** `matches` holds at most SHOWN + 1 ids: one more than is named tells "more than SHOWN" apart. */
function ambiguous(what: "job" | "trial", arg: string, matches: string[]): EvolveError {
  const many = matches.length > SHOWN ? `more than ${SHOWN}` : String(matches.length);
  return new EvolveError(
    "id_ambiguous",
    `${what} id ${arg} matches ${many} ${what}s: ${matches.slice(0, SHOWN).join(", ")}${matches.length > SHOWN ? ", …" : ""}`,
    what === "job" ? "type more of the id's start (see `evolve job list`)" : "type more of the trial id's start or end (see `evolve job show <job-id>`)",
  );
}

/** The full id of the one job `arg` names (the whole id or a unique prefix of it). */
export function resolveJobId(store: Store, arg: string): string {
  const id = clean(arg, "job");
  if (store.getJob(id)) return id;
  const matches = store.idsWithPrefix("jobs", id, SHOWN + 1);
  if (matches.length === 1) return matches[0];
  if (matches.length === 0) throw new EvolveError("job_not_found", `no job ${id}`, "see `evolve job list`");
  throw ambiguous("job", id, matches);
}

/** The full id of the one trial `arg` names (the whole id, or a unique start or end of it). */
export function resolveTrialId(store: Store, arg: string): string {
  const id = clean(arg, "trial");
  if (store.getTrial(id)) return id;
  const matches = [...new Set([...store.idsWithPrefix("trials", id, SHOWN + 1), ...store.trialIdsEndingWith(id, SHOWN + 1)])];
  if (matches.length === 1) return matches[0];
  if (matches.length === 0) throw new EvolveError("trial_not_found", `no trial ${id}`, "see `evolve job show <job-id>` for trial ids");
  throw ambiguous("trial", id, matches.sort());
}

/** The job `arg` names, read. */
export function resolveJob(store: Store, arg: string): JobRecord {
  return store.getJob(resolveJobId(store, arg))!;
}

/** The trial `arg` names, read. */
export function resolveTrial(store: Store, arg: string): TrialRecord {
  return store.getTrial(resolveTrialId(store, arg))!;
}
