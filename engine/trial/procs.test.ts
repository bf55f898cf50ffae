/** Which processes the agent-phase sweep takes (engine/trial/procs.ts), as a pure rule: no container engine. */
import { describe, expect, it } from "vitest";
import { boxCgroup } from "../driver/cgroup.ts";
import { agentProcs, parseStat, type Proc } from "./procs.ts";

const p = (pid: number, ppid: number, name = "x", state = "S"): Proc => ({ pid, ppid, name, state, key: `${pid}:${pid * 10}` });

describe("agentProcs", () => {
  const init = p(1, 0, "sleep");
  const service = p(7, 1, "svc");
  const keep = new Set([init.key, service.key]);

  it("takes the agent's exec and everything below it, and its orphans re-parented to the main process", () => {
    const exec = p(20, 0, "bash");
    const child = p(21, 20, "python");
    const orphan = p(30, 1, "setsid-child");
    const grandOrphan = p(31, 30, "sleep");
    const got = agentProcs([init, service, exec, child, orphan, grandOrphan], keep, 1).map((x) => x.pid);
    expect(got.sort()).toEqual([20, 21, 30, 31]);
  });

  it("leaves the main process, the services from before and the workers they fork later", () => {
    const worker = p(40, 7, "svc-worker");
    const workerChild = p(41, 40, "sh");
    expect(agentProcs([init, service, worker, workerChild], keep, 1)).toEqual([]);
  });

  it("skips zombies (dead, waiting for a reaper) and a pid reused since the snapshot is new", () => {
    const zombie = p(50, 1, "bash", "Z");
    const reused = { ...p(7, 1, "svc"), key: "7:999" };
    expect(agentProcs([init, zombie, reused], keep, 1).map((x) => x.key)).toEqual(["7:999"]);
  });
});

describe("parseStat", () => {
  it("reads a name with spaces and parentheses, the state, the parent and the start time", () => {
    const line = "4242 (we ird) (name) S 17 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
    expect(parseStat(4242, line)).toEqual({ pid: 4242, key: "4242:987654", name: "we ird) (name", state: "S", ppid: 17 });
  });
  it("refuses a line it cannot read", () => {
    expect(parseStat(1, "garbage")).toBeUndefined();
  });
});

describe("boxCgroup", () => {
  it("never takes a process of evolve's own PID namespace, nor a malformed id: an engine in a VM may report a pid that is an unrelated host process", async () => {
    expect(await boxCgroup("a".repeat(64), process.pid)).toBeUndefined();
    expect(await boxCgroup("../..", 1)).toBeUndefined();
  });
});
