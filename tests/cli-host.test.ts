/**
 * The CLI host of the unit tier (tests/support/cli-host.ts) answers each invocation as a fresh process would:
 * its own environment (replaced, not merged), its own working directory, its own exit status, and nothing a
 * previous invocation added (listeners on the process or its streams) showing up in a later one's output.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cliHost } from "./support/cli-host.ts";
import { createJob } from "../engine/job/job.ts";
import { openStore } from "../engine/store/index.ts";
import { jobConfig } from "./support/job-config.ts";

const host = cliHost();
const dir = mkdtempSync(join(tmpdir(), "evolve-cli-host-test-"));
afterAll(() => {
  host.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the CLI host", () => {
  it("gives each invocation its own environment, working directory and exit status", async () => {
    const full = join(dir, "full");
    const store = openStore(full);
    const job = createJob(store, jobConfig());
    await store.close();
    const env = { PATH: process.env.PATH, NO_COLOR: "1" };
    const list = (home: string) => host.run(["job", "list", "--json"], { env: { ...env, EVOLVE_HOME: home } });
    expect(JSON.parse(list(full).stdout).map((j: { id: string }) => j.id)).toEqual([job.id]);
    expect(JSON.parse(list(join(dir, "empty")).stdout)).toEqual([]);
    // a variable the previous call had is gone, not kept from it: without USER the OS account is billed
    const user = (extra: Record<string, string>) =>
      JSON.parse(host.run(["gateway", "status", "--json"], { env: { ...env, EVOLVE_HOME: full, ...extra } }).stdout).user.name;
    expect(user({ USER: "dana" })).toBe("dana");
    expect(user({})).toBe(userInfo().username);

    const work = join(dir, "work");
    mkdirSync(work);
    const init = host.run(["task", "init", "rel-task"], { env: { ...env, EVOLVE_HOME: full }, cwd: work });
    expect(init.code, init.stderr).toBe(0);
    expect(existsSync(join(work, "rel-task", "task.toml"))).toBe(true);

    // a working directory that is not there runs nothing, and leaves the next call its own environment
    const nowhere = host.run(["task", "init", "x"], { env, cwd: join(dir, "missing") });
    expect(nowhere.code).toBeNull();
    expect(nowhere.error).toMatch(/ENOENT|no such file/i);
    expect(user({ USER: "erin" })).toBe("erin");

    expect(host.run(["frobnicate"], { env }).code).toBe(2);
    expect(host.run(["--version"], { env }).code).toBe(0);
  });

  it("leaves nothing of one invocation in the next: fifty calls later the host holds the listeners it had", () => {
    const env = { PATH: process.env.PATH, NO_COLOR: "1", EVOLVE_HOME: join(dir, "many") };
    const first = host.run(["job", "list"], { env });
    let last = first;
    for (let i = 0; i < 50; i++) last = host.run(["job", "list"], { env });
    expect(last.code).toBe(0);
    expect(last.stderr).toBe("");
    // every call adds the broken-pipe guard's listeners; kept, they would pile up (and warn of a leak past ten)
    expect(first.listeners).toBeTypeOf("number");
    expect(last.listeners).toBe(first.listeners);
  });
});
