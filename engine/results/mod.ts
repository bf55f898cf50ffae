/**
 * Results out: Harbor job folders, downloads of jobs and trials.
 *
 * The room's public surface (issue 21 §5, in the Deno std manner): what commands use, by name. The rest of the
 * folder is private by convention; a command reaches it only through this file.
 */
export { downloadJob, downloadTrial } from "./download.ts";
export { jobFolderName } from "./ids.ts";
export { DEFAULT_JOBS_DIR, JobFolderWriter, clearTarget, exportJob, jobFolderFor } from "./job-folder.ts";
export { openJobFolder } from "./job-folder.ts";
export { getImport, IMPORT_STATUSES, listImports, putImport, type ImportRecord } from "./imports.ts";
export { runImport, startImport, uploadLimits } from "./upload.ts";
