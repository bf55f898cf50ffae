/**
 * The dashboard in a real browser: Debian's chromium driven by playwright-core (no downloaded browser), against the
 * real `evolve serve` (`bun main.ts serve`, a process of its own) over a store built as the runner writes it, an
 * evolution project and a Meta-Harness run (tests/support/dashboard-evolution.ts). A browser without the login
 * cookie is sent to /login; logged in with a token, every page (the evolution pages included) loads with no console
 * error and no script from the data running, ATIF steps move with j/k, the live trace grows while events are
 * appended, scrolling pages the rest of a long trace in, and compare shows the right differences. Screenshots are
 * kept under `artifacts/dashboard/` (EVOLVE_ARTIFACTS overrides; never committed). Not in the unit tier: it needs
 * chromium.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createToken } from "../engine/serve/tokens.ts";
import { chunkEvent } from "../engine/trace/events.ts";
import { openTraceWriter } from "../engine/trace/store.ts";
import { evolutionFixture } from "./support/dashboard-evolution.ts";
import { dashboardFixture } from "./support/dashboard-store.ts";

const CHROMIUM = process.env.EVOLVE_CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = resolve(process.env.EVOLVE_ARTIFACTS ?? join(__dirname, "..", "artifacts"), "dashboard");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

const ROOT = resolve(__dirname, "..");
const fx = dashboardFixture();
const evo = evolutionFixture(fx);
const server = { url: "" };
let proc: ChildProcess | undefined;
let browser: Browser;
let context: BrowserContext;
let token: string;

/** Starts `bun main.ts serve --port 0` on the fixture's home; resolves with its base URL once it listens. */
function startServe(): Promise<string> {
  proc = spawn(join(ROOT, "node_modules/.bin/bun"), [join(ROOT, "main.ts"), "serve", "--port", "0", "--project", evo.project, "--metaharness-run", evo.run], {
    cwd: ROOT,
    env: { ...process.env, EVOLVE_HOME: fx.home, EVOLVE_AGENTS_DIR: join(fx.home, "agents"), NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((done, fail) => {
    let seen = "";
    const timer = setTimeout(() => fail(new Error(`serve never listened: ${seen}`)), 60_000);
    proc!.stdout!.on("data", (b) => {
      seen += b;
      const m = /dashboard (http:\/\/\S+)\//.exec(seen);
      if (m) {
        clearTimeout(timer);
        done(m[1]!);
      }
    });
  });
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (scripts/setup.sh and .ci/run install it)`);
  mkdirSync(ARTIFACTS, { recursive: true });
  token = createToken(fx.store, { name: "browser" }).token;
  server.url = await startServe();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
  context = await browser.newContext();
  // log in once through the form, as a person would; every page after carries the cookie
  const login = await context.newPage();
  await login.goto(`${server.url}/jobs`);
  expect(new URL(login.url()).pathname).toBe("/login");
  await login.locator('input[name="token"]').fill(token);
  await login.getByRole("button", { name: "Log in" }).click();
  await login.waitForURL(/\/jobs$/);
  await login.close();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  proc?.kill("SIGTERM");
  await fx.store.close();
  rmSync(fx.home, { recursive: true, force: true });
  rmSync(evo.dir, { recursive: true, force: true });
});

/** A fresh page that records console errors and failed requests. */
async function open(path: string): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  const r = await page.goto(`${server.url}${path}`);
  expect(r?.status(), path).toBe(200);
  await page.waitForLoadState("load");
  return { page, errors };
}

async function shot(page: Page, name: string) {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: false });
}

describe("the dashboard in chromium", () => {
  it("sends a browser without the login cookie to the login form, and refuses a wrong token", async () => {
    const anon = await browser.newContext();
    const page = await anon.newPage();
    await page.goto(`${server.url}/evolution`);
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.locator('input[name="token"]').fill("evk_nope");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").waitFor();
    expect(await page.getByRole("alert").textContent()).toContain("unknown or revoked");
    await shot(page, "login-refused");
    await anon.close();
  });

  it("every page loads with no console error, and no script from the data runs", async () => {
    const pages: [string, string][] = [
      ["jobs", "/jobs"],
      ["job", `/jobs/${fx.cand}`],
      ["check-job", `/jobs/${fx.check}`],
      ["compare", `/compare?jobs=${fx.base},${fx.cand}`],
      ["trial", `/trials/${fx.rich}`],
      ["steps", `/trials/${fx.rich}/steps`],
      ["file", `/trials/${fx.rich}/file?path=%2Fapp%2Fmain.py`],
      ["datasets", "/datasets"],
      ["dataset", "/datasets/demo"],
      ["evolution", "/evolution"],
      ["screen", "/evolution/screens/s-1"],
      ["genebank", "/evolution/genebank"],
      ["candidate-diff", `/evolution/candidates/${evo.c2.id}`],
      ["candidate-diff-hostile", `/evolution/candidates/${evo.c1.id}`],
      ["metaharness", "/metaharness"],
    ];
    for (const [name, path] of pages) {
      const { page, errors } = await open(path);
      await shot(page, name);
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), path).toBeUndefined();
      expect(errors, path).toEqual([]);
      await page.close();
    }
  });

  it("moves through ATIF steps with j/k and the arrow keys", async () => {
    const { page, errors } = await open(`/trials/${fx.rich}/steps`);
    const focused = () => page.evaluate(() => document.activeElement?.id ?? "");
    const first = await page.locator("#steps .step").first().getAttribute("id");
    await page.locator("#steps .step").first().focus();
    await page.keyboard.press("j");
    const second = await focused();
    expect(second).not.toBe(first);
    expect(await page.locator(`#${second}`).getAttribute("aria-current")).toBe("true");
    await page.keyboard.press("ArrowDown");
    expect(await focused()).not.toBe(second);
    await page.keyboard.press("k");
    expect(await focused()).toBe(second);
    await page.keyboard.press("ArrowUp");
    expect(await focused()).toBe(first);
    await shot(page, "steps-keyboard");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("pages the rest of a long trace in on scroll, with tool output folded under its call", async () => {
    const { page, errors } = await open(`/trials/${fx.rich}`);
    expect(await page.locator('li[data-seq="200"]').count()).toBe(0);
    // the call's output moved under its call
    expect(await page.locator('details[data-call="call-1"] .result').count()).toBe(1);
    await page.locator("#trace-more").scrollIntoViewIfNeeded();
    await page.locator('li[data-seq="200"]').waitFor({ timeout: 10_000 });
    for (let i = 0; i < 5 && (await page.locator('li[data-seq="499"]').count()) === 0; i++) {
      await page.locator("#trace-more").click().catch(() => {});
      await page.waitForTimeout(200);
    }
    await page.locator('li[data-seq="499"]').waitFor({ timeout: 10_000 });
    // 500 events, the tool result among them folded into its call's item
    expect(await page.locator("ol.trace > li[data-seq]").count()).toBe(499);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("grows the live trace while events are appended, and says when the trial settled", async () => {
    const { page, errors } = await open(`/trials/${fx.runningTrial}`);
    expect(await page.locator("#trace-state").textContent()).toBe("live");
    const w = openTraceWriter(fx.home, fx.runningTrial);
    for (let i = 0; i < 3; i++) {
      w.append([chunkEvent("agent_message_chunk", `live event ${i}`)]);
      await page.locator("ol.trace > li", { hasText: `live event ${i}` }).waitFor({ timeout: 10_000 });
    }
    w.close();
    await shot(page, "trial-live");
    fx.store.putTrial({ ...fx.store.getTrial(fx.runningTrial)!, status: "SCORED", rewards: { reward: 1 } });
    await page.waitForFunction(() => document.getElementById("trace-state")?.textContent === "settled", undefined, { timeout: 10_000 });
    expect(await page.locator("ol.trace > li[data-seq]").count()).toBe(4);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("compare shows each task's difference from the baseline and the paired interval", async () => {
    const { page } = await open(`/compare?jobs=${fx.base},${fx.cand}`);
    expect(await page.locator("#compare-grid td.diff").allTextContents()).toEqual(["+0.500", "+0.500", "0.000"]);
    expect((await page.locator("#compare-stats .mean-gain").textContent())?.trim()).toBe("+0.333");
    expect(await page.locator("#compare-stats .ci").textContent()).toMatch(/^\[-?\d\.\d{3}, \d\.\d{3}\]$/);
    await page.close();
  });

  it("picks jobs to compare from the jobs list with the keyboard", async () => {
    const { page, errors } = await open("/jobs");
    await page.locator(`input[value="${fx.base}"]`).focus();
    await page.keyboard.press("Space");
    await page.locator(`input[value="${fx.cand}"]`).focus();
    await page.keyboard.press("Space");
    await page.getByRole("button", { name: "Compare selected" }).press("Enter");
    await page.waitForURL(/\/compare\?/);
    expect(await page.locator("#compare-grid td.diff").count()).toBe(3);
    expect(errors).toEqual([]);
    await page.close();
  });
});
