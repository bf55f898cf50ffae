/**
 * check_spec: what makes a folder a complete adapter. The proposer runs it on each candidate before it finishes, and
 * the evolver runs it again on what the proposer left, so a candidate is judged by the same rules twice. The rules
 * ({@link SPEC_RULES}) are few on purpose: the template declares no structure, so the check is only what keeps a
 * candidate safe to copy and usable by the agent. Problems are one line each, `<path>: <what>`, and their wording is
 * stable (tests pin it; a proposer reads it).
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, type Stats } from "node:fs";
import { join } from "node:path";
import { readOpenFile } from "../regular-file.ts";
import { MAX_AGENT_BYTES, MAX_AGENT_FILES } from "../conductor/layout.ts";
import { EvolveError } from "../errors.ts";
import { ADAPTER_MD, HERMIT_DIR } from "./layout.ts";
import { kindOf } from "../eval/tree.ts";

/** The rules check_spec applies, as the proposer's guide (EVOLVER.md) states them. */
export const SPEC_RULES = [
  "The candidate is a real directory of its own (not a symbolic link).",
  "It holds only plain files and directories: no symbolic link, FIFO, socket or device anywhere.",
  `${ADAPTER_MD} is a non-empty regular file of UTF-8 text.`,
  `At most ${MAX_AGENT_FILES} files and ${MAX_AGENT_BYTES / 1024 / 1024} MiB in all.`,
  "Every file and directory name is printable: no control characters, valid UTF-8.",
  `${HERMIT_DIR}/ may be left out; when present it must be exactly the template's (it is always replaced with the template's).`,
] as const;

/** What check_spec found: `ok` when `problems` is empty. */
export interface SpecResult {
  ok: boolean;
  problems: string[];
}

/** Options of {@link checkSpec}. */
export interface SpecOptions {
  /** A template folder (holding `.hermit/`): a candidate's `.hermit/`, when present, must equal it. */
  template?: string;
  /** How problems about the folder itself name it (default: `dir` as given); the evolver passes the entry's name. */
  name?: string;
}

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** A name a person can read and a shell prints as it is: no C0/C1 control characters, and nothing lost in decoding. */
function printable(name: string): boolean {
  return !/[\u0000-\u001f\u007f-\u009f\ufffd]/.test(name);
}

/** A name as a problem shows it: JSON-quoted when it is not printable, so the line stays one line. */
export function shown(rel: string): string {
  return printable(rel) ? rel : JSON.stringify(rel);
}

/** The bytes of the plain file `path` (never through a link), or undefined when it is not one. */
function readPlain(path: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, READ_FLAGS);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return undefined;
    return readOpenFile(fd, st.size);
  } finally {
    closeSync(fd);
  }
}

/** Whether `data` is valid UTF-8 (a fatal decoder: web standard, so it runs under Bun too). */
export function isUtf8(data: Uint8Array): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(data);
    return true;
  } catch {
    return false;
  }
}

/** The plain files under `dir` (relative path → bytes), or a problem when something else is there. */
function readHermit(dir: string): Map<string, Buffer> | string {
  const out = new Map<string, Buffer>();
  const walk = (abs: string, rel: string): string | undefined => {
    for (const name of readdirSync(abs).sort()) {
      const p = join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(p);
      if (st.isDirectory()) {
        const bad = walk(p, r);
        if (bad) return bad;
      } else if (st.isFile()) {
        const data = readPlain(p);
        if (!data) return `${r}: not a plain file`;
        out.set(r, data);
      } else return `${r}: is ${kindOf(st, "not a plain file or directory")}`;
      if (out.size > MAX_AGENT_FILES) return `more than ${MAX_AGENT_FILES} files`;
    }
    return undefined;
  };
  const bad = walk(dir, "");
  return bad ?? out;
}

/**
 * Checks the folder `dir` against {@link SPEC_RULES}. Never follows a link and never opens anything but plain files,
 * so a hostile candidate (a FIFO, a link out of the sandbox) cannot hang or mislead it.
 */
export function checkSpec(dir: string, opts: SpecOptions = {}): SpecResult {
  // `link/` would have lstat follow the link: the folder is judged as named, without a trailing slash
  dir = dir.replace(/(.)\/+$/, "$1");
  const problems: string[] = [];
  const self = shown(opts.name ?? dir);
  let top: Stats;
  try {
    top = lstatSync(dir);
  } catch {
    return { ok: false, problems: [`${self}: does not exist`] };
  }
  if (top.isSymbolicLink()) return { ok: false, problems: [`${self}: is a symbolic link, not a directory of its own`] };
  if (!top.isDirectory()) return { ok: false, problems: [`${self}: is not a directory`] };

  let files = 0;
  let bytes = 0;
  let over = false;
  const walk = (abs: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(abs).sort();
    } catch (e) {
      problems.push(`${shown(rel || ".")}: cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`);
      return;
    }
    for (const name of names) {
      if (over) return;
      const p = join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      if (!printable(name)) problems.push(`${shown(r)}: name is not printable (control characters or not UTF-8)`);
      const st = lstatSync(p);
      if (st.isDirectory()) walk(p, r);
      else if (st.isFile()) {
        files++;
        bytes += st.size;
        if (files > MAX_AGENT_FILES) {
          problems.push(`more than ${MAX_AGENT_FILES} files`);
          over = true;
        }
      } else problems.push(`${shown(r)}: is ${kindOf(st, "not a plain file or directory")}`);
    }
  };
  walk(dir, "");
  if (bytes > MAX_AGENT_BYTES) problems.push(`more than ${MAX_AGENT_BYTES / 1024 / 1024} MiB in all (${bytes} bytes)`);

  const adapter = lstatOrNone(join(dir, ADAPTER_MD));
  if (!adapter) problems.push(`${ADAPTER_MD}: missing (the agent's instructions)`);
  else if (!adapter.isFile()) {
    // a link or special file there is already named above; a directory is not
    if (adapter.isDirectory()) problems.push(`${ADAPTER_MD}: not a regular file`);
  } else {
    const data = readPlain(join(dir, ADAPTER_MD));
    if (!data) problems.push(`${ADAPTER_MD}: not a regular file`);
    else if (data.length === 0 || data.toString("utf8").trim() === "") problems.push(`${ADAPTER_MD}: empty`);
    else if (!isUtf8(data)) problems.push(`${ADAPTER_MD}: not UTF-8 text`);
  }

  if (opts.template !== undefined) {
    const hermit = lstatOrNone(join(dir, HERMIT_DIR));
    if (hermit?.isDirectory()) {
      const mine = readHermit(join(dir, HERMIT_DIR));
      const theirs = templateHermit(opts.template);
      if (typeof mine === "string") problems.push(`${HERMIT_DIR}/${mine}`);
      else {
        for (const [rel, data] of theirs) {
          const got = mine.get(rel);
          if (!got) problems.push(`${HERMIT_DIR}/${rel}: missing (${HERMIT_DIR}/ must be the template's, or left out)`);
          else if (!got.equals(data)) problems.push(`${HERMIT_DIR}/${rel}: differs from the template's`);
        }
        for (const rel of mine.keys()) if (!theirs.has(rel)) problems.push(`${HERMIT_DIR}/${shown(rel)}: not in the template`);
      }
    } else if (hermit && hermit.isFile()) problems.push(`${HERMIT_DIR}: not a directory`);
  }
  return { ok: problems.length === 0, problems };
}

/**
 * The template folder's `.hermit/` files, relative path → bytes; a template without a plain `.hermit/` folder is
 * metaharness_template_invalid (the run's setup is at fault, not a candidate).
 */
export function templateHermit(template: string): Map<string, Buffer> {
  const st = lstatOrNone(join(template, HERMIT_DIR));
  if (!st?.isDirectory()) {
    throw new EvolveError("metaharness_template_invalid", `${template} holds no ${HERMIT_DIR}/ folder`, "give the template folder (the one holding .hermit/manifest.json and .hermit/EVOLVER.md)");
  }
  const files = readHermit(join(template, HERMIT_DIR));
  if (typeof files === "string") throw new EvolveError("metaharness_template_invalid", `the template's ${HERMIT_DIR}/${files}`, "a template holds only plain files");
  return files;
}

function lstatOrNone(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}
