/**
 * The registry of EvolveError codes (engine/error-codes.ts): every code a user can see is registered, spelt the
 * way scripts match it, documented in one line, and gives the exit status the registry says.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { DatasetInvalidError } from "../engine/dataset.ts";
import { ERROR_CODES, type ErrorCodeInfo, isErrorCode } from "../engine/error-codes.ts";
import { EvolveError } from "../engine/errors.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const registry: Record<string, ErrorCodeInfo> = ERROR_CODES;

/** Every .ts file under the folders that raise EvolveErrors, plus main.ts. */
function sources(): string[] {
  const out = ["main.ts"];
  const walk = (dir: string) => {
    for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      // a test beside the code is no source of errors a user meets
      else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts")) out.push(rel);
    }
  };
  for (const d of ["engine", "commands", "gateway"]) walk(d);
  return out;
}

/** Index just past the string or template literal that starts at `i` (templates may nest `${...}`). */
function skipString(src: string, i: number): number {
  const quote = src[i++];
  while (i < src.length) {
    if (src[i] === "\\") i += 2;
    else if (quote === "`" && src.startsWith("${", i)) i = skipTo(src, i + 2);
    else if (src[i++] === quote) return i;
  }
  return i;
}

/** Index just past the bracket that closes the one opened before `i`; `args` collects the top-level arguments. */
function skipTo(src: string, i: number, args?: string[]): number {
  let depth = 0;
  let from = i;
  while (i < src.length) {
    const c = src[i];
    if (c === '"' || c === "'" || c === "`") {
      i = skipString(src, i);
      continue;
    }
    if ("([{".includes(c)) depth++;
    else if (")]}".includes(c) && depth-- === 0) {
      if (src.slice(from, i).trim()) args?.push(src.slice(from, i).trim());
      return i + 1;
    } else if (c === "," && depth === 0) {
      args?.push(src.slice(from, i).trim());
      from = i + 1;
    }
    i++;
  }
  return i;
}

/** Every `new EvolveError(...)` (and subclass `super("code", ...)`) in the sources: where, its code text and its exit text. */
function raises(): { at: string; code: string; exit?: string }[] {
  const out: { at: string; code: string; exit?: string }[] = [];
  for (const file of sources()) {
    const src = readFileSync(join(root, file), "utf8");
    for (const m of src.matchAll(/new EvolveError\(|super\((?=\s*"[a-z_]+")/g)) {
      const args: string[] = [];
      skipTo(src, m.index + m[0].length, args);
      out.push({ at: `${file}:${src.slice(0, m.index).split("\n").length}`, code: args[0], exit: args[3] });
    }
  }
  return out;
}

describe("error code registry", () => {
  it("spells every code in snake_case and gives it an exit status and a one-line summary", () => {
    expect(Object.keys(registry).length).toBeGreaterThan(50);
    for (const [code, info] of Object.entries(registry)) {
      expect(code).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
      expect([1, 2], code).toContain(info.exit);
      expect(info.summary, code).toMatch(/^\S.*[^.\s]$/);
      expect(info.summary.includes("\n"), code).toBe(false);
      if (info.otherExit !== undefined) expect(info.otherExit, code).toMatch(/^\S.*[^.\s]$/);
    }
  });

  it("registers every code the README documents", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    // error[CODE] in upper case is the convention's placeholder, not a code
    const documented = [...readme.matchAll(/error\[([a-z0-9_]+)\]/g)].map((m) => m[1]);
    expect(documented.length).toBeGreaterThan(0);
    for (const code of documented) expect(isErrorCode(code), `README's error[${code}]`).toBe(true);
  });

  it("registers no code that nothing raises", () => {
    const text = sources()
      .filter((f) => f !== "engine/error-codes.ts")
      .map((f) => readFileSync(join(root, f), "utf8"))
      .join("\n");
    for (const code of Object.keys(registry)) expect(text.includes(`"${code}"`), code).toBe(true);
  });

  it("passes an explicit exit only where it differs from the registry's, and only on codes that say why", () => {
    const found = raises();
    expect(found.length).toBeGreaterThan(100);
    const differing = new Set<string>();
    for (const r of found) {
      if (r.exit === undefined) continue;
      const code = /^"([a-z_]+)"$/.exec(r.code)?.[1];
      expect(code, `${r.at}: an explicit exit needs a literal code to check it against`).toBeDefined();
      expect(Number(r.exit), `${r.at}: ${code} passes its registered exit; leave it to the registry`).not.toBe(registry[code!].exit);
      expect(registry[code!].otherExit, `${r.at}: ${code} exits ${r.exit}; say why in its otherExit`).toBeDefined();
      differing.add(code!);
    }
    for (const [code, info] of Object.entries(registry)) {
      if (info.otherExit !== undefined) expect(differing.has(code), `${code} has an otherExit no call site uses`).toBe(true);
    }
  });

  it("gives an error the exit status of its code unless the thrower says otherwise", () => {
    expect(new EvolveError("usage", "x").exit).toBe(2);
    expect(new EvolveError("task_invalid", "x").exit).toBe(1);
    expect(new EvolveError("build_failed", "x").exit).toBe(1);
    expect(new EvolveError("build_failed", "x", "", 2).exit).toBe(2);
    const e = new DatasetInvalidError([{ ok: false } as never]);
    expect([e instanceof EvolveError, e.code, e.exit, e.name]).toEqual([true, "dataset_invalid", 1, "DatasetInvalidError"]);
  });
});
