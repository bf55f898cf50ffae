/**
 * `evolve trajectory validate`: argument handling and printing only.
 */
import { validateTrajectoryFile } from "../engine/trace/atif-file.ts";
import { out, outJson, reportError } from "./output.ts";

/** `evolve trajectory validate <file>`: `ok`, or one `PATH: message` line per finding and exit 1. */
export async function trajectoryValidateCommand(file: string, opts: { json?: boolean }): Promise<number> {
  let findings;
  try {
    findings = await validateTrajectoryFile(file);
  } catch (e) {
    return reportError(e);
  }
  if (opts.json) outJson({ ok: findings.length === 0, findings });
  else if (findings.length === 0) out("ok");
  else for (const f of findings) out(`${f.path}: ${f.message}`);
  return findings.length === 0 ? 0 : 1;
}
