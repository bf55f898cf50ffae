/**
 * The store as commands use it (opened from the configured home for one command, always closed after), and
 * `evolve store backup|verify`.
 */
import { join, resolve } from "node:path";
import { loadConfig } from "../engine/config.ts";
import { openStore, type Store } from "../engine/store/mod.ts";
import { out, outJson, outTable, style } from "./output.ts";

/** Opens the home's store, runs `fn`, and closes the store however `fn` ends. */
export async function withStore<T>(fn: (store: Store, home: string) => Promise<T> | T): Promise<T> {
  const config = loadConfig();
  const store = openStore(config.home);
  try {
    return await fn(store, config.home);
  } finally {
    await store.close();
  }
}

/**
 * `evolve store backup <file>`: a compacted, consistent copy of the store, safe while jobs run. `--json` prints
 * `{file, bytes}`.
 */
export async function storeBackupCommand(file: string, opts: { json?: boolean }): Promise<number> {
  const target = resolve(file);
  return withStore(async (store) => {
    const r = await store.backup(target);
    if (opts.json) return outJson(r), 0;
    out(`backed up ${store.path} to ${r.file} (${(r.bytes / 1024).toFixed(0)} KiB)`);
    out(style.dim(`restore: stop evolve, copy it to ${join(store.path, "data.mdb")} and remove ${join(store.path, "lock.mdb")} (docs/store.md)`));
    return 0;
  });
}

/**
 * `evolve store verify`: the file's page structure, then every record through its schema; exit 1 when anything is
 * bad. `--json` prints the VerifyReport: `{ok, file, structure: string|null, dbs: {<db>: {records, bad}}, bad: [{db,
 * key, why}]}`.
 */
export async function storeVerifyCommand(opts: { json?: boolean }): Promise<number> {
  return withStore((store) => {
    const r = store.verify();
    if (opts.json) return outJson(r), r.ok ? 0 : 1;
    if (r.structure) {
      out(`${style.red("damaged")} ${r.file}: ${r.structure}`);
      out(style.dim("records were not read: restore from a backup (docs/store.md)"));
      return 1;
    }
    outTable(["DB", "RECORDS", "BAD"], Object.entries(r.dbs).map(([db, c]) => [db, c.records, c.bad]));
    for (const b of r.bad.slice(0, 50)) out(`${style.red("bad")} ${b.db}/${JSON.stringify(b.key)}: ${b.why}`);
    if (r.bad.length > 50) out(style.dim(`… and ${r.bad.length - 50} more (--json lists them all)`));
    out(r.ok ? style.green(`${r.file}: every record checks out`) : `${r.bad.length} bad record${r.bad.length === 1 ? "" : "s"}: restore from a backup (docs/store.md)`);
    return r.ok ? 0 : 1;
  });
}
