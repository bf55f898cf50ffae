/**
 * Builds the single binary `dist/evolve` with Bun (`npm run build`).
 *
 * Why a plugin: lmdb and msgpackr-extract locate their native addons at run time through
 * `node-gyp-build-optional-packages`, which searches the file system. Bun cannot see those files while bundling,
 * so a plain `--compile` binary fails with "No native build was found". The plugin answers the import of
 * `node-gyp-build-optional-packages` with a tiny module that `require`s the right `.node` file by absolute path;
 * a static require is something Bun follows, so the addon is embedded and extracted to /tmp at run time.
 *
 * Start-up (scripts/bench/startup.ts): bytecode cut `--version` from ~27 to ~17 ms and `--help` from ~46 to ~25 ms;
 * code splitting trims `--help` a little more. Keep heavy modules behind dynamic `import()` so they stay off that path.
 *
 * Usage: bun scripts/build.ts [--entry main.ts] [--outfile dist/evolve] [--no-minify] [--no-bytecode] [--no-splitting]
 */
import type { BunPlugin } from "bun";
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";

const ROOT = resolve(import.meta.dir, "..");
/** The addon flavour Bun loads: N-API, glibc (the binary is glibc-linked; musl images are not supported). */
const ADDON_FILE = "node.napi.glibc.node";
const PLATFORM_SUFFIX = "-linux-x64";
const LOADER_SUFFIX = ".loader.js";

/** Walks up from a file to the directory holding its package.json. */
function packageRoot(file: string): string {
  let dir = dirname(file);
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${file}`);
    dir = up;
  }
  return dir;
}

/**
 * Finds the prebuilt addon for the package that imports `node-gyp-build-optional-packages`: that package lists
 * its per-platform prebuild as an optional dependency named `<...>-linux-x64` (e.g. `@lmdb/lmdb-linux-x64`).
 */
export function addonFor(importer: string): string {
  const root = packageRoot(importer);
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const candidates = Object.keys(pkg.optionalDependencies ?? {}).filter((d) => d.endsWith(PLATFORM_SUFFIX));
  const req = createRequire(join(root, "package.json"));
  for (const dep of candidates) {
    let depRoot: string;
    try {
      depRoot = dirname(req.resolve(`${dep}/package.json`));
    } catch {
      continue;
    }
    const file = join(depRoot, ADDON_FILE);
    if (existsSync(file)) return file;
  }
  throw new Error(
    `${pkg.name}: no ${ADDON_FILE} found in ${candidates.join(", ") || "its optionalDependencies"}; run npm ci on linux-x64`,
  );
}

/** Embeds native addons loaded through node-gyp-build-optional-packages as static requires. */
export const nativeAddons: BunPlugin = {
  name: "embed-native-addons",
  setup(build) {
    // The virtual module's path must differ from the addon's, or its require() would resolve to itself.
    build.onResolve({ filter: /^node-gyp-build-optional-packages$/ }, (args) => ({
      path: `${addonFor(args.importer)}${LOADER_SUFFIX}`,
      namespace: "native-addon",
    }));
    build.onLoad({ filter: /.*/, namespace: "native-addon" }, (args) => {
      const addon = args.path.slice(0, -LOADER_SUFFIX.length);
      return {
        // The loader ignores the directory it is given: the addon is fixed at build time.
        contents: `module.exports = function loadAddon() { return require(${JSON.stringify(addon)}); };`,
        loader: "js",
      };
    });
  },
};

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      entry: { type: "string", default: "main.ts" },
      outfile: { type: "string", default: "dist/evolve" },
      "no-minify": { type: "boolean", default: false },
      "no-bytecode": { type: "boolean", default: false },
      "no-splitting": { type: "boolean", default: false },
    },
  });
  const entry = resolve(ROOT, values.entry!);
  const outfile = resolve(ROOT, values.outfile!);
  if (!existsSync(entry)) {
    console.error(`error[build_entry_missing]: ${relative(ROOT, entry) || entry} does not exist`);
    return 2;
  }
  const t0 = performance.now();
  let result: Awaited<ReturnType<typeof Bun.build>>;
  try {
    result = await Bun.build({
      entrypoints: [entry],
      compile: { outfile, target: "bun-linux-x64" },
      minify: !values["no-minify"],
      // Bytecode skips parsing at start-up; esm keeps top-level await (bytecode alone defaults to cjs).
      bytecode: !values["no-bytecode"],
      format: "esm",
      // Each lazily imported command becomes its own chunk inside the binary, loaded only when that command runs.
      splitting: !values["no-splitting"],
      sourcemap: "inline",
      plugins: [nativeAddons],
      throw: false,
    });
  } catch (e) {
    result = { success: false, logs: [e], outputs: [] } as unknown as Awaited<ReturnType<typeof Bun.build>>;
  }
  if (!result.success) {
    for (const log of result.logs) console.error(log);
    console.error("error[build_failed]: bun build failed (messages above)");
    return 1;
  }
  // Bun embeds the source maps in the binary (stack traces name source files) and also leaves copies beside it,
  // one per chunk: the binary is the only thing the build is meant to leave behind.
  const outDir = dirname(outfile);
  for (const f of readdirSync(outDir)) if (f.endsWith(".map")) rmSync(join(outDir, f), { force: true });
  const mb = (statSync(outfile).size / 1024 / 1024).toFixed(1);
  console.log(`built ${relative(ROOT, outfile)} (${mb} MiB) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return 0;
}

if (import.meta.main) process.exit(await main());
