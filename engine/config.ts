/**
 * Where evolve keeps its state and the user's settings from `$EVOLVE_HOME/config.toml`.
 * Read once per process; a malformed file is an environment error, never silently ignored.
 */
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism, homedir, totalmem, userInfo } from "node:os";
import { join } from "node:path";
import { parse } from "smol-toml";
import { z } from "zod";
import type { IdMapping } from "./driver/types.ts";
import type { Ceilings } from "./task/codes.ts";
import { EvolveError, firstLine } from "./errors.ts";

/** An IPv4 CIDR ("10.20.0.0/16"); a bare address means /32. */
const CIDR = /^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)(\/(3[0-2]|[12]?\d))?$/;

/**
 * `[network]` of config.toml: what public boxes, the egress proxy and image builds may reach beyond the internet.
 * By default nothing: not this host's own addresses, not the private and link-local ranges (engine/driver/hostguard.ts).
 */
export interface NetworkConfig {
  /** Services listening on this host's own addresses are reachable. */
  allow_host: boolean;
  /** CIDRs inside the refused ranges that are reachable all the same (a package mirror on the LAN). */
  allow_ranges: string[];
}

/** Ceilings that fit a large single GPU box; raise them in config.toml for bigger fleets. */
export const DEFAULT_CEILINGS: Ceilings = { cpus: 64, memory_mb: 512 * 1024, storage_mb: 2 * 1024 * 1024, gpus: 8 };

const ConfigSchema = z.object({
  ceilings: z
    .object({
      cpus: z.number().positive().optional(),
      memory_mb: z.number().positive().optional(),
      storage_mb: z.number().positive().optional(),
      gpus: z.number().int().nonnegative().optional(),
    })
    .strict()
    .optional(),
  jobs: z.object({ max_trials: z.number().int().positive().optional(), folder: z.boolean().optional() }).strict().optional(),
  limits: z
    .object({ uploads: z.object({ job_archive_bytes: z.number().int().positive().optional() }).strict().optional() })
    .strict()
    .optional(),
  budget: z
    .object({
      user: z.string().min(1).optional(),
      user_credits_usd: z.number().nonnegative().optional(),
      team: z.string().min(1).optional(),
      team_monthly_usd: z.number().nonnegative().optional(),
      global_cap_usd: z.number().nonnegative().optional(),
      trial_cap_usd: z.number().positive().optional(),
      judge_trial_cap_usd: z.number().positive().optional(),
    })
    .strict()
    .optional(),
  box: z
    .object({
      pids_limit: z.number().int().positive().optional(),
      memory_mb: z.number().positive().optional(),
      cpus: z.number().positive().optional(),
      userns: z.union([z.boolean(), z.string()]).optional(),
    })
    .strict()
    .optional(),
  network: z
    .object({
      allow_host: z.boolean().optional(),
      allow_ranges: z.array(z.string().regex(CIDR, "expected an IPv4 CIDR such as 10.20.0.0/16")).optional(),
    })
    .strict()
    .optional(),
}).passthrough();

/**
 * The host ids a box's user namespace starts at by default: box root is host uid/gid 2000000000. It lies in the
 * range systemd's UIDS-GIDS.md leaves unused (1879048192…2130706431), above every range `useradd` hands out in
 * /etc/subuid (100000…600100000), so a box shares its ids with no account and no rootless user's containers.
 */
export const DEFAULT_USERNS: IdMapping = { hostId: 2_000_000_000, size: 65536 };

/**
 * `[box] userns`: true (or absent) is the default mapping, false runs boxes without a user namespace (box root is
 * host root on a rootful engine), "0:<host id>:<size>" maps box ids 0…size-1 to host ids from <host id> on.
 * Returns the mapping, false, or why the value is refused.
 */
export function parseUserns(v: boolean | string | undefined): IdMapping | false | string {
  if (v === undefined || v === true) return { ...DEFAULT_USERNS };
  if (v === false) return false;
  const m = /^0:(\d+):(\d+)$/.exec(v.trim());
  if (!m) return `"${v}" is not "0:<host id>:<size>" (box root first), true or false`;
  const hostId = Number(m[1]);
  const size = Number(m[2]);
  // box root mapped to host root is no namespace at all; the kernel takes 32-bit ids, 4294967295 being "none"
  if (hostId < 1) return "the host id must be 1 or more: box root mapped to host root (0) keeps box root host root";
  if (size < 1) return "the size must be 1 or more";
  if (hostId + size > 4294967295) return `host ids ${hostId}…${hostId + size - 1} run past the largest id (4294967294)`;
  return { hostId, size };
}

/**
 * The caps a box gets when its task declares none (`[box]` of config.toml): a fork loop, a memory leak or a busy
 * loop in one trial must not take the machine from the others. A task's own `cpus` / `memory_mb` win; every box
 * always has a pids cap.
 */
export interface BoxDefaults {
  pids_limit: number;
  memory_mb: number;
  cpus: number;
  /** The user namespace every agent, verifier and compose service box runs in (parseUserns), or false for none. */
  userns: IdMapping | false;
}

/** The built-in box caps, each bounded by what this machine has. */
export function defaultBoxCaps(): BoxDefaults {
  return { pids_limit: 4096, memory_mb: Math.min(8192, Math.floor(totalmem() / 1024 / 1024)), cpus: Math.min(4, availableParallelism()), userns: { ...DEFAULT_USERNS } };
}

/**
 * `[budget]` of config.toml: who this home's trials bill to and the limits above a trial. Spend against the user's
 * credits and the team's month is kept in the store's ledger, so it carries over between runs.
 */
export interface BudgetConfig {
  /** Who trials bill to; defaults to the login name. */
  user: string;
  user_credits_usd?: number;
  team?: string;
  team_monthly_usd?: number;
  global_cap_usd?: number;
  /** Default per-trial agent spend cap (a task's `[agent] max_spend_usd` or `run --max-spend-usd` may lower it). */
  trial_cap_usd?: number;
  judge_trial_cap_usd?: number;
}

/**
 * Most trials one job may hold (tasks × `-k`) unless `[jobs] max_trials` says otherwise. A job is recorded, shown
 * and cancelled whole, so its size bounds the time and memory of each of those; at 10 000, `job show`, `job list`
 * and `job cancel` each take under a second, with room for a 2 000-task benchmark at five attempts.
 */
export const DEFAULT_MAX_TRIALS = 10_000;

/** `[jobs]` of config.toml. */
export interface JobsConfig {
  max_trials: number;
  /** `evolve run` writes a Harbor job folder under `./jobs` (or `--jobs-dir`) as trials settle; `false` turns it off. */
  folder: boolean;
}

/**
 * The archive ceiling of `evolve upload` when `[limits.uploads] job_archive_bytes` sets none: a job's .tar.gz (and
 * the bytes it unpacks to) at most 20 GiB, room for a few thousand trials with their agents' homes.
 */
export const DEFAULT_JOB_ARCHIVE_BYTES = 20 * 1024 ** 3;

/** `[limits]` of config.toml: bounds of what a command takes in. */
export interface LimitsConfig {
  uploads: { job_archive_bytes: number };
}

/** The settings evolve runs with, defaults filled in. */
export interface Config {
  limits: LimitsConfig;
  home: string;
  ceilings: Ceilings;
  budget: BudgetConfig;
  box: BoxDefaults;
  jobs: JobsConfig;
  network: NetworkConfig;
}

const DEFAULT_NETWORK: NetworkConfig = { allow_host: false, allow_ranges: [] };

/**
 * Who this home's trials bill to by default: `USER`, else the OS account of this process's uid (its passwd entry),
 * else `LOGNAME`, else "local". Bun's `os.userInfo()` reads `USER` and says "unknown" without it, so the passwd
 * entry is read here rather than trusted to the runtime. Also the local identity of teams (engine/org) when
 * `EVOLVE_USER` is not set.
 */
export function loginName(env: Record<string, string | undefined> = process.env): string {
  if (env.USER) return env.USER;
  return accountName() ?? (env.LOGNAME || "local");
}

function accountName(): string | undefined {
  const uid = process.getuid?.();
  if (uid !== undefined) {
    try {
      for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
        const f = line.split(":");
        if (f.length > 2 && f[2] === String(uid) && f[0]) return f[0];
      }
    } catch {
      // no passwd file (a minimal container): the runtime may still know
    }
  }
  try {
    const name = userInfo().username;
    return name && name !== "unknown" ? name : undefined;
  } catch {
    return undefined;
  }
}

/** Resolves `$EVOLVE_HOME`, defaulting to `~/.evolve`. */
export function evolveHome(env: Record<string, string | undefined> = process.env): string {
  const h = env.EVOLVE_HOME;
  return h && h.length > 0 ? h : join(homedir(), ".evolve");
}

/** Loads `$EVOLVE_HOME/config.toml` (absent is fine) and fills in defaults. */
export function loadConfig(home: string = evolveHome()): Config {
  const file = join(home, "config.toml");
  if (!existsSync(file)) return { home, ceilings: { ...DEFAULT_CEILINGS }, budget: { user: loginName() }, box: defaultBoxCaps(), jobs: { max_trials: DEFAULT_MAX_TRIALS, folder: true }, network: { ...DEFAULT_NETWORK }, limits: { uploads: { job_archive_bytes: DEFAULT_JOB_ARCHIVE_BYTES } } };
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new EvolveError("config_invalid", `${file} is not valid TOML: ${firstLine(e)}`, "fix or remove the file");
  }
  const r = ConfigSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new EvolveError("config_invalid", `${file}: ${i.path.join(".") || "(root)"}: ${i.message}`, "see README: Configuration");
  }
  const { userns: usernsRaw, ...caps } = r.data.box ?? {};
  const userns = parseUserns(usernsRaw);
  if (typeof userns === "string") throw new EvolveError("config_invalid", `${file}: box.userns: ${userns}`, "see README: Configuration");
  return {
    home,
    ceilings: { ...DEFAULT_CEILINGS, ...(r.data.ceilings ?? {}) },
    budget: { user: loginName(), ...(r.data.budget ?? {}) },
    box: { ...defaultBoxCaps(), ...caps, userns },
    jobs: { max_trials: r.data.jobs?.max_trials ?? DEFAULT_MAX_TRIALS, folder: r.data.jobs?.folder ?? true },
    network: { ...DEFAULT_NETWORK, ...(r.data.network ?? {}) },
    limits: { uploads: { job_archive_bytes: r.data.limits?.uploads?.job_archive_bytes ?? DEFAULT_JOB_ARCHIVE_BYTES } },
  };
}
