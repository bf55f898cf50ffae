/**
 * The documents `job show --json` and `trial show --json` print, built here once so that the CLI and the local API
 * (engine/serve) answer the same record with the same document (docs/json.md); callers pass them through jsonKeys.
 */
import { jobConfig } from "./job.ts";
import { jobSpend, summarizeJob, trialSpendFields } from "./summary.ts";
import { trialDir, type JobRecord, type Store, type TrialRecord } from "../store/index.ts";
import { tokenCounts } from "../trial/tokens.ts";

/** The provider an uploaded job (`evolve upload`, engine/results) shows: its trials ran elsewhere. */
export const PORTED_PROVIDER = "ported";

/**
 * `job show`'s document: the whole job's summary plus `spend` (the job's ledger lanes), its `config` and its
 * `trials`, narrowed to the statuses in `only` when given (the summary stays the whole job's).
 */
export function jobShowDocument(store: Store, job: JobRecord, only?: readonly string[]) {
  const trials = store.listTrials(job.id);
  const summary = summarizeJob(job, trials);
  const spend = jobSpend(trials, { agent: store.getSpend("job", job.id, "agent"), judge: store.getSpend("job", job.id, "judge") });
  const shown = only ? trials.filter((t) => only.includes(t.status)) : trials;
  // an uploaded job ran elsewhere: `ported` is its provider, and where it came from rides along
  const uploaded = job.upload ? { provider: PORTED_PROVIDER, upload: job.upload } : {};
  const folder = job.folder !== undefined ? { folder: job.folder } : {};
  return { summary, trials, shown, spend, document: { ...summary, ...uploaded, spend, ...folder, config: jobConfig(job), trials: shown } };
}

/**
 * `trial show`'s document: the stored record with its tokens as every reader counts them, its folder as `dir`, and
 * the API's spend names (trialSpendFields).
 */
export function trialShowDocument(home: string, t: TrialRecord) {
  return { ...t, ...(t.tokens ? { tokens: tokenCounts(t.tokens) } : {}), dir: trialDir(home, t.id), ...trialSpendFields(t) };
}
