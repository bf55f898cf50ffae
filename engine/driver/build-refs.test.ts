/**
 * The early, friendly refusal of a build whose Dockerfile names a registry on this host (engine/driver/build.ts
 * hostLocalImageRefs). Pure text; the mechanism that keeps a build off the host whatever the text says is tested
 * on real podman in tests/build-hostlocal.engine.test.ts.
 */
import { describe, expect, it } from "vitest";
import { hostLocalImageRefs } from "./build.ts";

describe("hostLocalImageRefs", () => {
  it("finds FROM, COPY --from and RUN --mount from= naming loopback or the host's own addresses, across continuations", () => {
    const df = [
      "FROM 127.0.0.1:5000/base:1 AS a",
      "FROM --platform=linux/amd64 localhost:5000/b AS b",
      "COPY --from=[::1]:5000/c:1 \\",
      "     /x /y",
      "RUN --mount=type=bind,from=10.0.0.7:5000/d,target=/m true",
      "FROM 0.0.0.0:80/e",
    ].join("\n");
    expect(hostLocalImageRefs(df, ["10.0.0.7"])).toEqual([
      { line: 1, ref: "127.0.0.1:5000/base:1" },
      { line: 2, ref: "localhost:5000/b" },
      { line: 3, ref: "[::1]:5000/c:1" },
      { line: 5, ref: "10.0.0.7:5000/d" },
      { line: 6, ref: "0.0.0.0:80/e" },
    ]);
  });

  it("passes local images, registries off the host, stage names, and an address the host does not have", () => {
    const df = [
      "FROM localhost/evolve-env:abc AS env",
      "FROM debian:bookworm-slim",
      "FROM docker.io/library/python:3.12",
      "FROM registry.example.com:5000/x",
      "COPY --from=env /a /b",
      "RUN --mount=type=bind,from=env,target=/m true",
      "FROM 10.0.0.8:5000/d",
    ].join("\n");
    expect(hostLocalImageRefs(df, ["10.0.0.7"])).toEqual([]);
  });

  it("reads an escape directive's continuation", () => {
    expect(hostLocalImageRefs("# escape=`\nFROM debian:bookworm-slim\nCOPY `\n  --from=127.0.0.1:1/x /a /b\n")).toEqual([{ line: 3, ref: "127.0.0.1:1/x" }]);
  });
});
