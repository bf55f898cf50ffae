/**
 * The kept tree against hostile boxes (`bun scripts/bench/kept-tree.ts`), printing one JSON document with, per case,
 * the wall time, this process's peak RSS and what was kept and skipped:
 *
 * - `many`: 100,000 empty files in one new folder (the file cap keeps 20,000 and records the rest);
 * - `deep`: one path longer than PATH_MAX (nested 200-byte folder names) beside two ordinary files;
 * - `big`: a 100 MB file among 50 small ones in one new folder (only it is over the byte cap);
 * - `sparse`: a live `trial files archive` of a 3 GB sparse file (streamed through gzip to disk).
 *
 * Each case runs in a child process of its own (`--case NAME` runs one in this process), so each peak RSS is that
 * case's alone. Goal: peak RSS flat (well under 300 MB) in every case, whatever the box holds. The script never fails
 * on a missed goal; it exits 2 only when it cannot run at all (no podman, no image).
 *
 * Usage: bun scripts/bench/kept-tree.ts [--case many|deep|big|sparse] [--image debian:bookworm-slim]
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { openEngine } from "../../engine/engine-choice.ts";
import { archiveLive, keepChangedFiles } from "../../engine/trial/changes.ts";

const CASES: Record<string, string> = {
  many: "mkdir -p /app/many && cd /app/many && seq 1 100000 | xargs touch && echo x > /app/z.txt",
  deep: 'mkdir -p /app/deep && echo a > /app/a.txt && echo b > /app/z.txt && cd /app/deep && for i in $(seq 1 22); do n=$(printf "%0200d" $i); mkdir $n && cd $n; done && echo deep > f.txt',
  big: "mkdir -p /app/proj && for i in $(seq 1 50); do echo $i > /app/proj/f$i.txt; done && head -c 100000000 /dev/urandom > /app/proj/big.bin",
  sparse: "mkdir -p /data && truncate -s 3G /data/sparse.img",
};

const { values } = parseArgs({ options: { case: { type: "string" }, image: { type: "string", default: "debian:bookworm-slim" } } });

async function runCase(name: string, image: string): Promise<Record<string, unknown>> {
  const home = mkdtempSync(join(tmpdir(), "evolve-bench-kept-"));
  const engine = await openEngine({ home });
  const box = await engine.create({ image, cmd: ["sleep", "infinity"], labels: { "dev.evolve.bench-kept": "1" }, network: "none" });
  try {
    await engine.start(box);
    const setup = await engine.exec(box, ["bash", "-c", CASES[name]], { user: "root", timeoutMs: 600_000 });
    if (setup.exitCode !== 0) throw new Error(`setup of ${name} failed: ${setup.stderr.trim()}`);
    const t0 = performance.now();
    if (name === "sparse") {
      const file = join(home, "archive.tar.gz");
      await archiveLive(engine, box, "/data", file);
      return { ms: Math.round(performance.now() - t0), peak_rss_mb: peakMb(), archive_bytes: statSync(file).size };
    }
    const lines: string[] = [];
    const m = await keepChangedFiles(engine, box, join(home, "trial"), (l) => lines.push(l));
    return {
      ms: Math.round(performance.now() - t0),
      peak_rss_mb: peakMb(),
      kept_files: m?.files.filter((f) => f.type === "file").length ?? null,
      kept_bytes: m?.kept_bytes ?? null,
      skipped: m?.skipped.length ?? null,
      skipped_reasons: [...new Set(m?.skipped.map((s) => s.reason.replace(/^\d+ bytes, /, "")) ?? [])],
      changes_from: m?.changes_from ?? null,
      log: lines.map((l) => l.slice(0, 300)),
    };
  } finally {
    await engine.remove(box);
    await engine.close();
    rmSync(home, { recursive: true, force: true });
  }
}

/** Peak RSS of this process in MB (maxRSS is in KiB under Node and Bun alike). */
const peakMb = () => Math.round(process.resourceUsage().maxRSS / 1024);

if (spawnSync("podman", ["image", "exists", values.image!]).status !== 0) {
  process.stderr.write(`kept-tree bench: podman with image ${values.image} is needed\n`);
  process.exit(2);
}
if (values.case) {
  if (!CASES[values.case]) {
    process.stderr.write(`kept-tree bench: unknown case ${values.case} (one of ${Object.keys(CASES).join(", ")})\n`);
    process.exit(2);
  }
  process.stdout.write(JSON.stringify(await runCase(values.case, values.image!)) + "\n");
} else {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(CASES)) {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--case", name, "--image", values.image!], { encoding: "utf8" });
    out[name] = r.status === 0 ? JSON.parse(r.stdout) : { error: r.stderr.trim().split("\n").slice(-3).join(" ") };
  }
  process.stdout.write(JSON.stringify(out, null, 2) + "\n");
}
