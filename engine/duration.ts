/**
 * How a duration reads wherever evolve prints one for people (tables, messages, errors): `250ms` under a second,
 * `16.6s` under a minute, `2m05s` under an hour, `1h02m` beyond. One form everywhere, so neither Go's
 * `16.569293403s` nor `125.0s` nor `600 s` reaches a user. JSON keeps plain numbers (`*_sec`).
 */

/** `ms` as the one human form; `-` when unknown. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return "-";
  if (Math.round(ms) < 1000) return `${Math.round(ms)}ms`;
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return `${(tenths / 10).toFixed(1)}s`;
  const secs = Math.round(ms / 1000);
  if (secs < 3600) return `${Math.floor(secs / 60)}m${String(secs % 60).padStart(2, "0")}s`;
  const mins = Math.round(ms / 60_000);
  return `${Math.floor(mins / 60)}h${String(mins % 60).padStart(2, "0")}m`;
}
