/**
 * The store as commands use it: opened from the configured home for one command, always closed after.
 */
import { loadConfig } from "../engine/config.ts";
import { openStore, type Store } from "../engine/store/index.ts";

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
