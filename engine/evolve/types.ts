/**
 * The evolver's records and the contracts between its modules. Everything here is written to disk as JSON under the
 * project's `evolve/` folder (beside the live `.agent/`), so a person or an agent can read a round's whole story:
 *
 * ```
 * <project>/
 *   .agent/                              the live harness (engine/conductor/layout.ts)
 *   evolve/evals/*.json                  task cards (TaskCard, engine/eval/types.ts)
 *   evolve/runner.json                   how one card runs against an overlay (RunnerConfig, engine/eval/types.ts)
 *   evolve/candidates/<id>/descriptor.json, files/…    scaffolded candidates (Descriptor)
 *   evolve/screens/<screen-id>/screen.json             one screen (ScreenRecord), overlays/ and attempts/
 *   evolve/rounds/<n>/round.json                       one round (RoundRecord): resumable state
 *   evolve/genebank.jsonl                one GeneBankEntry per line, the newest entry of a cell wins
 *   evolve/backups/<timestamp>/          what `install` replaced (InstallRecord in install.json)
 * ```
 */
import type { Attempt, GateResult, PairedStats, SignTestEvidence } from "../eval/types.ts";

/** Where a candidate changes the harness. */
export const WHERE = ["prompt", "knowledge", "runtime", "config"] as const;
export type Where = (typeof WHERE)[number];

/** `evolve/candidates/<id>/descriptor.json`. */
export interface Descriptor {
  id: string;
  /** The harness it was made from: "live" or a candidate id. */
  parent: string;
  where: Where;
  pathology: string;
  hypothesis: string;
  activation: { marker: string | null };
  created_at: string;
  /**
   * `.agent/`-relative paths (files or folders) this candidate removes from its parent's harness, applied before its
   * `files/` are laid over; absent means none (candidate.ts).
   */
  deleted?: string[];
}

/** What one candidate's screen measured and decided. */
export interface CandidateScreen {
  candidate: string;
  parent: string;
  attempts: { candidate: Attempt[]; parent: Attempt[] };
  gates: { validity: GateResult; activation: GateResult; paired_gain: GateResult };
  stats: PairedStats;
  /** The exact sign test's verdict on the same pairs (absent in records written before it was kept). */
  sign_test?: SignTestEvidence;
  passed: boolean;
  cost: { rollouts: number; wall_sec: number; cost_usd: number };
}

/** `evolve/screens/<id>/screen.json`. */
export interface ScreenRecord {
  id: string;
  at: string;
  /** The fixed sample: card ids or task names, the same for every candidate of the round. */
  sample: string[];
  /** The seed the sample was drawn with (a drawn sample is redrawn the same from it). */
  seed?: string;
  /** "cards" or a dataset `name@version`. */
  source: string;
  /** For dataset screens, the job id of each harness's job. */
  jobs?: Record<string, string>;
  candidates: CandidateScreen[];
  /** Limits the record carries, stated (two cards are a smoke test; overlays leak what a task writes outside .agent/). */
  limits: string[];
}

/** One line of `evolve/genebank.jsonl`. */
export interface GeneBankEntry {
  where: Where;
  pathology: string;
  harness_id: string;
  /** pass@1 over all cards. */
  utility: number;
  /** Ids from the original harness down to this one. */
  lineage: string[];
  round: number;
  at: string;
}

/** `evolve/rounds/<n>/round.json`: written after every stage, so a killed round resumes where it stopped. */
export interface RoundRecord {
  round: number;
  stage: "screen" | "utility" | "holdout" | "genebank" | "done";
  candidates: string[];
  screen_id?: string;
  /** Candidate id → pass@1 over all cards. */
  utility: Record<string, number>;
  /** The parent's pass@1 over all cards. */
  parent_utility?: number;
  holdout?: { source: string; results: Record<string, PairedStats & { held: boolean }> };
  confirmed: string[];
  rejected: Record<string, string>;
  /** Rollouts, wall time and gateway spend of each stage that ran harnesses (screen, utility, holdout). */
  cost?: Partial<Record<"screen" | "utility" | "holdout", { rollouts: number; wall_sec: number; cost_usd: number }>>;
  /** What the gene bank said to each confirmed candidate offered to it (a held-out failure is not offered). */
  genebank?: Record<string, { accepted: boolean; reason: string }>;
  stop?: "stagnation" | "max_rounds" | null;
}
