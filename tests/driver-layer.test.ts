/**
 * Owners read from a box's own overlay layer on the host (engine/driver/layer.ts): what the box made is read as
 * itself, never through a link it planted, and host ids are turned back into the ids the box sees.
 */
import { lchownSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, chownSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { boxId, OVERFLOW_ID, ownersInLayer, parseIdMap } from "../engine/driver/layer.ts";

const dir = mkdtempSync(join(tmpdir(), "evolve-layer-"));
const layer = join(dir, "upper");
const outside = join(dir, "outside");
mkdirSync(join(layer, "app", "src"), { recursive: true });
mkdirSync(outside);
writeFileSync(join(layer, "app", "src", "main.py"), "print(1)\n");
writeFileSync(join(outside, "secret"), "host\n");
mkdirSync(join(outside, "sub"));
writeFileSync(join(outside, "sub", "x"), "host\n");
// the box's links: a folder that leads out of the layer, and a file that names a host file
symlinkSync(outside, join(layer, "app", "out"));
symlinkSync(join(outside, "secret"), join(layer, "app", "link"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const owner = (p: string): [number, number] => {
  const st = lstatSync(p);
  return [st.uid, st.gid];
};

describe("owners from a box's own layer", () => {
  it("reads files, folders and a link itself, and leaves out what is absent or not a plain box path", async () => {
    const m = await ownersInLayer(layer, ["/app", "/app/src", "/app/src/main.py", "/app/link", "/app/gone", "/app/../app/src", "app/src", "/"], [], []);
    expect(m.get("/app/src/main.py")).toEqual(owner(join(layer, "app", "src", "main.py")));
    expect(m.get("/app")).toEqual(owner(join(layer, "app")));
    expect(m.get("/app/link")).toEqual(owner(join(layer, "app", "link")));
    expect([...m.keys()].sort()).toEqual(["/app", "/app/link", "/app/src", "/app/src/main.py"]);
  });

  it("never reads through a link the box planted in a parent folder", async () => {
    const m = await ownersInLayer(layer, ["/app/out/secret", "/app/out/sub/x", "/app/out/sub", "/app/out"], [], []);
    // the link is the box's own entry; what lies behind it is the host's, not the box's
    expect([...m.keys()]).toEqual(["/app/out"]);
  });

  it.runIf(process.getuid?.() === 0)("gives a link's own owner, never its target's, in the box's ids", async () => {
    lchownSync(join(layer, "app", "link"), 201007, 201008);
    chownSync(join(outside, "secret"), 4343, 4343);
    chownSync(join(layer, "app", "src", "main.py"), 201000, 201001);
    const map = [{ box: 0, host: 200000, size: 65536 }];
    const m = await ownersInLayer(layer, ["/app/link", "/app/src/main.py"], map, map);
    expect(m.get("/app/link")).toEqual([1007, 1008]);
    expect(m.get("/app/src/main.py")).toEqual([1000, 1001]);
  });

  it("turns host ids into the box's: mapped, unmapped (the overflow id), or the same without a map", () => {
    const map = parseIdMap(["0:200000:65536"])!;
    expect(map).toEqual([{ box: 0, host: 200000, size: 65536 }]);
    expect([boxId(200000, map), boxId(201000, map), boxId(0, map), boxId(265536, map)]).toEqual([0, 1000, OVERFLOW_ID, OVERFLOW_ID]);
    expect(boxId(1000, parseIdMap(undefined)!)).toBe(1000);
    expect(parseIdMap(["0:1:x"])).toBeUndefined();
    expect(parseIdMap("0:1:2")).toBeUndefined();
  });
});
