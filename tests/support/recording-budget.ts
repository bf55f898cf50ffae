/**
 * A gateway Budget for app-level tests: it admits every call and records what the gateway reserved (the worst case
 * it asked for) and what it settled, unless `refuse` is set, which it answers instead.
 */
import type { Budget, Reservation } from "../../gateway/types.ts";

/** What the recording budget saw; reset it by assigning new values. */
export interface BudgetRecord {
  reservations: { worst: number | null; settled?: number | null }[];
  refuse: Reservation | undefined;
}

/** A budget that records reservations and settlements into `record`, or refuses with `record.refuse`. */
export function recordingBudget(): { budget: Budget; record: BudgetRecord } {
  const record: BudgetRecord = { reservations: [], refuse: undefined };
  const budget: Budget = {
    reserve(_cred, worst) {
      if (record.refuse) return record.refuse;
      record.reservations.push({ worst });
      return { ok: true, id: String(record.reservations.length - 1), reservedUsd: worst ?? 0 };
    },
    settle(id, actual) {
      record.reservations[Number(id)]!.settled = actual;
    },
  };
  return { budget, record };
}
