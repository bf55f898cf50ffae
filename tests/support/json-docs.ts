/**
 * docs/json.md as data, and the check that a printed `--json` document has exactly the keys documented there.
 * Used by tests/json-docs.test.ts (every command that runs without a container engine) and by the engine tests for
 * the commands that need one.
 *
 * The page's conventions: one `##`/`###` section per command (heading `` `evolve <command> --json` ``) or shared
 * shape, a table whose first column is a key path in backticks (`a.b`, `a[]` element, `a{}` map value, `?` at the
 * end: may be absent, `.`: include a shared shape here), a type column that may link a shared shape
 * (`[trial record](#trial-record)`, `…[]` for an array of them), and ```json / ```jsonl example blocks.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect } from "vitest";

/** One documented key. */
export interface DocKey {
  path: string;
  optional: boolean;
}

/** One section of docs/json.md. */
export interface DocSection {
  heading: string;
  slug: string;
  /** `job list` for `` `evolve job list --json` ``; undefined for a shared shape. */
  command?: string;
  text: string;
  rows: { path: string; optional: boolean; type: string }[];
  /** Each example block's documents (one per line for jsonl). */
  examples: unknown[][];
}

const DOC = resolve(__dirname, "..", "..", "docs", "json.md");

/** The heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to dashes. */
export function slug(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9 _-]/g, "").replace(/ /g, "-");
}

/** Parses docs/json.md into its sections. */
export function readDocs(file = DOC): DocSection[] {
  const md = readFileSync(file, "utf8");
  const sections: DocSection[] = [];
  let cur: DocSection | undefined;
  let fence: { lang: string; lines: string[] } | undefined;
  for (const line of md.split("\n")) {
    if (fence) {
      if (line.startsWith("```")) {
        const docs = fence.lang === "jsonl" ? fence.lines.filter((l) => l.trim()).map((l) => JSON.parse(l)) : [JSON.parse(fence.lines.join("\n"))];
        cur?.examples.push(docs);
        fence = undefined;
      } else fence.lines.push(line);
      continue;
    }
    const fenceOpen = /^```(json|jsonl)\s*$/.exec(line);
    if (fenceOpen) {
      fence = { lang: fenceOpen[1], lines: [] };
      continue;
    }
    const h = /^#{2,3} (.+)$/.exec(line);
    if (h) {
      const heading = h[1].trim();
      const cmd = /^`evolve (.+) --json`$/.exec(heading);
      cur = { heading, slug: slug(heading), command: cmd?.[1], text: "", rows: [], examples: [] };
      sections.push(cur);
      continue;
    }
    if (!cur) continue;
    cur.text += line + "\n";
    const row = /^\| `([^`]+)` \| (.*?) \|/.exec(line);
    if (row) {
      const optional = row[1].endsWith("?");
      cur.rows.push({ path: optional ? row[1].slice(0, -1) : row[1], optional, type: row[2] });
    }
  }
  return sections;
}

const join2 = (prefix: string, path: string) => (prefix === "" ? path : path.startsWith("[]") ? prefix + path : `${prefix}.${path}`);

/** Every key path a section documents, shared shapes expanded. */
export function documentedKeys(sections: DocSection[], section: DocSection, prefix = "", seen: string[] = []): Map<string, DocKey> {
  if (seen.includes(section.slug)) throw new Error(`docs/json.md: ${section.heading} includes itself`);
  const keys = new Map<string, DocKey>();
  for (const r of section.rows) {
    const here = r.path === "." ? prefix : join2(prefix, r.path);
    if (r.path !== ".") keys.set(here, { path: here, optional: r.optional });
    const link = /\]\(#([a-z0-9_-]+)\)(\[\])?/.exec(r.type);
    if (!link) continue;
    const target = sections.find((s) => s.slug === link[1]);
    if (!target) throw new Error(`docs/json.md: ${section.heading} links #${link[1]}, which no section has`);
    for (const [p, k] of documentedKeys(sections, target, link[2] ? `${here}[]` : here, [...seen, section.slug])) keys.set(p, k);
  }
  return keys;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** The key paths a document has (`printed`), and the object paths it has (`objects`: where required keys must be). */
export function printedKeys(docs: unknown[], documented: Map<string, DocKey>): { printed: Set<string>; objects: Set<string> } {
  const printed = new Set<string>();
  const objects = new Set<string>();
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) {
      for (const el of v) walk(el, `${path}[]`);
      return;
    }
    if (!isObject(v)) return;
    if (documented.has(`${path}{}`)) {
      for (const x of Object.values(v)) {
        printed.add(`${path}{}`);
        walk(x, `${path}{}`);
      }
      return;
    }
    objects.add(path);
    for (const [k, x] of Object.entries(v)) {
      const p = join2(path, k);
      printed.add(p);
      walk(x, p);
    }
  };
  for (const d of docs) walk(d, "");
  return { printed, objects };
}

/**
 * What differs between documents and their section: keys printed but not documented, and documented keys (not
 * optional) missing from an object that was printed. Both empty when the docs are true.
 */
export function compareKeys(sections: DocSection[], section: DocSection, docs: unknown[]): { undocumented: string[]; missing: string[] } {
  const documented = documentedKeys(sections, section);
  const { printed, objects } = printedKeys(docs, documented);
  const undocumented = [...printed].filter((p) => !documented.has(p)).sort();
  const missing = [...documented.values()]
    .filter((k) => !k.optional && !k.path.endsWith("{}"))
    .filter((k) => {
      const dot = k.path.lastIndexOf(".");
      const parent = dot === -1 ? (k.path.startsWith("[]") ? "[]" : "") : k.path.slice(0, dot);
      return objects.has(parent) && !printed.has(k.path);
    })
    .map((k) => k.path)
    .sort();
  return { undocumented, missing };
}

/** The section documenting `evolve <command> --json`. */
export function sectionFor(sections: DocSection[], command: string): DocSection | undefined {
  return sections.find((s) => s.command === command);
}

/** docs/json.md's path, for messages. */
export const JSON_DOC = join("docs", "json.md");

/** Asserts that `docs` (one document, or the lines of a stream) have exactly the keys listed for `evolve <command> --json`. */
export function expectDocumented(command: string, docs: unknown[]): void {
  const sections = readDocs();
  const section = sectionFor(sections, command);
  expect(section, `docs/json.md has no section \`evolve ${command} --json\``).toBeDefined();
  expect(compareKeys(sections, section!, docs), `docs/json.md: evolve ${command} --json`).toEqual({ undocumented: [], missing: [] });
}
