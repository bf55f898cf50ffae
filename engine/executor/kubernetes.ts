/**
 * The Kubernetes launcher (issue 24 §3): one batch/v1 Job per job run, Indexed, `parallelism = completions = N`
 * workers, each pod an `evolve worker` that claims trials from the coordinator by lease until the job is over, and
 * runs them in its own podman (podman-in-pod, a privileged container: docs/executors.md says why and what a rootless
 * variant needs). The coordinator's address and the worker token go in a Secret created beside the Job and reach the
 * pod through `env.valueFrom.secretKeyRef`, so neither shows in the Job's manifest, its args or `kubectl describe`.
 * Status is the Job's conditions and its pods' phases, cancel is a DELETE with `propagationPolicy=Background`, logs
 * are the pods' logs. The API client is node's own http(s) with the kubeconfig's server, CA and bearer token or client
 * certificate: the few calls made here need no client library.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { EvolveError } from "../errors.ts";
import type { WorkerBatch, WorkerLauncher, WorkerState } from "./types.ts";

/** `--namespace`, `--k8s-image` and `--kubeconfig` as the job's config keeps them. */
export interface KubernetesOptions {
  /** The worker image: evolve on PATH, podman, the vendored agents (scripts/kubernetes/Containerfile). */
  image: string;
  /** Default: the kubeconfig context's namespace, else `default`. */
  namespace?: string;
  /** Default: $KUBECONFIG's first file, else ~/.kube/config. */
  kubeconfig?: string;
  /** The submission's name suffix (tests fix it; default 6 random hex digits, so a resumed job's Job never collides). */
  suffix?: () => string;
}

/** What the API client needs from a kubeconfig: the current context's cluster and user. */
export interface KubeAccess {
  server: string;
  namespace?: string;
  ca?: Buffer;
  insecure?: boolean;
  token?: string;
  cert?: Buffer;
  key?: Buffer;
}

/** Labels every object of a submission carries: `evolve.dev/job` finds a job's workers, `…/submission` one run's. */
export const JOB_LABEL = "evolve.dev/job";
export const SUBMISSION_LABEL = "evolve.dev/submission";

/** A label value or name piece from any string: lower-case DNS-1123, at most `max` characters. */
function dnsPart(s: string, max: number): string {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, max).replace(/-+$/, "") || "x";
}

/** A label value: what Kubernetes accepts (alphanumerics, `-_.`, 63 at most, alphanumeric at both ends). */
function labelValue(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "").slice(0, 63) || "x";
}

/** Reads the kubeconfig's current context (`path`, else $KUBECONFIG's first file, else ~/.kube/config). */
export function loadKubeconfig(path?: string): KubeAccess {
  const file = resolve(path ?? process.env.KUBECONFIG?.split(":").find((p) => p !== "") ?? join(homedir(), ".kube", "config"));
  const bad = (why: string) => new EvolveError("kubeconfig_invalid", `kubeconfig ${file}: ${why}`, "point --kubeconfig (or KUBECONFIG) at a kubeconfig whose current context has a server and a token or client certificate");
  if (!existsSync(file)) throw bad("no such file");
  let doc: any;
  try {
    doc = parseYaml(readFileSync(file, "utf8"));
  } catch (e) {
    throw bad(`not YAML (${(e as Error).message.split("\n")[0]})`);
  }
  const named = (list: unknown, name: unknown, what: string) => {
    const hit = Array.isArray(list) ? list.find((x) => x?.name === name) : undefined;
    if (!hit) throw bad(`no ${what} ${JSON.stringify(name)}`);
    return hit[what] ?? {};
  };
  const context = named(doc?.contexts, doc?.["current-context"], "context");
  const cluster = named(doc?.clusters, context.cluster, "cluster");
  const user = named(doc?.users, context.user, "user");
  if (typeof cluster.server !== "string" || !/^https?:\/\//.test(cluster.server)) throw bad("the cluster has no http(s) server");
  // file references in a kubeconfig are relative to the kubeconfig's own folder
  const read = (data: unknown, ref: unknown) =>
    typeof data === "string" ? Buffer.from(data, "base64") : typeof ref === "string" ? readFileSync(resolve(dirname(file), ref)) : undefined;
  if (user.exec || user["auth-provider"]) throw bad("exec and auth-provider credentials are not supported; use a token or a client certificate (e.g. a service account's token)");
  const token = typeof user.token === "string" ? user.token : typeof user.tokenFile === "string" ? readFileSync(resolve(dirname(file), user.tokenFile), "utf8").trim() : undefined;
  const cert = read(user["client-certificate-data"], user["client-certificate"]);
  const key = read(user["client-key-data"], user["client-key"]);
  if (!token && !(cert && key)) throw bad("the user has neither a token nor a client certificate and key");
  return {
    server: cluster.server.replace(/\/+$/, ""),
    ...(typeof context.namespace === "string" ? { namespace: context.namespace } : {}),
    ...(read(cluster["certificate-authority-data"], cluster["certificate-authority"]) ? { ca: read(cluster["certificate-authority-data"], cluster["certificate-authority"]) } : {}),
    ...(cluster["insecure-skip-tls-verify"] === true ? { insecure: true } : {}),
    ...(token ? { token } : { cert, key }),
  };
}

/** The Secret that carries the coordinator's address and the worker token to the pods. */
export function workerSecret(o: { namespace: string }, b: WorkerBatch, name: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace: o.namespace, labels: labels(b, name) },
    type: "Opaque",
    stringData: { coordinator: b.coordinatorUrl, token: b.token },
  };
}

/** The Job: N indexed pods, each an `evolve worker` told its coordinator through the Secret. */
export function workerJob(o: { namespace: string; image: string }, b: WorkerBatch, name: string): Record<string, unknown> {
  const fromSecret = (env: string, key: string) => ({ name: env, valueFrom: { secretKeyRef: { name, key } } });
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace: o.namespace, labels: labels(b, name) },
    spec: {
      completionMode: "Indexed",
      completions: b.workers,
      parallelism: b.workers,
      // a lost pod's trials come back through its lease; a replacement pod per worker keeps the job's width
      backoffLimit: b.workers,
      template: {
        metadata: { labels: labels(b, name) },
        spec: {
          restartPolicy: "Never",
          // the worker never calls the Kubernetes API
          automountServiceAccountToken: false,
          containers: [
            {
              name: "worker",
              image: o.image,
              command: ["evolve"],
              args: ["worker", "--coordinator", "$(EVOLVE_COORDINATOR)", "--lease-seconds", String(b.leaseSeconds), "--worker-id", "$(EVOLVE_POD_NAME)"],
              env: [
                fromSecret("EVOLVE_COORDINATOR", "coordinator"),
                fromSecret("EVOLVE_WORKER_TOKEN", "token"),
                { name: "EVOLVE_POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              ],
              // podman-in-pod: the trial's boxes need mounts, network namespaces and cgroups of their own
              securityContext: { privileged: true },
              volumeMounts: [{ name: "containers", mountPath: "/var/lib/containers" }],
            },
          ],
          // podman's storage on the node's disk: overlay on the container's own overlay does not work
          volumes: [{ name: "containers", emptyDir: {} }],
        },
      },
    },
  };
}

function labels(b: WorkerBatch, name: string): Record<string, string> {
  return { "app.kubernetes.io/name": "evolve", "app.kubernetes.io/component": "worker", [JOB_LABEL]: labelValue(b.jobId), [SUBMISSION_LABEL]: name };
}

/** An answer of the API server. */
interface Answer {
  status: number;
  body: any;
  text: string;
}

/** Starts workers as a Kubernetes Job. */
export class KubernetesLauncher implements WorkerLauncher {
  readonly kind = "kubernetes";
  private access: KubeAccess | undefined;
  constructor(private readonly o: KubernetesOptions) {}

  /** The namespace objects go to: the flag's, else the kubeconfig context's, else `default`. */
  namespace(): string {
    return this.o.namespace ?? this.api().namespace ?? "default";
  }

  /** The submission's name: the job's id plus a suffix, a DNS-1123 label short enough for the pods' names. */
  name(jobId: string): string {
    return `evolve-${dnsPart(jobId, 40)}-${(this.o.suffix ?? (() => randomBytes(3).toString("hex")))()}`;
  }

  async submit(b: WorkerBatch): Promise<string> {
    const ns = this.namespace();
    const name = this.name(b.jobId);
    await this.expect(await this.call("POST", `/api/v1/namespaces/${ns}/secrets`, workerSecret({ namespace: ns }, b, name)), [201], `creating the workers' Secret ${name}`);
    const job = await this.call("POST", `/apis/batch/v1/namespaces/${ns}/jobs`, workerJob({ namespace: ns, image: this.o.image }, b, name));
    if (job.status !== 201) await this.call("DELETE", `/api/v1/namespaces/${ns}/secrets/${name}`).catch(() => {});
    await this.expect(job, [201], `creating the workers' Job ${name}`);
    return name;
  }

  async status(id: string): Promise<WorkerState[]> {
    const ns = this.namespace();
    const job = await this.call("GET", `/apis/batch/v1/namespaces/${ns}/jobs/${id}`);
    if (job.status === 404) return [];
    await this.expect(job, [200], `reading the Job ${id}`);
    const pods = await this.pods(id);
    const conditions: { type?: string; status?: string }[] = job.body?.status?.conditions ?? [];
    const ended = conditions.find((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True")?.type;
    const states = pods.map((p: any) => ({ id: p.metadata.name as string, state: podState(p.status?.phase, ended), ...(p.spec?.nodeName ? { node: p.spec.nodeName as string } : {}) }));
    // no pods left (deleted, or garbage-collected after the end): the Job's condition speaks for them
    if (states.length === 0 && ended) return [{ id, state: ended === "Complete" ? "success" : "failed" }];
    return states;
  }

  async cancel(id: string): Promise<void> {
    const ns = this.namespace();
    const job = await this.call("DELETE", `/apis/batch/v1/namespaces/${ns}/jobs/${id}?propagationPolicy=Background`);
    await this.expect(job, [200, 202, 404], `deleting the Job ${id}`);
    const secret = await this.call("DELETE", `/api/v1/namespaces/${ns}/secrets/${id}`);
    await this.expect(secret, [200, 202, 404], `deleting the Secret ${id}`);
  }

  async logs(id: string): Promise<string> {
    const ns = this.namespace();
    const out: string[] = [];
    for (const p of await this.pods(id)) {
      const r = await this.call("GET", `/api/v1/namespaces/${ns}/pods/${p.metadata.name}/log?container=worker`);
      // a pod not started yet has no log: it is listed, empty
      out.push(`==> ${p.metadata.name} <==\n${r.status === 200 ? r.text : ""}`);
    }
    return out.join("\n");
  }

  /** Writes the Secret (token left out) and the Job exactly as `submit` would POST them; calls nothing. */
  async dryRun(b: WorkerBatch, dir: string): Promise<string[]> {
    const ns = this.o.namespace ?? (existsSync(this.kubeconfigPath()) ? this.namespace() : "default");
    const name = this.name(b.jobId);
    await mkdir(dir, { recursive: true });
    const secret = join(dir, "secret.json");
    const job = join(dir, "job.json");
    await writeFile(secret, JSON.stringify(workerSecret({ namespace: ns }, { ...b, token: "<EVOLVE_WORKER_TOKEN: set at submission>" }, name), null, 2) + "\n");
    await writeFile(job, JSON.stringify(workerJob({ namespace: ns, image: this.o.image }, b, name), null, 2) + "\n");
    return [secret, job];
  }

  private kubeconfigPath(): string {
    return resolve(this.o.kubeconfig ?? process.env.KUBECONFIG?.split(":").find((p) => p !== "") ?? join(homedir(), ".kube", "config"));
  }

  private api(): KubeAccess {
    this.access ??= loadKubeconfig(this.o.kubeconfig);
    return this.access;
  }

  private async pods(id: string): Promise<any[]> {
    const r = await this.call("GET", `/api/v1/namespaces/${this.namespace()}/pods?labelSelector=${encodeURIComponent(`${SUBMISSION_LABEL}=${id}`)}`);
    await this.expect(r, [200], `listing the pods of ${id}`);
    return r.body?.items ?? [];
  }

  /** Refuses an answer not in `ok` with the stable code its status means, quoting the API's Status message. */
  private async expect(r: Answer, ok: number[], doing: string): Promise<void> {
    if (ok.includes(r.status)) return;
    const message = typeof r.body?.message === "string" ? r.body.message : r.text.trim().slice(0, 300) || `HTTP ${r.status}`;
    const where = `${doing} in namespace ${this.namespace()} at ${this.api().server}`;
    if (r.status === 401 || r.status === 403)
      throw new EvolveError("kubernetes_forbidden", `${where}: the API server refused (${r.status}): ${message}`, "the kubeconfig's user needs RBAC to create, get, list and delete jobs, secrets and pods (and get pods/log) in that namespace");
    if (r.status === 409) throw new EvolveError("kubernetes_conflict", `${where}: ${message}`, "an object of that name exists already: delete it (kubectl delete job,secret -l evolve.dev/job=…) or run again");
    if (r.status === 422) {
      const causes = ((r.body?.details?.causes ?? []) as { field?: string; message?: string }[]).map((c) => `${c.field ?? "?"}: ${c.message ?? ""}`);
      throw new EvolveError("kubernetes_invalid", `${where}: the API server found the manifest invalid: ${message}${causes.length ? ` (${causes.join("; ")})` : ""}`, "check --k8s-image and --namespace; `run --dry-run` writes the manifests");
    }
    throw new EvolveError("executor_unavailable", `${where}: HTTP ${r.status}: ${message}`, "check the cluster (kubectl cluster-info) and --kubeconfig");
  }

  /** One request to the API server; JSON in and out. */
  private call(method: string, path: string, body?: unknown): Promise<Answer> {
    const a = this.api();
    const url = new URL(a.server + path);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { Accept: "application/json", "User-Agent": "evolve" };
    if (payload !== undefined) headers["Content-Type"] = "application/json";
    if (a.token) headers.Authorization = `Bearer ${a.token}`;
    const tls = url.protocol === "https:" ? { ca: a.ca, cert: a.cert, key: a.key, rejectUnauthorized: !a.insecure } : {};
    return new Promise<Answer>((resolvePromise, reject) => {
      const req = (url.protocol === "https:" ? https : http).request(url, { method, headers, ...tls }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          resolvePromise({ status: res.statusCode ?? 0, body: parsed, text });
        });
        res.on("error", reject);
      });
      req.on("error", (e) => reject(new EvolveError("executor_unavailable", `the Kubernetes API server at ${a.server} could not be reached: ${e.message}`, "check the kubeconfig's server and the network (kubectl cluster-info)")));
      req.end(payload);
    });
  }
}

function podState(phase: string | undefined, ended: string | undefined): WorkerState["state"] {
  if (phase === "Succeeded") return "success";
  if (phase === "Failed") return "failed";
  // the Job failed (backoff limit reached): what still runs is being stopped
  if (ended === "Failed") return "killed";
  if (phase === "Pending") return "pending";
  if (phase === "Running") return "running";
  return "unknown";
}
