/**
 * Per-trial agent credentials and judge credentials for the gateway.
 *
 * A key is 32 random bytes (node:crypto), shown once at issue and kept only as its sha256: a leaked record or
 * log cannot be replayed. Lookup hashes the presented key and compares digests in constant time, so response
 * timing says nothing about how much of a key matched. Records live in memory; a `persist` hook lets the engine
 * keep them (hashes only) where it keeps trials.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { Authenticate, Credential, GatewayRoute, Lane } from "./types.ts";

/** The model family a judge key belongs to, named after the env var a task asks for. */
export type JudgeFamily = "anthropic" | "openai" | "gemini";

/** Every judge family, in the order a judge name is looked up. */
export const JUDGE_FAMILIES: readonly JudgeFamily[] = ["anthropic", "openai", "gemini"];

/** What is stored for a credential: the contract's view plus the key's hash and lifecycle. */
export interface CredentialRecord extends Credential {
  /** sha256 of the key, hex. The key itself is never stored. */
  keyHash: string;
  issuedAt: string;
  revokedAt?: string;
  /** Judge keys: the one family they admit. */
  family?: JudgeFamily;
}

/** Receives every created or changed record (issue, revoke), so the engine can persist it. */
export type CredentialPersist = (record: CredentialRecord) => void;

/** What `issueAgent` / `issueJudge` return: the key (shown once) and its record. */
export interface Issued {
  key: string;
  credential: CredentialRecord;
}

/** Options for an agent credential. */
export interface AgentCredentialOptions {
  trialId: string;
  jobId?: string;
  /** Model names or patterns admitted (`anthropic/*`, `claude-*`); empty or absent = any configured model. */
  models?: string[];
  /** Routes admitted; absent = every route (an agent's harness may speak either provider's API). */
  routes?: GatewayRoute[];
  /** Lifetime in ms from now, or an absolute ISO time via `expiresAt`. */
  ttlMs?: number;
  expiresAt?: string;
}

/** Options for a judge credential. */
export interface JudgeCredentialOptions extends Omit<AgentCredentialOptions, "models" | "routes"> {
  family: JudgeFamily;
}

const KEY_PREFIX = "evk-";
/** Keys remembered by authenticate; a trial holds two, so this covers thousands of concurrent trials. */
const SEEN_KEYS_MAX = 4096;

/** sha256 hex of a key. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * Model patterns for a judge family. Anthropic: `claude-*` with or without the `anthropic/` prefix. OpenAI: its
 * chat model families (`gpt-*`, `o1*`, `o3*`, `o4*`, `chatgpt-*`, `codex-*`) with or without `openai/`. Gemini:
 * `gemini-*` with or without `gemini/`.
 */
export const FAMILY_MODELS: Record<JudgeFamily, string[]> = {
  anthropic: ["anthropic/*", "claude-*"],
  openai: ["openai/*", "gpt-*", "o1*", "o3*", "o4*", "chatgpt-*", "codex-*"],
  gemini: ["gemini/*", "gemini-*"],
};

/**
 * Routes for a judge family: its provider's own API and the model list. A judge's client speaks one wire format;
 * an Anthropic judge key has no business on chat completions, nor an OpenAI one on Messages.
 */
export const FAMILY_ROUTES: Record<JudgeFamily, GatewayRoute[]> = {
  anthropic: ["messages", "count_tokens", "models"],
  openai: ["chat", "responses", "models"],
  gemini: ["gemini_generate", "gemini_count_tokens", "gemini_models"],
};

/** The in-memory credential store: issue, authenticate, revoke. */
export class Credentials {
  private readonly byHash = new Map<string, CredentialRecord>();
  private readonly byId = new Map<string, CredentialRecord>();
  /**
   * Presented key → its record, for keys that authenticated before: an agent sends the same key on every call and
   * a sha256 per call is the priciest step of authenticate. Memory only (a key is in memory for each request
   * anyway); revocation and expiry are still checked on the record at every call, and the map is bounded.
   */
  private readonly seen = new Map<string, CredentialRecord>();

  constructor(
    private readonly persist?: CredentialPersist,
    private readonly now: () => number = Date.now,
  ) {}

  /** Restores records the engine persisted (e.g. a gateway restarted mid-job). */
  load(records: Iterable<CredentialRecord>): void {
    for (const r of records) {
      this.byHash.set(r.keyHash, r);
      this.byId.set(r.id, r);
    }
    // a loaded record may replace one a cached key points at
    this.seen.clear();
  }

  private issue(lane: Lane, o: AgentCredentialOptions, models: string[], routes?: GatewayRoute[], family?: JudgeFamily): Issued {
    const key = KEY_PREFIX + randomBytes(32).toString("base64url");
    const expiresAt = o.expiresAt ?? (o.ttlMs !== undefined ? new Date(this.now() + o.ttlMs).toISOString() : undefined);
    const record: CredentialRecord = {
      id: `cred_${randomUUID()}`,
      trialId: o.trialId,
      ...(o.jobId !== undefined ? { jobId: o.jobId } : {}),
      lane,
      models,
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      ...(routes !== undefined ? { routes } : {}),
      keyHash: hashKey(key),
      issuedAt: new Date(this.now()).toISOString(),
      ...(family ? { family } : {}),
    };
    this.byHash.set(record.keyHash, record);
    this.byId.set(record.id, record);
    this.persist?.(record);
    return { key, credential: record };
  }

  /** A trial's agent credential. */
  issueAgent(o: AgentCredentialOptions): Issued {
    return this.issue("agent", o, [...(o.models ?? [])], o.routes ? [...o.routes] : undefined);
  }

  /** A trial's judge credential: it admits only its family's models, on its family's routes. */
  issueJudge(o: JudgeCredentialOptions): Issued {
    return this.issue("judge", o, [...FAMILY_MODELS[o.family]], [...FAMILY_ROUTES[o.family]], o.family);
  }

  /**
   * The live credential for a presented key, or undefined (unknown, revoked or expired). The hash lookup finds a
   * candidate; the digest comparison is constant-time so the map's behaviour is the only thing timing could show,
   * and that depends on the full 256-bit hash, not on a key prefix.
   */
  authenticate: Authenticate = (key: string) => {
    if (typeof key !== "string" || !key.startsWith(KEY_PREFIX)) return undefined;
    let r = this.seen.get(key);
    if (!r) {
      const h = hashKey(key);
      r = this.byHash.get(h);
      if (!r) return undefined;
      if (!timingSafeEqual(Buffer.from(r.keyHash, "hex"), Buffer.from(h, "hex"))) return undefined;
      if (this.seen.size >= SEEN_KEYS_MAX) this.seen.clear();
      this.seen.set(key, r);
    }
    if (r.revokedAt) return undefined;
    if (r.expiresAt && Date.parse(r.expiresAt) <= this.now()) return undefined;
    return toCredential(r);
  };

  /** Revokes one credential; true if it was live. */
  revoke(credentialId: string): boolean {
    const r = this.byId.get(credentialId);
    if (!r || r.revokedAt) return false;
    r.revokedAt = new Date(this.now()).toISOString();
    this.persist?.(r);
    return true;
  }

  /** Revokes every live credential of a trial (or of one lane of it); returns how many. */
  revokeTrial(trialId: string, lane?: Lane): number {
    let count = 0;
    for (const r of this.byId.values()) {
      if (r.trialId === trialId && (!lane || r.lane === lane) && this.revoke(r.id)) count++;
    }
    return count;
  }

  /** A credential's record by id (for listings and tests). */
  get(credentialId: string): CredentialRecord | undefined {
    return this.byId.get(credentialId);
  }

  /** Drops revoked and expired records from memory (their persisted copies are the engine's business). */
  prune(): number {
    let count = 0;
    for (const r of [...this.byId.values()]) {
      if (r.revokedAt || (r.expiresAt && Date.parse(r.expiresAt) <= this.now())) {
        this.byId.delete(r.id);
        this.byHash.delete(r.keyHash);
        count++;
      }
    }
    if (count) this.seen.clear();
    return count;
  }
}

/** The contract's view of a record (no hash, no lifecycle fields). */
function toCredential(r: CredentialRecord): Credential {
  return {
    id: r.id,
    trialId: r.trialId,
    ...(r.jobId !== undefined ? { jobId: r.jobId } : {}),
    lane: r.lane,
    models: [...r.models],
    ...(r.expiresAt !== undefined ? { expiresAt: r.expiresAt } : {}),
    ...(r.routes !== undefined ? { routes: [...r.routes] } : {}),
  };
}

/** Joins a base URL and a path without doubling or losing the slash. */
function withPath(baseUrl: string, path: string): string {
  return baseUrl.replace(/\/+$/, "") + path;
}

/**
 * The variables an agent box gets: every judge family's, under one key, since an agent's harness may speak any of
 * the three APIs. Anthropic clients append `/v1/messages` to `ANTHROPIC_BASE_URL`, so it is the gateway root;
 * OpenAI clients append `/chat/completions` or `/responses` to `OPENAI_BASE_URL`, so it ends in `/v1`; Google's
 * append `/v1beta/models/…` to `GOOGLE_GEMINI_BASE_URL`, so it is the root. The `_API_BASE` companions (litellm's
 * names) carry the same values.
 */
export function agentEnv(key: string, baseUrl: string): Record<string, string> {
  return Object.assign({}, ...JUDGE_FAMILIES.map((f) => judgeEnv(f, key, baseUrl)));
}

/**
 * The variables a verifier gets for one judge family: the key under the name the task asked for, with both
 * base-URL companions beside it (`_BASE_URL` for the official SDKs, `_API_BASE` for litellm), so the judge's
 * client works unchanged and offline.
 */
export function judgeEnv(family: JudgeFamily, key: string, baseUrl: string): Record<string, string> {
  const root = baseUrl.replace(/\/+$/, "");
  if (family === "anthropic") return { ANTHROPIC_API_KEY: key, ANTHROPIC_BASE_URL: root, ANTHROPIC_API_BASE: root };
  // Google's SDKs append /v1beta/models/… to GOOGLE_GEMINI_BASE_URL, so it is the gateway root
  if (family === "gemini") return { GEMINI_API_KEY: key, GOOGLE_API_KEY: key, GOOGLE_GEMINI_BASE_URL: root };
  const v1 = withPath(root, "/v1");
  return { OPENAI_API_KEY: key, OPENAI_BASE_URL: v1, OPENAI_API_BASE: v1 };
}

/**
 * The judge family whose {@link judgeEnv} sets `name` (a key or a base-URL companion), or undefined for a name no
 * family answers. judgeEnv is where the names are decided; this and the task rules only read them from it.
 */
export function judgeFamilyOf(name: string): JudgeFamily | undefined {
  return JUDGE_FAMILIES.find((f) => Object.hasOwn(judgeEnv(f, "", ""), name));
}
