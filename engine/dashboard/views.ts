/**
 * The dashboard's page pieces: the layout, statuses in words, numbers as tables print them, and one trace event as a
 * list item. Everything goes through html.ts's template, so every value is escaped.
 */
import type { StoredLine } from "../trace/store.ts";
import { isLiveStatus, isSettledStatus } from "../trial/lifecycle.ts";
import type { TrialStatus } from "../trial/types.ts";
import { CSS } from "./assets.ts";
import { h, raw, type Safe } from "./html.ts";

/** The top navigation's pages. */
const NAV: [string, string][] = [
  ["/jobs", "Jobs"],
  ["/datasets", "Datasets"],
  ["/evolution", "Evolution"],
  ["/metaharness", "Meta-Harness"],
];

/**
 * A whole page: the stylesheet inline (one request fewer), the script deferred, a skip link, one main landmark. Log out
 * is a POST form, not a link: the cookie is HttpOnly (no script can drop it) and a GET must not change state.
 */
export function page(title: string, current: string, body: Safe, o: { loggedIn?: boolean } = {}): string {
  return h`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>${title} · evolve</title><style>${raw(CSS)}</style><script src="/assets/app.js" defer></script></head>
<body><a class="sr-only" href="#main">Skip to content</a>
<header class="top"><a href="/jobs">evolve</a><nav aria-label="Pages">${NAV.map(([href, label]) => h` <a href="${href}"${current === href ? raw(' aria-current="page"') : ""}>${label}</a>`)}</nav>${o.loggedIn === false ? "" : raw('<form class="logout" method="post" action="/logout"><button type="submit">Log out</button></form>')}</header>
<main id="main">${body}</main></body></html>`.text;
}

/** A job or trial status as a word with a shape before it (✓ ✗ ● !), so its meaning never rests on colour alone. */
export function statusTag(status: string): Safe {
  const cls = status === "SCORED" || status === "COMPLETED" ? "ok" : status === "RUNNING" || status === "QUEUED" || status === "SCORING" ? "live" : status === "INTERRUPTED" || status === "CANCELLED" || status === "BUDGET" ? "warn" : "bad";
  return h`<span class="status ${cls}">${status}</span>`;
}

/** A reward as tables print it (3 decimals), `-` when there is none. */
export function num(x: number | null | undefined, digits = 3): string {
  return x === null || x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(digits);
}

/** USD with a `≥` when it is a lower bound; `-` when nothing was measured. */
export function usd(x: number | null | undefined, lowerBound = false): string {
  if (x === null || x === undefined) return "-";
  return `${lowerBound ? "≥ " : ""}$${x < 0.01 && x > 0 ? x.toFixed(4) : x.toFixed(2)}`;
}

/** Seconds as `12.3s`, `4m 05s`, `1h 02m`. */
export function seconds(s: number | null): string {
  if (s === null) return "-";
  if (s < 60) return `${s.toFixed(1)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** Whether a trial may still grow (its trace, its record). */
export function trialLive(status: TrialStatus): boolean {
  return isLiveStatus(status) || !isSettledStatus(status);
}

/** The first `max` characters of a text, with a note of how much was left out. */
function cut(s: string, max = 20_000): string {
  return s.length > max ? `${s.slice(0, max)}\n… (${s.length - max} more characters)` : s;
}

function text(c: unknown): string {
  return c && typeof c === "object" && typeof (c as { text?: unknown }).text === "string" ? (c as { text: string }).text : "";
}

/**
 * One stored trace event as a list item. A tool call is a `<details>` (folded) keyed by its call id; its later
 * update (status, output) is an item naming that id, which the client script moves under the call wherever the two
 * arrived (the same page, a later page, the live stream); without the script both stay readable where they are.
 */
export function eventItem(line: StoredLine): Safe {
  let ev: { type: string; data: { update?: Record<string, unknown>; _prompt?: { text?: string; system?: string } } };
  try {
    ev = JSON.parse(line.json);
  } catch {
    return h`<li data-seq="${line.seq}"><span class="kind">unreadable</span></li>`;
  }
  const u = (ev.data?.update ?? {}) as Record<string, any>;
  const seq = line.seq;
  switch (ev.type) {
    case "prompt":
      return h`<li data-seq="${seq}" class="prompt"><span class="kind">prompt</span><pre>${cut(ev.data?._prompt?.text ?? "")}</pre></li>`;
    case "user_message_chunk":
    case "agent_message_chunk":
      return h`<li data-seq="${seq}" class="msg"><span class="kind">${ev.type === "user_message_chunk" ? "user" : "agent"}</span>${cut(text(u.content))}</li>`;
    case "agent_thought_chunk":
      return h`<li data-seq="${seq}" class="thought"><span class="kind">thought</span>${cut(text(u.content))}</li>`;
    case "tool_call":
      return h`<li data-seq="${seq}" class="tool"><details data-call="${String(u.toolCallId ?? "")}"><summary><span class="kind">tool ${String(u.kind ?? "")}</span><strong>${String(u.name ?? "")}</strong> ${String(u.title ?? "")} <span class="tstatus mut">${String(u.status ?? "")}</span></summary><pre>${cut(JSON.stringify(u.rawInput ?? {}, null, 2))}</pre></details></li>`;
    case "tool_call_update": {
      const out = Array.isArray(u.content) ? u.content.map((c: { content?: unknown }) => text(c?.content)).join("") : u.rawOutput !== undefined ? JSON.stringify(u.rawOutput) : "";
      return h`<li data-seq="${seq}" class="tool" data-result-for="${String(u.toolCallId ?? "")}" data-status="${String(u.status ?? "")}"><span class="kind">tool result</span>${String(u.status ?? "")}<div class="result"><span class="kind">output (${String(u.status ?? "")})</span><pre>${cut(out)}</pre></div></li>`;
    }
    case "plan":
      return h`<li data-seq="${seq}" class="plan"><span class="kind">plan</span><ol>${(Array.isArray(u.entries) ? u.entries : []).map((e: { content?: string; status?: string }) => h`<li>${e.status === "completed" ? "[done] " : e.status === "in_progress" ? "[doing] " : "[todo] "}${e.content ?? ""}</li>`)}</ol></li>`;
    case "usage": {
      const c = (u.usage ?? {}) as Record<string, number>;
      return h`<li data-seq="${seq}" class="usage"><span class="kind">usage ${String(u.source ?? "")}</span>${u.model ? `${u.model}: ` : ""}prompt ${c.promptTokens ?? 0}, output ${c.completionTokens ?? 0}${typeof u.costUsd === "number" ? `, ${usd(u.costUsd)}` : ""}</li>`;
    }
    case "error":
      return h`<li data-seq="${seq}" class="error"><span class="kind">error${u.fatal ? " (fatal)" : ""}</span>${cut(String(u.message ?? ""))}</li>`;
    case "warning":
      return h`<li data-seq="${seq}" class="warning"><span class="kind">warning</span>${cut(String(u.message ?? ""))}</li>`;
    case "trace_loss":
      return h`<li data-seq="${seq}" class="error"><span class="kind">trace loss</span>${String(u.count ?? 0)} unreadable lines: ${String(u.reason ?? "")}</li>`;
    default:
      return h`<li data-seq="${seq}"><span class="kind">${ev.type}</span></li>`;
  }
}

/** A page of events as list items. */
export function eventItems(lines: readonly StoredLine[]): Safe {
  return h`${lines.map(eventItem)}`;
}

/**
 * The login form of `evolve serve`: a browser cannot send a Bearer header, so it posts the token once and the server
 * keeps it in an HttpOnly cookie. `next` is where to go after (a path the server already checked).
 */
export function loginPage(o: { next: string; error?: string }): string {
  const body = h`<h1>Log in</h1>
${o.error ? h`<p role="alert"><strong>${o.error}</strong></p>` : ""}
<p>Paste an API token of this server (<code>evolve auth token create --name browser</code> prints one). It is kept in an HttpOnly cookie for this browser session.</p>
<form method="post" action="/login"><input type="hidden" name="next" value="${o.next}"><label>API token <input type="password" name="token" autocomplete="off" required></label> <button type="submit">Log in</button></form>`;
  // whoever sees this form holds no cookie yet: nothing to log out of
  return page("Log in", "", body, { loggedIn: false });
}
