/**
 * buildFailureCause on real captured outputs of the three builders (tests/support/build-outputs/README.md): the
 * failing step and the line that says why, as the first line of a `build_failed` message shows them.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildFailureCause, formatBuildCause } from "./build.ts";

const captured = (name: string) => readFileSync(join(__dirname, "../../tests/support/build-outputs", `${name}.txt`), "utf8");

const CASES: { file: string; step?: string; error: string }[] = [
  // a RUN of a program the image lacks
  { file: "podman-run-not-found", step: "RUN pip3 install requests", error: "/bin/sh: 1: pip3: not found" },
  { file: "classic-run-not-found", step: "RUN pip3 install requests", error: "/bin/sh: 1: pip3: not found" },
  { file: "buildkit-run-not-found", step: "RUN pip3 install requests", error: "/bin/sh: 1: pip3: not found" },
  { file: "buildkit-modern-run-not-found", step: "RUN cd /app && uv sync --dev --all-extras --frozen", error: "/bin/sh: 1: uv: not found" },
  // a COPY of a file the context lacks: the builder's own verdict is the error line
  { file: "podman-copy-missing", step: "COPY requirements.txt /app/", error: 'checking on sources under "/tmp/bf2": copier: stat: "/requirements.txt": no such file or directory' },
  { file: "classic-copy-missing", step: "COPY requirements.txt /app/", error: "COPY failed: file not found in build context or excluded by .dockerignore: stat requirements.txt: file does not exist" },
  { file: "buildkit-copy-missing", step: "COPY requirements.txt /app/", error: '"/requirements.txt" not found: not found' },
  // a traceback: its last line, not its frames nor what the program printed after it
  { file: "podman-python-traceback", step: `RUN python3 -c "import sys; print('loading config'); import yaml"`, error: "ModuleNotFoundError: No module named 'yaml'" },
  { file: "classic-python-traceback", step: `RUN python3 -c "import sys; print('loading config'); import yaml"`, error: "ModuleNotFoundError: No module named 'yaml'" },
  { file: "buildkit-python-traceback", step: `RUN python3 -c "import sys; print('loading config'); import yaml"`, error: "ModuleNotFoundError: No module named 'yaml'" },
  // a Dockerfile that does not parse
  { file: "classic-parse-error", error: "dockerfile parse error line 2: unknown instruction: RUNN" },
  { file: "buildkit-parse-error", error: "failed to solve with frontend dockerfile.v0: failed to create LLB definition: dockerfile parse error line 2: unknown instruction: RUNN" },
];

describe("buildFailureCause", () => {
  for (const c of CASES) {
    it(`${c.file}: ${c.step ?? "(no step)"} → ${c.error}`, () => {
      const cause = buildFailureCause(captured(c.file));
      expect(cause).toEqual({ ...(c.step ? { step: c.step } : {}), error: c.error });
    });
  }

  it("podman's unknown instruction names the step and buildah's verdict, not its own log line", () => {
    const cause = buildFailureCause(captured("podman-parse-error"))!;
    expect(cause.step).toBe("RUNN echo hi");
    expect(cause.error).toMatch(/^Build error: Unknown instruction: "RUNN"/);
  });

  it("the first line of a message: the step, then its error line", () => {
    expect(formatBuildCause(buildFailureCause(captured("podman-run-not-found"))!)).toBe("RUN pip3 install requests: /bin/sh: 1: pip3: not found");
    expect(formatBuildCause({ error: "dockerfile parse error line 2" })).toBe("dockerfile parse error line 2");
    // a long RUN is cut so that the error stays on the line
    const long = formatBuildCause({ step: `RUN ${"x".repeat(500)}`, error: "boom: not found" });
    expect(long.length).toBeLessThan(200);
    expect(long.endsWith("…: boom: not found")).toBe(true);
  });

  it("the failing step far above the end (a chatty RUN) is still named", () => {
    const chatty = Array.from({ length: 5000 }, (_, i) => `compiling unit ${i}`);
    const out = ["STEP 1/2: FROM debian:bookworm-slim", "STEP 2/2: RUN make", ...chatty, "make: *** [all] Error 2", 'Error: building at STEP "RUN make": while running runtime: exit status 2'].join("\n");
    expect(buildFailureCause(out)).toEqual({ step: "RUN make", error: "make: *** [all] Error 2" });
  });

  it("output that names no step and no error gives nothing", () => {
    expect(buildFailureCause("")).toBeUndefined();
    expect(buildFailureCause("some\nunrelated\nlines")).toBeUndefined();
  });
});
