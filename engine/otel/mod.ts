/**
 * OpenTelemetry export of settled trials and their traces (decides nothing).
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { exportTrials, liveExporter, resolveTarget, selectForExport, shownUrl } from "./export.ts";
export type { OtlpOptions, OtlpTarget } from "./export.ts";
