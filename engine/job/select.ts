/**
 * Which of a run's tasks become trials: `--task-name` / `--exclude-task-name` globs (Harbor's `-i`/`-x`), then
 * `-l` (the first N of what is left). One place, so `run`, `check` and a run config file select the same way.
 */
import { EvolveError } from "../errors.ts";

/**
 * A glob as a whole-name pattern: `*` any run of characters (`/` included, as Harbor's fnmatch), `?` one
 * character, `[abc]` / `[!abc]` one of (or none of) a set; anything else is literal.
 */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*") re += ".*";
    else if (c === "?") re += ".";
    else if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end < 0) re += "\\[";
      else {
        let set = glob.slice(i + 1, end);
        const negate = set.startsWith("!");
        if (negate) set = set.slice(1);
        re += `[${negate ? "^" : ""}${set.replace(/[\\\]^]/g, (m) => `\\${m}`)}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\\]]/g, (m) => `\\${m}`);
  }
  return new RegExp(`^${re}$`, "s");
}

/** What a run asks for: globs to keep (any of them; none = every task), globs to drop, then at most `limit`. */
export interface TaskSelection {
  include?: readonly string[];
  exclude?: readonly string[];
  limit?: number;
}

/**
 * The tasks `sel` keeps, in their order. Refuses a selection that keeps none (`job_empty`), naming the globs and
 * how many tasks they were matched against, before anything is recorded or an engine opened.
 */
export function selectTasks<T extends { name: string }>(tasks: readonly T[], sel: TaskSelection): T[] {
  const inc = (sel.include ?? []).map(globToRegExp);
  const exc = (sel.exclude ?? []).map(globToRegExp);
  let kept = tasks.filter((t) => (inc.length === 0 || inc.some((r) => r.test(t.name))) && !exc.some((r) => r.test(t.name)));
  if (sel.limit !== undefined) kept = kept.slice(0, sel.limit);
  if (kept.length === 0 && tasks.length > 0 && (inc.length > 0 || exc.length > 0)) {
    const said = [...(sel.include ?? []).map((g) => `--task-name ${g}`), ...(sel.exclude ?? []).map((g) => `--exclude-task-name ${g}`)].join(", ");
    throw new EvolveError(
      "job_empty",
      `no task is left after ${said} (of ${tasks.length} task${tasks.length === 1 ? "" : "s"}: ${tasks.slice(0, 5).map((t) => t.name).join(", ")}${tasks.length > 5 ? ", …" : ""})`,
      "globs match whole task names: * any characters, ? one, [abc] one of; see `evolve dataset show` for the names",
    );
  }
  return kept;
}
