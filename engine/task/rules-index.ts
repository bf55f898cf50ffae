/**
 * `verifier_needs_index`: a verifier that resolves packages at run time (`uvx <pkg>`, or `uv run` of a script
 * whose PEP-723 header lists dependencies) cannot work in a no-network verifier box, where only `rewardkit` and
 * `litellm` resolve, and only on a judge task (platform-tasks.md, "Not supported").
 */
import { join } from "node:path";
import { parse } from "smol-toml";
import { readText, walkFiles } from "./files.ts";
import { type Findings, showList } from "./findings.ts";

/** Packages the no-network verifier box can resolve on a judge task (PEP 503 names; rewardkit ships on PyPI as harbor-rewardkit). */
export const JUDGE_PACKAGES = new Set(["rewardkit", "harbor-rewardkit", "litellm"]);

/** The distribution name of a requirement (`pytest==8.4.1`, `foo[bar]>=1`, `pkg@1.0`) normalised per PEP 503. */
export function requirementName(req: string): string {
  const m = /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)/.exec(req);
  return (m ? m[1] : req).toLowerCase().replace(/[-_.]+/g, "-");
}

/** Dependencies declared by a PEP-723 `# /// script` block, or undefined when the file has none. */
export function pep723Dependencies(text: string): string[] | undefined {
  const lines = text.split(/\r?\n/);
  const start = lines.findIndex((l) => /^# \/\/\/ script\s*$/.test(l));
  if (start < 0) return undefined;
  const body: string[] = [];
  for (let i = start + 1; i < lines.length; i++) {
    if (/^# \/\/\/\s*$/.test(lines[i])) break;
    if (!/^#( |$)/.test(lines[i])) return undefined; // not a well-formed block: uv ignores it too
    body.push(lines[i].replace(/^# ?/, ""));
  }
  try {
    const deps = (parse(body.join("\n")) as Record<string, unknown>).dependencies;
    return Array.isArray(deps) ? deps.filter((d): d is string => typeof d === "string") : [];
  } catch {
    // a header uv cannot read fails at run time anyway; read its dependency strings leniently
    const m = /dependencies\s*=\s*\[([\s\S]*?)\]/.exec(body.join("\n"));
    return m ? [...m[1].matchAll(/["']([^"']+)["']/g)].map((x) => x[1]) : [];
  }
}

const UVX_VALUE_OPTS = new Set([
  "--with", "-w", "--from", "--python", "-p", "--index", "--index-url", "-i", "--extra-index-url",
  "--with-requirements", "--with-editable", "--constraints", "-c", "--overrides", "--build-constraints",
  "--cache-dir", "--directory", "--project", "--config-file", "--env-file",
]);

/** One `uvx` (or `uv tool run`) call and the packages it would resolve. */
export interface UvxCall {
  line: number;
  packages: string[];
  offline: boolean;
}

/** Finds `uvx …` / `uv tool run …` calls in a script and the packages each resolves. */
export function uvxCalls(text: string): UvxCall[] {
  const calls: UvxCall[] = [];
  // join `\` continuations so a call spread over lines is read whole, keeping its first line's number
  const logical: { text: string; line: number }[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split(/\r?\n/).forEach((raw, i) => {
    const body = raw.replace(/(^|\s)#.*$/, "");
    const cont = /\\\s*$/.test(body);
    const piece = body.replace(/\\\s*$/, " ");
    pending = pending ? { text: pending.text + piece, line: pending.line } : { text: piece, line: i + 1 };
    if (!cont) {
      logical.push(pending);
      pending = undefined;
    }
  });
  if (pending) logical.push(pending);
  logical.forEach(({ text: line, line: lineNo }) => {
    const words = line.split(/[\s;&|()`"']+/).filter((w) => w.length > 0);
    for (let w = 0; w < words.length; w++) {
      let j: number;
      if (words[w] === "uvx" || words[w].endsWith("/uvx")) j = w + 1;
      else if (words[w] === "uv" && words[w + 1] === "tool" && words[w + 2] === "run") j = w + 3;
      else continue;
      const packages: string[] = [];
      let offline = false;
      let from: string | undefined;
      for (; j < words.length; j++) {
        const t = words[j];
        if (t === "--offline") offline = true;
        const [opt, inline] = t.split("=", 2);
        if (UVX_VALUE_OPTS.has(opt)) {
          const v = inline ?? words[++j];
          if (v !== undefined && (opt === "--with" || opt === "-w")) packages.push(...v.split(",").map(requirementName));
          if (v !== undefined && opt === "--from") from = requirementName(v);
          continue;
        }
        if (t.startsWith("-")) continue;
        packages.push(from ?? requirementName(t));
        break;
      }
      calls.push({ line: lineNo, packages, offline });
      // the words this call consumed are its own (`--with uvx` names a package, not a second call); resuming after
      // them keeps the scan linear, where rescanning from every `uvx` word was quadratic in time and memory
      w = Math.max(w, j);
    }
  });
  return calls;
}

/** Checks every file under tests/ and steps/<name>/tests/; call only when the verifier is no-network. */
export async function checkVerifierIndex(dir: string, stepNames: readonly string[], judge: boolean, out: Findings): Promise<void> {
  const roots = [join(dir, "tests"), ...stepNames.map((s) => join(dir, "steps", s, "tests"))];
  const allowed = judge ? JUDGE_PACKAGES : new Set<string>();
  const files: string[] = [];
  for (const r of roots) files.push(...(await walkFiles(r, dir)));
  let usesUvRun: { file: string; line: number } | undefined;
  const headers: { file: string; line: number; deps: string[] }[] = [];
  for (const f of files) {
    const text = await readText(join(dir, f), 256 * 1024);
    if (text === undefined) continue;
    const lines = text.split(/\r?\n/);
    const uvLine = lines.findIndex((l) => /(^|[\s;&|(`])(uv\s+run|uvx|uv\s+tool\s+run)\b/.test(l.replace(/(^|\s)#.*$/, "")));
    if (uvLine >= 0 && usesUvRun === undefined) usesUvRun = { file: f, line: uvLine + 1 };
    for (const call of uvxCalls(text)) {
      const missing = [...new Set(call.packages.filter((p) => !allowed.has(p)))];
      if (call.offline || missing.length === 0) continue;
      out.add(
        "verifier_needs_index",
        f,
        `\`uvx\` fetches ${showList(missing, "")} from a package index, but the verifier runs with network_mode = "no-network"`,
        "install the tools in the image (tests/Dockerfile for a separate verifier, else environment/), or give the verifier network access",
        call.line,
      );
    }
    if (f.endsWith(".py")) {
      const deps = pep723Dependencies(text);
      const start = lines.findIndex((l) => /^# \/\/\/ script\s*$/.test(l));
      if (deps !== undefined) headers.push({ file: f, line: start + 1, deps });
    }
  }
  if (usesUvRun === undefined) return;
  for (const h of headers) {
    const missing = [...new Set(h.deps.map(requirementName).filter((p) => !allowed.has(p)))];
    if (missing.length === 0) continue;
    out.add(
      "verifier_needs_index",
      h.file,
      `the PEP-723 header needs ${showList(missing, "")} from a package index (run via uv at ${usesUvRun.file}:${usesUvRun.line}), but the verifier runs with network_mode = "no-network"`,
      judge
        ? "only rewardkit and litellm resolve offline: bake other dependencies into the image"
        : "bake the dependencies into the image, or give the verifier network access",
      h.line,
    );
  }
}
