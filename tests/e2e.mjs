// End-to-end test of the built planner page (dist/) in Debian's Chromium,
// driven by playwright-core. Serves dist/ itself on 127.0.0.1 and fails if
// the page requests anything from anywhere else.
//
//   node tests/e2e.mjs [--screenshot PATH] [--timings PATH] [--dist DIR] [--bench]
//
// Timings are measured and printed, but wall-clock time is the machine's as
// much as the page's: this test (what `cargo xtask test` and CI run) fails a
// timing only where no machine explains it, a median over 5× its budget (an
// answer that never comes fails its wait). `--bench` (`cargo xtask bench
// page`, run by a person on a quiet machine) runs the timed sections alone
// and fails every timing above its budget.
//
// Prints one line per check and closes with "N passed, M failed". Every wait
// has a deadline, and a wait that runs out fails its section (nothing is
// swallowed), so a figure is never read from a page that did not answer.
//
// What it covers:
//  - the default view (generated DeepSeek-V3, the page's default 8 × 8 GPUs):
//    every planner that reads the loads (BASE, EPLB, CRAFT, GRACE), and
//    GRACE's note that a count-only trace has no affinity;
//  - GRACE's views on a generated trace with token routes: the (S, U) curve
//    with the chosen r, the affinity map in group order with its group
//    boundaries, untouched by a budget change, moved by a layer change,
//    re-grouped by a GPU change;
//  - the readouts under the charts (details of what the pointer is over);
//  - Libra, a per-batch planner: its row (under its own rule), the per-batch
//    timeline (a point per batch, its bytes copied), N and the predictor as
//    live controls, and a predictor the trace cannot feed refused visibly;
//  - the hardware: every plan's predicted step, tokens/s against BASE and
//    its breakdown; a slower machine slows every step; the budget path
//    timed with prices on (at most 2 ms more in the worker);
//  - the dispatch rule: the summary's caption and the traffic panel name it,
//    the figures change and come back under even, no cross-node traffic on
//    one node;
//  - the budget path, timed over 12 changes on 8 × 8 and on 1 × 64: each
//    sample waits for the page's own timing of *that* change (its sequence
//    number and R), and is also timed from outside, as the last DOM mutation
//    of the figures after the input (a MutationObserver); the page's own
//    breakdown says where the time went (to the worker, in it — of which
//    planning —, back, decoding, drawing);
//  - the same changes made from 1 s after the page opens, while the worker
//    prepares ahead (the page says what for in #ahead), reported beside the
//    idle ones (issue 52);
//  - every file in crates/moeplan/tests/fixtures/broken/ (read at test time)
//    through the file input: one visible error with the words EXPECTED gives,
//    the plan and trace kept, and a budget change still working; and a file
//    over the page's 512 MiB on disk, refused before it is read;
//  - a worker that dies: a second Chromium whose wasm memory is capped at
//    256 MiB (--js-flags=--wasm-max-mem-pages) loads npz-bomb-lying.npz,
//    which fits the page's 512 MiB reading budget but not that memory, so the
//    worker runs out of memory and traps; the page must say so, restart it
//    with the previous trace (generated, then a file's bytes) and go on.
//    And a worker that does not answer: a page whose read deadline is set
//    short (globalThis.moeplanReadDeadlineMs, before it loads).

import { argValue, check, dist, finish, launch, root, section, serve, track } from "./lib.mjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";

const shared = path.resolve(root, "..", "shared", "data");
const fixtures = path.join(root, "crates", "moeplan", "tests", "fixtures");
const brokenDir = path.join(fixtures, "broken");

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const round = (x, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

/// `--bench`: the timed sections alone, each timing held to its budget.
const BENCH = process.argv.includes("--bench");
/// The sections `--bench` runs: those that time a change against a budget
/// (and "default view opens", which opens the page the budget and the
/// hardware sections time).
const BENCH_SECTIONS = ["default view opens", "budget timings", "hardware", "re-planning while serving", "changes soon after opening", "change timings"];
if (BENCH && !process.env.E2E_ONLY) process.env.E2E_ONLY = BENCH_SECTIONS.join("|");

/// Checks a timing `r` (`p50_ms`, `p95_ms`, `n`) against its budget `b`
/// (`p50` and/or `p95`, ms): under `--bench` the budget itself; in the test
/// command (`cargo xtask test`) only that every change was answered — no
/// wall-clock gate, so a slower machine still lands work. Either way the row
/// says whether the budget was met and by how much it was missed (`r.met`,
/// `r.missed`).
function timing(name, r, b, detail = JSON.stringify(r)) {
  const over = [["p50", r.p50_ms, b.p50], ["p95", r.p95_ms, b.p95]]
    .filter(([, x, limit]) => limit !== undefined && !(x <= limit))
    .map(([p, x, limit]) => `${p} ${x} ms over ${limit} by ${round(x - limit, 1)}`);
  r.met = over.length === 0;
  r.missed = over.join(", ");
  const said = `budget${b.p50 !== undefined ? ` p50 ≤ ${b.p50}` : ""}${b.p95 !== undefined ? ` p95 ≤ ${b.p95}` : ""} ms: ${r.met ? "met" : `missed (${r.missed})`}`;
  const answered = r.n > 0 && r.p50_ms > 0;
  if (BENCH) return check(`${name} (${said})`, answered && r.met, detail);
  return check(`${name}: answered, median ${r.p50_ms} ms (reported, not gated); ${said}`, answered, detail);
}

/// The page's weight budgets, gzip -9 bytes: 400 KB for the
/// main thread and 1.0 MB for everything the page loads when it opens. The
/// file reader (its own worker, `reader_*`) is loaded only when a file is
/// read; its ceiling holds it near what it weighs now (docs/speed.md).
const MAIN_WASM_GZIP = 400_000;
const PAGE_GZIP = 1_000_000;
const READER_GZIP = 260_000;

/// A page that records requests off localhost and uncaught page errors.
async function openPage(browser, origin, hash = "", init = undefined) {
  const page = track(await browser.newPage({ viewport: { width: 1400, height: 1000 } }), origin);
  if (init) await page.addInitScript(init);
  await page.goto(`${origin}/${hash}`);
  await page.waitForSelector("#bal-craft", { timeout: 120000 });
  await page.waitForSelector("#status.ready", { timeout: 60000 });
  return page;
}

/// The plans the page shows, by planner id: every registered planner that
/// reads the loads, in the registry's order.
const PLANS = ["base", "eplb", "craft", "grace"];
/// With Libra, shown where the trace is small enough to re-place every
/// batch on the page (moeplan_view::PER_BATCH_CELLS; the default is).
const WITH_LIBRA = [...PLANS, "libra"];
/// Plans measured under the page's rule: all but a per-batch plan (Libra),
/// which is served under its own (libra-rebalance).
/// Rows judged under their own system's rule by default (issue 53):
/// Libra under its rebalancer, GRACE under its topology-aware routing.
const OWN_RULES = { "traffic-libra": "libra-rebalance", "traffic-grace": "grace-topology" };
const ownRule = (t) => OWN_RULES[t.id] !== undefined && t.rule === OWN_RULES[t.id];
const planIds = (page) => page.$$eval("#summary tbody tr", (rows) => rows.map((r) => r.id.replace(/^row-/, "")));
const sameIds = (rows, ids) => JSON.stringify(rows.map((r) => r.id.replace(/^traffic-/, ""))) === JSON.stringify(ids);

const text = async (page, sel) => (await page.textContent(sel, { timeout: 60000 }))?.trim();
/// The summary table's text, once it shows what it will: on a priced page
/// Libra's price follows its figures (the worker's follow-up answer).
const summary = async (page) => {
  await page.waitForFunction(() => {
    const step = document.querySelector("#step-libra");
    return !document.querySelector("#cost") || !step || /ms$/.test(step.textContent);
  }, null, { timeout: 60000 }).catch(() => {});
  return page.$eval("#summary", (el) => el.innerText);
};
const craftR = async (page) => Number((await text(page, "#row-craft td")).match(/R = (\d+)/)?.[1]);
const statusOf = (page) => page.$eval("#status", (el) => ({
  text: el.textContent.trim(), cls: el.className, restarts: Number(el.dataset.restarts),
}));
const visibleErrors = (page) => page.locator(".error:visible").allTextContents();

/// Sets CRAFT's budget R with the slider and waits for that change's plan:
/// the page's timings of *this* change (their sequence numbers move by one and
/// name R) and, timed from outside, the figures' last DOM mutation after the
/// input. Every wait fails when the page does not answer within `timeout`.
async function setBudget(page, r, timeout = 60000) {
  const seq = () => page.$eval("#timings", (el) => ({
    dom: Number(el.dataset.budgetDomSeq), frame: Number(el.dataset.budgetFrameSeq),
  }));
  const before = await seq();
  const external = await page.evaluate(({ r, timeout }) => new Promise((resolve, reject) => {
    const title = () => document.querySelector("#row-craft td")?.textContent ?? "";
    const want = `CRAFT R = ${r}`;
    if (title().includes(want)) { reject(new Error(`budget is already ${r}`)); return; }
    const figures = document.querySelector(".figures");
    let last = 0;
    let shown = false;
    const obs = new MutationObserver(() => {
      last = performance.now();
      if (!shown && title().includes(want)) {
        shown = true;
        // Let every microtask and a few tasks run: any later mutation of the
        // figures still counts (`last`).
        setTimeout(() => { obs.disconnect(); clearTimeout(timer); resolve(last - t0); }, 40);
      }
    });
    obs.observe(figures, { subtree: true, childList: true, characterData: true, attributes: true });
    const timer = setTimeout(() => { obs.disconnect(); reject(new Error(`no plan for R = ${r} within ${timeout} ms`)); }, timeout);
    const input = document.querySelector("#budget");
    const t0 = performance.now();
    input.value = String(r);
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }), { r, timeout });
  await page.waitForFunction(({ b, r }) => {
    const d = document.querySelector("#timings")?.dataset ?? {};
    return Number(d.budgetDomSeq) > b.dom && Number(d.budgetFrameSeq) > b.frame && d.budgetR === String(r);
  }, { b: before, r }, { timeout });
  const after = await seq();
  if (after.dom !== before.dom + 1 || after.frame !== before.frame + 1) {
    throw new Error(`one budget change timed ${after.dom - before.dom} / ${after.frame - before.frame} times`);
  }
  const d = await page.$eval("#timings", (el) => ({ ...el.dataset }));
  return {
    external,
    dom: Number(d.budgetDomMs),
    frame: Number(d.budgetMs),
    worker: Number(d.budgetWorkerMs),
    receive: Number(d.budgetReceiveMs),
    decode: Number(d.budgetDecodeMs),
    toWorker: Number(d.budgetToWorkerMs),
    inWorker: Number(d.budgetInWorkerMs),
    fromWorker: Number(d.budgetFromWorkerMs),
    receiveToFrame: Number(d.budgetDrawMs),
    replicas: Number(await text(page, "#replicas-craft")),
    status: (await statusOf(page)).cls,
  };
}

/// Twelve budget changes on the page's current view, each timed.
async function timeBudget(page, label) {
  const start = await craftR(page);
  if (start !== 2) await setBudget(page, 2); // a known starting point, not timed
  const samples = [];
  for (const r of [1, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 2]) samples.push({ r, ...(await setBudget(page, r)) });
  const pick = (k) => samples.map((s) => s[k]);
  const t = {
    changes: samples.length,
    dom_ms_median: round(median(pick("external"))),
    dom_ms_max: round(Math.max(...pick("external"))),
    page_dom_ms_median: round(median(pick("dom"))),
    page_frame_ms_median: round(median(pick("frame"))),
    worker_ms_median: round(median(pick("worker"))),
    answer_ms_median: round(median(pick("receive"))),
    to_worker_ms_median: round(median(pick("toWorker"))),
    in_worker_ms_median: round(median(pick("inWorker"))),
    from_worker_ms_median: round(median(pick("fromWorker"))),
    decode_ms_median: round(median(pick("decode")), 3),
    draw_ms_median: round(median(samples.map((s) => s.dom - s.receive))),
    receive_to_frame_ms_median: round(median(pick("receiveToFrame"))),
    samples: pick("external"),
  };
  check(`${label}: 12 budget changes each re-plan CRAFT`,
    samples.every((s, i) => i === 0 || s.replicas !== samples[i - 1].replicas) && samples.every((s) => /ready/.test(s.status)),
    samples.map((s) => `R=${s.r}:${s.replicas}`).join(" "));
  check(`${label}: budget change → new plan in the DOM`, samples.every((s) => s.external > 0 && s.dom > 0),
    `median ${t.dom_ms_median} ms (page's own: ${t.page_dom_ms_median} ms = answer decoded ${t.answer_ms_median} ms `
    + `[to the worker ${t.to_worker_ms_median} ms, in it ${t.in_worker_ms_median} ms (planning ${t.worker_ms_median} ms), `
    + `back ${t.from_worker_ms_median} ms, decoding ${t.decode_ms_median} ms] + drawing ${t.draw_ms_median} ms; `
    + `next frame ${t.page_frame_ms_median} ms)`);
  return t;
}

/// The change timings as the README's Markdown table (one row per change,
/// the two defaults side by side), with the machine and its load.
function changeTable(machine, loadStart, loadEnd, table) {
  const cell = (trace, change) => {
    const r = table.find((x) => x.trace === trace && x.change === change);
    return !r || r.n === 0 ? "—" : r.n === 1 ? `${r.p50_ms}` : `${r.p50_ms} / ${r.p95_ms}${r.met === false ? " ✗" : ""}`;
  };
  const changes = [...new Set(table.map((r) => r.change))];
  const head = `change timings, p50 / p95 ms (✗: over budget) — ${machine}, load ${loadStart.join(" ")} → ${loadEnd.join(" ")}`;
  return [head, "", "| change | token routes | counts |", "| --- | ---: | ---: |",
    ...changes.map((c) => `| ${c} | ${cell("token routes", c)} | ${cell("counts", c)} |`)].join("\n");
}

/// The p-th percentile by nearest rank (with n < 20 samples, p95 is the slowest).
const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)];
};

/// One change made in the page and timed from outside it: from the input
/// event to the figures' last mutation once the change's answer is shown
/// (`kind` says what shows it) and the page says ready. Every kind of
/// change with a budget (docs/speed.md) has one here, so the table is one loop.
async function timeChange(page, kind, value, timeout = 60000) {
  return page.evaluate(({ kind, value, timeout }) => new Promise((resolve, reject) => {
    const q = (s) => document.querySelector(s);
    const ready = () => q("#status")?.classList.contains("ready");
    const rows = () => [...document.querySelectorAll(".traffic-row")].filter((r) => r.id !== "traffic-libra" && r.id !== "traffic-grace");
    const before = { ir: q("#ir-libra")?.textContent, cluster: q("#timings")?.dataset.clusterMs, options: q("#timings")?.dataset.optionsSeq };
    const shown = {
      gpus: () => new RegExp(`× ${value} GPU`).test(q(".scope")?.textContent ?? ""),
      nodes: () => new RegExp(`^${value} node\\(s\\)`).test(q(".scope")?.textContent ?? ""),
      rule: () => rows().length > 0 && rows().every((r) => r.dataset.rule === value),
      "libra-n": () => q("#ir-libra")?.textContent !== before.ir,
      predictor: () => q("#ir-libra")?.textContent !== before.ir,
      "grace-ratio": () => q("#timings")?.dataset.optionsSeq !== before.options,
    }[kind];
    const sel = { gpus: "#gpus", nodes: "#nodes", rule: "#rule", "libra-n": "#libra-n", predictor: "#predictor", "grace-ratio": "#grace-ratio" }[kind];
    let last = 0;
    let seen = false;
    // The line saying what the worker prepares ahead (#ahead) moves on
    // its own between changes: its mutations are not the change's.
    const ahead = (r) => (r.target.nodeType === 1 ? r.target : r.target.parentElement)?.closest("#ahead");
    const obs = new MutationObserver((records) => {
      if (records.every(ahead)) return;
      last = performance.now();
      if (!seen && shown() && ready()) {
        seen = true;
        setTimeout(() => { obs.disconnect(); clearTimeout(timer); resolve(last - t0); }, 40);
      }
    });
    obs.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    const timer = setTimeout(() => { obs.disconnect(); reject(new Error(`${kind} ${value}: not shown within ${timeout} ms`)); }, timeout);
    const input = q(sel);
    const t0 = performance.now();
    input.value = String(value);
    input.dispatchEvent(new Event("change", { bubbles: true }));
  }), { kind, value, timeout });
}

/// Waits until no plan is left for the follow-up answer (a cluster change
/// shows the static plans first and Libra's row after) and the page is ready.
const settled = (page, timeout = 60000) => page.waitForFunction(() =>
  ![...document.querySelectorAll(".note")].some((n) => /shown next/.test(n.textContent))
  && document.querySelector("#status")?.classList.contains("ready"), null, { timeout });

/// EXPECTED: file → the words its error must contain.
function expectedWords() {
  const words = new Map();
  for (const line of fs.readFileSync(path.join(brokenDir, "EXPECTED"), "utf8").split("\n")) {
    if (line.startsWith("#") || !line.trim()) continue;
    const tab = line.indexOf("\t");
    if (tab > 0) words.set(line.slice(0, tab), line.slice(tab + 1).trim());
  }
  return words;
}

/// Loads one file that must fail: one visible error naming it (with
/// `words`), the trace and plan kept, the worker alive, and a budget change
/// still answered. Returns the milliseconds to the error.
async function loadBroken(page, file, words, nextR, label = path.basename(file)) {
  const name = typeof file === "string" ? path.basename(file) : file.name;
  const before = { summary: await summary(page), trace: await text(page, "#trace-info"), st: await statusOf(page) };
  if (!/ready/.test(before.st.cls)) throw new Error(`status not ready before ${label}: ${before.st.text}`);
  const t0 = Date.now();
  await page.setInputFiles("#file", file);
  await page.waitForFunction((n) => {
    const s = document.querySelector("#status");
    return s?.classList.contains("error") && s.textContent.includes(n);
  }, name, { timeout: 60000 });
  const ms = Date.now() - t0;
  const shown = await visibleErrors(page);
  const msg = shown[0] ?? "";
  const after = { summary: await summary(page), trace: await text(page, "#trace-info"), st: await statusOf(page) };
  const ok = check(`${label}: one error with "${words}"`,
    shown.length === 1 && msg.toLowerCase().includes(words.toLowerCase()) && msg.startsWith(`${name}: `),
    `${ms} ms — ${msg.slice(0, 160)}${shown.length !== 1 ? ` (${shown.length} errors shown)` : ""}`);
  check(`${label}: plan and trace kept, worker alive`,
    after.summary === before.summary && after.trace === before.trace && after.st.restarts === before.st.restarts);
  const b = await setBudget(page, nextR);
  check(`${label}: budget change still works`, /ready/.test(b.status) && (await craftR(page)) === nextR,
    `R=${nextR}: ${b.replicas} replicas`);
  return { ms, ok };
}

/// Waits for the page to say its worker stopped and was restarted with the
/// previous trace; checks that trace and plan are back and a budget works.
async function expectRestart(page, { label, stopped, because, restarts, before, nextR }) {
  await page.waitForFunction((n) => {
    const s = document.querySelector("#status");
    return s?.classList.contains("error") && s.textContent.includes(n);
  }, stopped, { timeout: 60000 });
  await page.waitForFunction(() => /restarted it with the previous trace$/.test(
    document.querySelector("#status")?.textContent.trim() ?? ""), null, { timeout: 60000 });
  const st = await statusOf(page);
  const shown = await visibleErrors(page);
  check(`${label}: the page says so in one message`,
    shown.length === 1 && st.restarts === restarts && because.test(st.text), st.text);
  check(`${label}: previous trace and plan restored`,
    (await text(page, "#trace-info")) === before.trace && (await summary(page)) === before.summary,
    await text(page, "#trace-info"));
  const b = await setBudget(page, nextR);
  check(`${label}: budget change works on the fresh worker`, /ready/.test(b.status), `R=${nextR}: ${b.replicas} replicas`);
}

async function main() {
  if (!fs.existsSync(path.join(dist, "index.html"))) {
    console.log("FAIL dist/index.html is missing: run `cargo xtask dist` first");
    console.log("0 passed, 1 failed");
    process.exit(1);
  }
  let weight;
  // 0. What the page weighs, as a server sending gzip (-9) transfers it:
  // the main thread holds the UI only (Leptos and the page's own code; the
  // planners are in the worker), within its budget, and the whole page too.
  await section("page weight", async () => {
    const gz = (f) => zlib.gzipSync(fs.readFileSync(path.join(dist, f)), { level: 9 }).length;
    const loaded = ["index.html", "style.css", "moeplan-app.js", "moeplan-app_bg.wasm", "worker_loader.js", "worker.js", "worker_bg.wasm"];
    const onRead = ["reader_loader.js", "reader.js", "reader_bg.wasm"];
    const sizes = Object.fromEntries([...loaded, ...onRead].map((f) => [f, gz(f)]));
    const total = loaded.reduce((a, f) => a + sizes[f], 0);
    const reader = onRead.reduce((a, f) => a + sizes[f], 0);
    weight = { gzip_bytes: sizes, total_gzip_bytes: total, reader_gzip_bytes: reader };
    check(`main-thread wasm ≤ ${MAIN_WASM_GZIP / 1000} KB gzip`, sizes["moeplan-app_bg.wasm"] <= MAIN_WASM_GZIP,
      `${round(sizes["moeplan-app_bg.wasm"] / 1000, 1)} KB`);
    check(`everything the page loads when it opens ≤ ${PAGE_GZIP / 1000} KB gzip`, total <= PAGE_GZIP,
      `${round(total / 1000, 1)} KB: ${loaded.map((f) => `${f} ${round(sizes[f] / 1000, 1)}`).join(", ")}`);
    check(`the file reader, loaded when a file is read, ≤ ${READER_GZIP / 1000} KB gzip`, reader <= READER_GZIP,
      `${round(reader / 1000, 1)} KB: ${onRead.map((f) => `${f} ${round(sizes[f] / 1000, 1)}`).join(", ")}`);
  });

  const server = await serve(dist);
  const origin = `http://127.0.0.1:${server.address().port}`;
  const browser = await launch();
  const timings = {
    machine: `${os.cpus()[0]?.model} × ${os.cpus().length}, ${round(os.totalmem() / 2 ** 30, 0)} GiB, Chromium ${browser.version()}`,
    loadavg_start: os.loadavg().map((x) => round(x)),
  };
  const pages = [];
  const bigFile = path.join(os.tmpdir(), `moeplan-e2e-${process.pid}-big.json`);
  try {
    // 1. The default view: a generated DeepSeek-V3 trace on the page's
    // default cluster (8 nodes × 8 GPUs, 8 expert groups).
    let page;
    await section("default view opens", async () => {
      page = await openPage(browser, origin);
      pages.push(page);
      const workers = page.workers().map((w) => w.url());
      check("one worker when the page opens: the file reader starts only when a file is read",
        workers.length === 1 && workers[0].endsWith("/worker_loader.js"), workers.join(" "));
      check("the summary shows every planner that reads the loads, in the registry's order, Libra too",
        JSON.stringify(await planIds(page)) === JSON.stringify(WITH_LIBRA), JSON.stringify(await planIds(page)));
      const bal = Object.fromEntries(await Promise.all(WITH_LIBRA.map(async (k) => [k, await text(page, `#bal-${k}`)])));
      check("default plan renders", WITH_LIBRA.every((k) => Number(bal[k]) > 0 && Number(bal[k]) <= 1),
        JSON.stringify(bal));
      // Libra re-places every layer of every batch of the default (64
      // batches × 58 layers on 64 GPUs) in the worker. Its balance against
      // BASE is checked on counts below: the default's routes come from 8
      // ranks, and Libra keeps a rank's pairs on its own GPU when that GPU
      // holds a copy, so its copies load those 8 GPUs (docs/libra.md).
      const libraRow = await text(page, "#row-libra td");
      check("Libra on the default: per batch under libra-rebalance, with numbers",
        /LIBRA \(per batch, libra-rebalance\)/.test(libraRow) && Number(bal.libra) > 0,
        `${libraRow} · balancedness ${bal.libra} against BASE ${bal.base}`);
      check("default trace is generated DeepSeek-V3 with token routes, 64 batches", /generated deepseek-v3 with token routes, 64 batches/.test(await text(page, "#trace-info")),
        await text(page, "#trace-info"));
      check("default cluster is 8 × 8 with 8 groups", /nodes=8&gpus=8&groups=8/.test(page.url()), await text(page, ".scope"));
      check("charts are drawn", (await page.locator("svg.chart").count()) >= 5);
      // Issue 53: the default view is priced (h100-ib-ndr), every row names
      // the rule it is judged under and says why it wins or loses.
      // Libra's price comes with the follow-up answer (its series).
      await page.waitForFunction(() => /ms$/.test(document.querySelector("#step-libra")?.textContent ?? ""), null, { timeout: 60000 }).catch(() => {});
      const rows = await Promise.all(WITH_LIBRA.map(async (k) => ({
        id: k, step: await text(page, `#step-${k}`), tput: await text(page, `#tput-${k}`), x: await text(page, `#speedup-${k}`),
        rule: await text(page, `#rule-${k}`), reason: k === "base" ? "" : await text(page, `#reason-${k}`),
      })));
      check("the default view is priced: every row's step, tokens/s and × BASE filled (h100-ib-ndr)",
        (await page.$eval("#hardware", (e) => e.value)) === "h100-ib-ndr"
        && rows.every((r) => /^[\d.]+ ms$/.test(r.step) && Number(r.tput) > 0 && /^[\d.]+×$/.test(r.x)), JSON.stringify(rows));
      check("each row names its rule: GRACE and Libra their systems' own, the rest the one chosen (even)",
        rows.every((r) => r.rule === ({ grace: "under grace-topology, its system's own", libra: "under libra-rebalance, its system's own" }[r.id] ?? "under even")),
        JSON.stringify(rows.map((r) => [r.id, r.rule])));
      check("each row but BASE says why it wins or loses against BASE, by the largest term",
        rows.every((r) => r.id === "base" || /^(wins|loses) on (expert compute|dispatch and combine|copies not hidden|the dense part|attention's KV reads|KV cache): /.test(r.reason) || /^even with BASE/.test(r.reason)),
        JSON.stringify(rows.map((r) => [r.id, r.x, r.reason])));
      // Issue 53: the tagline names every balancer the page compares.
      const tagline = await text(page, ".tagline");
      check("the tagline names EPLB, CRAFT, GRACE and LIBRA against BASE", /EPLB, CRAFT, GRACE and LIBRA against BASE/.test(tagline), tagline);
      // The default carries token routes: GRACE groups by affinity (its
      // grouping views are drawn, no "by load only" note) and the traffic
      // panel tells plans apart (GRACE's groups keep pairs on their node).
      const graceNotes = (await page.locator(".planner-note[data-planner='grace']").allTextContents()).map((t) => t.trim());
      check("the default has token routes: GRACE grouped by affinity, its views drawn",
        /token routes/.test(await text(page, "#trace-info")) && await page.locator("#grace-views").isVisible()
        && !graceNotes.some((t) => /grouped by load only/.test(t)), `${await text(page, "#trace-info")} · ${graceNotes.join(" | ")}`);
      const cross = await page.$$eval(".traffic-row", (rows) => rows.map((r) => `${r.id}:${r.dataset.cross}`));
      check("on the default at least two plans' cross-node traffic differ",
        new Set(cross.map((c) => c.split(":")[1])).size >= 2, cross.join(" "));
      // A count-only trace: GRACE has no affinity and says so, visibly,
      // under the summary table.
      const pc0 = await openPage(browser, origin, "#routes=0");
      pages.push(pc0);
      const graceNote = pc0.locator(".planner-note[data-planner='grace']");
      const noteText = (await graceNote.allTextContents()).map((t) => t.trim());
      const [noteBox, tableBox] = [await graceNote.first().boundingBox(), await pc0.locator("#summary").boundingBox()];
      check("GRACE's note on a count-only trace shows under the summary",
        noteText.length === 1 && /^GRACE: .*no token routes.*grouped by load only/.test(noteText[0])
        && (await graceNote.first().isVisible()) && noteBox && tableBox && noteBox.y >= tableBox.y + tableBox.height,
        noteText.join(" | "));
      // Counts arrive evenly from all 64 GPUs: Libra's copies and
      // rebalancing beat the contiguous base they start from.
      const [libra0, base0] = [Number(await text(pc0, "#bal-libra")), Number(await text(pc0, "#bal-base"))];
      check("Libra on the count-only default: more balanced than BASE, its base", libra0 > base0,
        `balancedness ${libra0} against BASE ${base0}`);
      await pc0.close();
      // Details show under a chart when the pointer is over it (no element
      // per bar, cell or box to carry a tooltip).
      const readout = async (chart, fx, fy) => {
        const svg = page.locator(chart);
        await svg.scrollIntoViewIfNeeded();
        const box = await svg.boundingBox();
        await page.mouse.move(box.x + box.width * fx, box.y + box.height * fy);
        return (await svg.locator("xpath=following-sibling::p[1]").textContent({ timeout: 60000 })).trim();
      };
      const said = {
        placement: await readout("figure.wide svg.chart", 0.1, 0.83),
        heat: await readout("svg.heat", 0.5, 0.4),
        replicas: await readout("svg[aria-label='replicas per layer']", 0.5, 0.5),
        layers: await readout("svg[aria-label='balancedness per layer']", 0.5, 0.5),
        curve: await readout("svg[aria-label='CRAFT balancedness against replicas per GPU']", 0.5, 0.5),
      };
      await page.mouse.move(0, 0);
      await page.evaluate(() => window.scrollTo(0, 0));
      check("pointing at a chart tells what is there",
        /^GPU 2: expert \d+( \(1 of \d+ copies\))? — [\d.]+ % of the layer's tokens$/.test(said.placement)
        && /^layer \d+, GPU \d+: [\d.]+ × the layer's mean load$/.test(said.heat)
        && /^layer \d+: CRAFT \d+ replicas · EPLB \d+ · GRACE \d+ · LIBRA \d+$/.test(said.replicas)
        && /^layer \d+: BASE [\d.]+ · EPLB [\d.]+ · CRAFT [\d.]+ · GRACE [\d.]+ · LIBRA [\d.]+$/.test(said.layers)
        && /^R = \d+: \d+ replicas, balancedness [\d.]+, bound [\d.]+$/.test(said.curve),
        Object.values(said).join(" | "));
    });
    if (!page && !process.env.E2E_ONLY) throw new Error("the page did not open");

    // 2. The budget on the default view.
    await section("budget timings, 8 × 8", async () => {
      timings.default_8x8 = await timeBudget(page, "8 × 8 (default)");
    });

    // 2b. The dispatch rule: every plan re-measured under it, the caption
    // and the traffic panel say which; back to even, today's figures again.
    await section("dispatch rule", async () => {
      const traffic = (p) => p.$$eval(".traffic-row", (rows) => rows.map((r) => ({
        id: r.id, rule: r.dataset.rule, local: Number(r.dataset.local), intra: Number(r.dataset.intra), cross: Number(r.dataset.cross),
      })));
      const setRule = async (p, rule) => {
        await p.selectOption("#rule", rule);
        await p.waitForFunction((r) => [...document.querySelectorAll(".traffic-row")].every((e) => e.id === "traffic-libra" || e.id === "traffic-grace" || e.dataset.rule === r)
          && document.querySelector("#status")?.classList.contains("ready"), rule, { timeout: 60000 });
      };
      const before = await summary(page);
      const even = await traffic(page);
      check("traffic panel shows every plan under even", sameIds(even, WITH_LIBRA) && even.every((t) => (ownRule(t) || t.rule === "even")
        && Math.abs(t.local + t.intra + t.cross - 1) < 1e-5 && t.cross > 0), JSON.stringify(even));
      await setRule(page, "sglang-static");
      const sg = await traffic(page);
      check("rule change: caption and traffic panel name it",
        /sglang-static/.test(await text(page, "#summary-caption")) && /sglang-static/.test(await text(page, "#traffic-caption"))
        && sg.every((t) => (ownRule(t) || t.rule === "sglang-static") && Math.abs(t.local + t.intra + t.cross - 1) < 1e-5),
        `${await text(page, "#summary-caption")} · ${JSON.stringify(sg)}`);
      check("rule change re-measures the plans", (await summary(page)) !== before);
      check("the rule is in the URL hash", await page.waitForFunction(() => /rule=sglang-static/.test(location.hash), null, { timeout: 60000 }).then(() => true), page.url());
      // One rule for all: GRACE's row follows the rule chosen too.
      await page.uncheck("#own-rules");
      await page.waitForFunction(() => document.querySelector("#traffic-grace")?.dataset.rule === "sglang-static"
        && document.querySelector("#status")?.classList.contains("ready"), null, { timeout: 60000 });
      check("one rule for all: GRACE judged under the rule chosen, said on its row and in the URL hash",
        /under sglang-static$/.test(await text(page, "#rule-grace"))
        && await page.waitForFunction(() => /rules=one/.test(location.hash), null, { timeout: 60000 }).then(() => true),
        `${await text(page, "#rule-grace")} · ${page.url()}`);
      await page.check("#own-rules");
      await page.waitForFunction(() => document.querySelector("#traffic-grace")?.dataset.rule === "grace-topology"
        && document.querySelector("#status")?.classList.contains("ready"), null, { timeout: 60000 });
      await setRule(page, "even");
      check("back to even: today's figures", (await summary(page)) === before);
      const p1 = await openPage(browser, origin, "#preset=olmoe&batches=8&nodes=1&gpus=8&groups=1&r=4&rule=local-first");
      pages.push(p1);
      const one = await traffic(p1);
      check("1 node: the rule from the hash, no cross-node traffic",
        /local-first/.test(await text(p1, "#summary-caption")) && sameIds(one, WITH_LIBRA)
        && one.every((t) => (ownRule(t) || t.rule === "local-first") && t.cross === 0 && t.local > 0),
        JSON.stringify(one));
    });

    // 2b'. The hardware: every plan priced (step time, tokens/s against
    // BASE, the breakdown per plan); a slower machine slows every step; the
    // budget path timed again with the prices on; back to none, no panel.
    await section("hardware", async () => {
      const cost = (p) => p.$$eval(".cost-row", (rows) => rows.map((r) => ({
        id: r.id.replace(/^cost-/, ""), step: Number(r.dataset.stepMs), tput: Number(r.dataset.tokensPerS),
        compute: Number(r.dataset.computeUs), dispatch: Number(r.dataset.dispatchUs),
        combine: Number(r.dataset.combineUs), dense: Number(r.dataset.denseUs), copies: Number(r.dataset.copiesUs),
      })));
      const setHardware = async (p, hw) => {
        await p.selectOption("#hardware", hw);
        // Libra's price follows in the follow-up answer (a replay of every
        // batch): priced, wait for a cost row per plan.
        await p.waitForFunction((h) => (h ? document.querySelector("#cost")?.dataset.hardware === h
            && document.querySelectorAll(".cost-row").length === document.querySelectorAll("#summary tbody tr").length
            && [...document.querySelectorAll(".cost-row")].every((r) => r.dataset.stepMs)
          : !document.querySelector("#cost"))
          && document.querySelector("#status")?.classList.contains("ready"), hw, { timeout: 60000 });
      };
      check("priced by default: the cost panel on h100-ib-ndr, not in the URL hash",
        (await page.$eval("#cost", (el) => el.dataset.hardware)) === "h100-ib-ndr" && !/hw=/.test(await page.evaluate(() => location.hash)),
        page.url());
      await setHardware(page, "");
      check("balance only, one choice away: no cost panel, no prices, hw=none in the URL hash",
        (await page.$("#cost")) === null && (await text(page, "#step-craft")) === "—"
        && await page.waitForFunction(() => /hw=none/.test(location.hash), null, { timeout: 60000 }).then(() => true), page.url());
      await setHardware(page, "h100-ib-ndr");
      const h100 = await cost(page);
      // Libra's copies that the previous layer does not hide add to its
      // step; the static plans copy nothing.
      check("every plan priced on h100-ib-ndr, its step split into compute, dispatch, combine, the dense part and Libra's exposed copies",
        JSON.stringify(h100.map((c) => c.id)) === JSON.stringify(WITH_LIBRA)
        && h100.every((c) => c.step > 0 && c.tput > 0 && c.compute > 0 && c.dispatch > 0 && c.combine > 0 && c.dense > 0
          && (c.id === "libra" ? c.copies >= 0 : c.copies === 0)
          && Math.abs(c.compute + c.dispatch + c.combine + c.dense + c.copies - c.step * 1000) <= 0.02 * c.step * 1000),
        JSON.stringify(h100));
      check("the headline: step time, tokens/s and × BASE (BASE itself 1.000×)",
        (await text(page, "#speedup-base")) === "1.000×" && /^[\d.]+ ms$/.test(await text(page, "#step-craft"))
        && Number(await text(page, "#tput-craft")) > 0,
        `${await text(page, "#step-craft")} · ${await text(page, "#tput-craft")} · ${await text(page, "#speedup-craft")}`);
      check("the prices say how far to trust them: the H100 preset's calibration and its error there",
        /calibrated on AIConfigurator.*median.*worst/.test(await text(page, "#cost-band")), await text(page, "#cost-band"));
      await setHardware(page, "a100-80g-efa");
      check("another machine is in the URL hash", await page.waitForFunction(() => /hw=a100-80g-efa/.test(location.hash), null, { timeout: 60000 }).then(() => true), page.url());
      await setHardware(page, "h100-ib-ndr");
      timings.priced_8x8 = await timeBudget(page, "8 × 8 priced on h100-ib-ndr");
      timings.priced_8x8.added_in_worker_ms = round(timings.priced_8x8.in_worker_ms_median - timings.default_8x8.in_worker_ms_median);
      // What the prices add, measured in pairs: the same budget change
      // without prices and with them, one right after the other, so both
      // see the machine as loaded as it is then (the two sections' medians
      // above are minutes apart, and a 2-core machine's load moves in
      // between). Switching the hardware is not timed.
      const pairs = [];
      let r = await craftR(page);
      for (let i = 0; i < 6; i++) {
        const pair = {};
        for (const hw of ["", "h100-ib-ndr"]) {
          await setHardware(page, hw);
          const xs = [];
          for (let j = 0; j < 3; j++) {
            r = r >= 12 ? 3 : r + 1;
            xs.push((await setBudget(page, r)).inWorker);
          }
          pair[hw || "none"] = median(xs);
        }
        pairs.push(pair);
      }
      const added = median(pairs.map((p) => p["h100-ib-ndr"] - p.none));
      timings.priced_8x8.added_in_worker_paired_ms = round(added);
      timing("prices added to a budget change in the worker (median of 6 back-to-back pairs of 3 changes each)",
        { n: pairs.length, p50_ms: Math.max(round(added), 0.01) }, { p50: 2 },
        `+${round(added)} ms (pairs: ${pairs.map((p) => `${round(p.none)}→${round(p["h100-ib-ndr"])}`).join(" ")}); `
        + `the sections' medians: ${timings.priced_8x8.in_worker_ms_median} ms priced, ${timings.default_8x8.in_worker_ms_median} ms not`);
      await setHardware(page, "h100-ib-ndr");
      await setHardware(page, "3090-pcie1-25gbe");
      const slow = await cost(page);
      check("a slower machine (RTX 3090, PCIe 1.0, 25 GbE) slows every plan's step",
        slow.length === h100.length && slow.every((c, i) => c.step > h100[i].step), JSON.stringify(slow.map((c) => c.step)));
      check("an uncalibrated preset says so, with the model's error where it was checked",
        /uncalibrated .*median.*worst.*moeplan calibrate/.test(await text(page, "#cost-band")), await text(page, "#cost-band"));
      // A hardware file of the person's own (what `moeplan calibrate --out`
      // writes; here an H100 on 200 Gb/s RoCE, from docs' example), read
      // through the section's file input and priced like a preset.
      const own = {
        name: "h100-roce", about: "H100 SXM with 200 Gb/s RoCE",
        gpu: { bf16_tflops: 989.5, fp8_tflops: 1979, hbm_gb_per_s: 3350, memory_gib: 80 },
        intra_node: { gb_per_s: 450, latency_us: 3 }, inter_node: { gb_per_s: 25, latency_us: 8 },
        efficiency: { gemm: 0.75, hbm: 0.88, intra_node: 0.8, inter_node: 0.9, roofline_p: 1.22 },
      };
      await page.setInputFiles("#hardware-file", { name: "my-gpu.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(own)) });
      await page.waitForFunction(() => document.querySelector("#cost")?.dataset.hardware === "h100-roce"
        && [...document.querySelectorAll(".cost-row")].every((r) => r.dataset.stepMs)
        && document.querySelector("#status")?.classList.contains("ready"), null, { timeout: 300000 });
      const mine = await cost(page);
      check("a hardware file (my-gpu.json) prices every plan, named in the menu, not in the URL hash",
        mine.length === h100.length && mine.every((c) => c.step > 0 && c.tput > 0)
        && /h100-roce \(datasheet, from my-gpu\.json\)/.test(await page.$eval("#hardware", (el) => el.selectedOptions[0]?.textContent ?? ""))
        && !/hw=/.test(await page.evaluate(() => location.hash)),
        `${await page.$eval("#hardware", (el) => el.selectedOptions[0]?.textContent)} · ${JSON.stringify(mine.map((c) => c.step))}`);
      check("the file's prices say how far to trust them (not fitted: uncalibrated)",
        /uncalibrated/.test(await text(page, "#cost-band")), await text(page, "#cost-band"));
      await page.setInputFiles("#hardware-file", { name: "broken.json", mimeType: "application/json", buffer: Buffer.from('{"name": "x"}') });
      await page.waitForSelector("#status.error", { timeout: 300000 });
      check("a file that is not hardware: one message naming it, the prices kept",
        /broken\.json: .*hardware JSON/.test(await text(page, "#status")) && (await page.$eval("#cost", (el) => el.dataset.hardware)) === "h100-roce",
        await text(page, "#status"));
      await setHardware(page, "");
      check("back to none: no cost panel", (await page.$("#cost")) === null);
      // One model for all a plan costs: the expert size's model sizes the
      // traffic's bytes too (DeepSeek-V3's hidden size 7168, Qwen3-30B-A3B's
      // 2048), the plans themselves unchanged.
      const crossGb = () => page.$eval("#traffic-craft", (el) => Number((el.innerText.match(/([\d.]+) GB cross-node/) || [])[1]));
      const modelTo = async (m, was) => {
        await page.selectOption("#mem", m);
        await page.waitForFunction((b) => {
          const t = document.querySelector("#traffic-craft")?.innerText.match(/([\d.]+) GB cross-node/);
          return t && Number(t[1]) !== b && document.querySelector("#status")?.classList.contains("ready");
        }, was, { timeout: 300000 });
      };
      check("the expert size is the trace's model by default (the generated DeepSeek-V3)",
        (await page.$eval("#mem", (e) => e.value)) === "" && /GiB/.test(await text(page, "#row-craft")),
        `${JSON.stringify(await page.$eval("#mem", (e) => e.value))} · ${await text(page, "#row-craft")}`);
      const v3Gb = await crossGb();
      const replicas = await text(page, "#replicas-craft");
      await modelTo("qwen3-30b-a3b", v3Gb);
      const qwenGb = await crossGb();
      check("another model prices the traffic's bytes too: cross-node GB × 2048 / 7168, the plan unchanged",
        v3Gb > 0 && Math.abs(qwenGb / v3Gb - 2048 / 7168) < 0.01 && (await text(page, "#replicas-craft")) === replicas,
        `${v3Gb} GB → ${qwenGb} GB`);
      await modelTo("deepseek-v3", qwenGb);
      check("and back", (await crossGb()) === v3Gb, `${await crossGb()} GB`);
    });

    // 2c. GRACE's views, which need affinity: a generated trace with token
    // routes (DeepSeek-V2-Lite, 8 batches of 512 tokens) on 2 nodes × 4 GPUs.
    await section("GRACE with token routes", async () => {
      const pg = await openPage(browser, origin, "#preset=deepseek-v2-lite&batches=8&nodes=2&gpus=4&groups=1&r=4&routes=1");
      pages.push(pg);
      await pg.waitForSelector("#grace-views", { timeout: 60000 });
      const info = await text(pg, "#trace-info");
      check("token routes: generated with them, the box ticked", /with token routes/.test(info) && await pg.isChecked("#routes"), info);
      check("token routes: GRACE does not fall back to load only",
        (await pg.locator(".planner-note[data-planner='grace']").count()) === 0 && Number(await text(pg, "#bal-grace")) > 0,
        `GRACE ${await text(pg, "#bal-grace")}`);
      const views = async () => ({
        curve: await text(pg, "#grace-curve-caption"),
        map: await text(pg, "#affinity-caption"),
        bounds: await pg.$eval("svg.affinity path.group-bounds", (el) => el.getAttribute("d")),
        runs: await pg.$$eval("svg.affinity path[fill^='rgb']", (ps) => ps.map((p) => p.getAttribute("d") ?? "").join("").split("M").length - 1),
        marker: await pg.$eval("#grace-chosen", (el) => el.getAttribute("visibility")),
      });
      const v = await views();
      check("GRACE's (S, U) curve marks the chosen r", /r = [\d.]+ chosen/.test(v.curve) && v.marker === "visible", v.curve);
      check("affinity map: experts in 8 GPU groups, lines between them, cells shaded",
        /\(8 groups\)/.test(v.map) && (v.bounds.match(/V/g) ?? []).length === 7 && v.runs > 64, `${v.map} · ${v.runs} runs`);
      const readout = async (sel) => {
        const svg = pg.locator(sel);
        await svg.scrollIntoViewIfNeeded();
        const box = await svg.boundingBox();
        await pg.mouse.move(box.x + box.width * 0.45, box.y + box.height * 0.4);
        const said = (await svg.locator("xpath=following-sibling::p[1]").textContent({ timeout: 60000 })).trim();
        await pg.mouse.move(0, 0);
        return said;
      };
      const said = [await readout("svg.affinity"), await readout("svg[aria-label='GRACE size deviation against affinity utilisation']")];
      check("pointing at GRACE's views tells what is there",
        /^expert \d+ \(GPU \d\) with expert \d+ \(GPU \d\): [\d.]+ of the layer's largest affinity$/.test(said[0])
        && /^r = [\d.]+: S [\d.]+, U [\d.]+( \(chosen\))?$/.test(said[1]), said.join(" | "));
      await setBudget(pg, 6);
      const b = await views();
      check("a budget change leaves GRACE's views as they are", JSON.stringify(b) === JSON.stringify(v));
      await pg.evaluate(() => {
        const input = document.querySelector("#layer");
        input.value = "5";
        input.dispatchEvent(new Event("input", { bubbles: true }));
      });
      await pg.waitForFunction((c) => document.querySelector("#grace-curve-caption")?.textContent !== c, v.curve, { timeout: 60000 });
      check("a layer change shows that layer's grouping", /layer 6:/.test(await text(pg, "#affinity-caption")), await text(pg, "#affinity-caption"));
      const before = await pg.$eval("#timings", (el) => el.dataset.clusterMs);
      await pg.fill("#gpus", "8");
      await pg.dispatchEvent("#gpus", "change");
      await pg.waitForFunction((b) => document.querySelector("#timings")?.dataset.clusterMs !== b
        && document.querySelector("#status")?.classList.contains("ready"), before, { timeout: 60000 });
      const g = await views();
      timings.grace_routes_cluster_ms = Number(await pg.$eval("#timings", (el) => el.dataset.clusterMs));
      check("a GPU change re-groups: 16 GPU groups", /\(16 groups\)/.test(g.map) && (g.bounds.match(/V/g) ?? []).length === 15,
        `${g.map} · re-planned in ${timings.grace_routes_cluster_ms} ms`);
      // GRACE's non-uniformity ratio: GRACE alone re-plans at it (the curve
      // says which r, as set), the link carries it, a cluster change keeps it.
      const others = async () => JSON.stringify(await Promise.all(["base", "eplb", "craft"].map((k) => text(pg, `#bal-${k}`))));
      const [seq, kept, graceBal] = [await pg.$eval("#timings", (el) => el.dataset.optionsSeq), await others(), await text(pg, "#bal-grace")];
      await pg.selectOption("#grace-ratio", "1");
      await pg.waitForFunction((s) => document.querySelector("#timings")?.dataset.optionsSeq !== s
        && document.querySelector("#status")?.classList.contains("ready") && /ratio=1/.test(location.hash), seq, { timeout: 60000 });
      const r1 = await views();
      check("GRACE's ratio: the curve marks r = 1 as set, the other plans unchanged, the link carries it",
        /r = 1 chosen \(as set\)/.test(r1.curve) && await others() === kept && /ratio=1/.test(pg.url()),
        `${r1.curve} · GRACE ${graceBal} → ${await text(pg, "#bal-grace")}`);
      const before2 = await pg.$eval("#timings", (el) => el.dataset.clusterMs);
      await pg.fill("#gpus", "4");
      await pg.dispatchEvent("#gpus", "change");
      await pg.waitForFunction((b) => document.querySelector("#timings")?.dataset.clusterMs !== b
        && document.querySelector("#status")?.classList.contains("ready"), before2, { timeout: 60000 });
      check("GRACE's ratio: kept by a cluster change", /r = 1 chosen \(as set\)/.test(await text(pg, "#grace-curve-caption")),
        await text(pg, "#grace-curve-caption"));
      // Fewer GPUs than the trace's 8 ranks: rank r sends from GPU r mod 4,
      // said in a note.
      const before3 = await pg.$eval("#timings", (el) => el.dataset.clusterMs);
      await pg.fill("#gpus", "2");
      await pg.dispatchEvent("#gpus", "change");
      await pg.waitForFunction((b) => document.querySelector("#timings")?.dataset.clusterMs !== b
        && document.querySelector("#status")?.classList.contains("ready"), before3, { timeout: 60000 });
      const notes = (await pg.$$eval(".note", (ns) => ns.map((n) => n.textContent))).join(" | ");
      check("4 GPUs for 8 ranks: two ranks share a GPU, said; GRACE re-groups into 4",
        /8 source ranks on 4 GPUs: rank r sends from GPU r mod 4/.test(notes) && /\(4 groups\)/.test(await text(pg, "#affinity-caption")),
        `${notes} · ${await text(pg, "#affinity-caption")}`);
      check("GRACE's ratio: no page errors", pg.errors.length === 0, pg.errors.join("; "));
    });

    // 2c'. GRACE with token routes on the page's default (DeepSeek-V3, 58
    // layers × 256 experts, 8 × 8 GPUs): a GPU change and a node change, as
    // the page times them (the worker keeps GRACE's affinity analysis across
    // cluster changes, and between requests prepares the neighbouring
    // clusters). The target is 300 ms; the figures are recorded, not
    // checked against it (see docs/speed.md: it depends on the machine's load).
    await section("GRACE re-plans with token routes on the DeepSeek-V3 default", async () => {
      const pg = await openPage(browser, origin, "#routes=1");
      pages.push(pg);
      await pg.waitForSelector("#grace-views", { timeout: 120000 });
      // Done when the map shows the new group count and the page is ready;
      // then the page's own timing is that change's.
      const replan = async (sel, value, groups) => {
        await pg.fill(sel, value);
        await pg.dispatchEvent(sel, "change");
        await pg.waitForFunction((g) => document.querySelector("#affinity-caption")?.textContent.includes(`(${g} groups)`)
          && document.querySelector("#status")?.classList.contains("ready"), groups, { timeout: 120000 });
        const t = await pg.$eval("#timings", (el) => [el.dataset.clusterMs, el.dataset.graceMs]);
        graceMs.push(Number(t[1]));
        return Number(t[0]);
      };
      // GRACE's own share of each re-plan, as the worker times its phases.
      const graceMs = [];
      const gpu = await replan("#gpus", "4", 32);
      const gpuMap = await text(pg, "#affinity-caption");
      const node = await replan("#nodes", "4", 16);
      const nodeMap = await text(pg, "#affinity-caption");
      const back = await replan("#gpus", "8", 32);
      // Left alone, the worker prepares GRACE's clusterings for the
      // neighbouring clusters (4 × 4, 4 × 16, 2 × 8, 8 × 8); a node change
      // to one of them is then timed as the page times any change.
      await pg.waitForFunction(() => document.querySelector("#timings")?.dataset.warmed?.includes("2 × 8"),
        null, { timeout: 120000 });
      const warmUp = Number(await pg.$eval("#timings", (el) => el.dataset.warmedMs));
      const warmed = await replan("#nodes", "2", 16);
      const warmedMap = await text(pg, "#affinity-caption");
      timings.grace_v3_routes = { gpu_change_ms: gpu, node_change_ms: node, then_gpus_8_ms: back,
        warm_up_ms: warmUp, warmed_node_change_ms: warmed,
        grace_share_ms: { gpu_change: graceMs[0], node_change: graceMs[1], then_gpus_8: graceMs[2], warmed_node_change: graceMs[3] } };
      check("DeepSeek-V3 with token routes: prepared ahead, 4 × 8 → 2 × 8 re-groups into 16",
        /\(16 groups\)/.test(warmedMap) && warmed > 0 && warmUp > 0,
        `${warmedMap} · ${warmed} ms after ${warmUp} ms of work ahead of time`);
      check("DeepSeek-V3 with token routes: a GPU change re-groups into 32, a node change into 16",
        /\(32 groups\)/.test(gpuMap) && /\(16 groups\)/.test(nodeMap), `${gpuMap} | ${nodeMap}`);
      check("DeepSeek-V3 with token routes: GPU and node changes timed",
        [gpu, node, back].every((x) => x > 0),
        `8 × 8 → 8 × 4 ${gpu} ms, → 4 × 4 ${node} ms, → 4 × 8 ${back} ms`);
    });

    // 2d. Libra (a per-batch planner): its row beside the static planners,
    // the per-batch timeline, and N and the predictor as live controls that
    // re-plan Libra only; a predictor the trace cannot feed is refused
    // visibly and changes nothing.
    await section("Libra per batch", async () => {
      const B = 12;
      const pl = await openPage(browser, origin, `#preset=olmoe&batches=${B}&nodes=1&gpus=8&groups=1&r=4&routes=0`);
      pages.push(pl);
      const row = await text(pl, "#row-libra td");
      const ir8 = Number(await text(pl, "#ir-libra"));
      check("Libra's row: per batch under libra-rebalance, with numbers",
        /LIBRA \(per batch, libra-rebalance\)/.test(row) && ir8 >= 1 && Number(await text(pl, "#bal-libra")) > 0,
        `${row} · imbalance ${ir8}`);
      const series = () => pl.$$eval("#timeline polyline.timeline-series", (ps) => ps.map((p) => ({
        plan: p.dataset.plan, n: Number(p.dataset.points),
        pts: (p.getAttribute("points") ?? "").trim().split(/\s+/).filter(Boolean).length,
      })));
      const everyPoint = (s) => JSON.stringify(s.map((x) => x.plan)) === JSON.stringify(WITH_LIBRA)
        && s.every((x) => x.n === B && x.pts === B);
      // The series follow the first answer (a replay per plan).
      await pl.waitForFunction((b) => [...document.querySelectorAll("#timeline polyline.timeline-series")]
        .every((p) => p.dataset.points === String(b)), B, { timeout: 60000 });
      const s0 = await series();
      check("timeline: a line per plan, one point per batch", everyPoint(s0), JSON.stringify(s0));
      const bars = await pl.$eval("#timeline path.timeline-bytes[data-plan='libra']", (p) => Number(p.dataset.bars));
      const staticBars = await pl.$$eval("#timeline path.timeline-bytes:not([data-plan='libra'])", (ps) => ps.map((p) => Number(p.dataset.bars)));
      check("timeline: Libra's bytes copied, one bar per batch; static plans copy nothing",
        bars === B && staticBars.every((n) => n === 0), `${bars} · ${staticBars}`);
      // A budget change leaves CRAFT's series out (a replay), and it comes
      // back once the slider rests.
      await setBudget(pl, 6);
      await pl.waitForFunction((b) => document.querySelector("#timeline polyline[data-plan='craft']")?.dataset.points === String(b),
        B, { timeout: 60000 });
      check("timeline: CRAFT's series follows the budget once it rests", everyPoint(await series()));
      const others = () => Promise.all(PLANS.map((k) => text(pl, `#bal-${k}`)));
      const setN = async (n) => {
        const before = await text(pl, "#ir-libra");
        await pl.fill("#libra-n", String(n));
        await pl.dispatchEvent("#libra-n", "change");
        await pl.waitForFunction((b) => document.querySelector("#ir-libra")?.textContent.trim() !== b
          && document.querySelector("#status")?.classList.contains("ready"), before, { timeout: 60000 });
      };
      const o8 = await others();
      await setN(1);
      const ir1 = Number(await text(pl, "#ir-libra"));
      check("N = 1: Libra re-planned (fewer copies balance less), the other plans as they were",
        ir1 > ir8 && JSON.stringify(await others()) === JSON.stringify(o8), `imbalance ${ir8} → ${ir1}`);
      check("N is in the URL hash",
        await pl.waitForFunction(() => /&n=1(&|$)/.test(location.hash), null, { timeout: 60000 }).then(() => true), pl.url());
      // A count-only trace has no token paths: the path table is refused.
      const before = await summary(pl);
      await pl.selectOption("#predictor", "path-table");
      await pl.waitForSelector("#status.error", { timeout: 60000 });
      const st = await statusOf(pl);
      check("path-table on a count-only trace: a visible message",
        /token routes/.test(st.text) && await pl.locator("#status").isVisible(), st.text);
      const controls = await pl.evaluate(() => [document.querySelector("#predictor").value, document.querySelector("#libra-n").value]);
      check("... and the previous state is kept (figures and controls)",
        (await summary(pl)) === before && controls[0] === "previous-batch" && controls[1] === "1", JSON.stringify(controls));
    });

    // 3. Every hostile file, through the file input.
    await section("hostile files", async () => {
      const words = expectedWords();
      const files = fs.readdirSync(brokenDir).filter((f) => f !== "EXPECTED").sort();
      check("hostile fixtures found", files.length > 40, `${files.length} files`);
      const slow = [];
      let r = 8;
      for (const f of files) {
        if (!words.has(f)) { check(`${f}: listed in EXPECTED`, false); continue; }
        r = r === 8 ? 3 : 8;
        await section(`${f}`, async () => {
          const { ms } = await loadBroken(page, path.join(brokenDir, f), words.get(f), r);
          slow.push([ms, f]);
        });
      }
      slow.sort((a, b) => b[0] - a[0]);
      timings.hostile = { files: files.length, slowest_ms: slow[0]?.[0], slowest: slow[0]?.[1], median_ms: median(slow.map((s) => s[0])) };
      // A file over the limit on disk: refused before it is read (sparse).
      const fd = fs.openSync(bigFile, "w");
      fs.ftruncateSync(fd, 513 * 1024 * 1024);
      fs.closeSync(fd);
      r = r === 8 ? 3 : 8;
      await loadBroken(page, bigFile, "is more than the 512 MiB the page reads", r, "a 513 MiB file");
    });

    // 4. A bad value in a field: a message, the plan stays.
    await section("invalid GPU count", async () => {
      const before = await summary(page);
      await page.fill("#gpus", "0");
      await page.dispatchEvent("#gpus", "change");
      await page.waitForSelector("#status.error", { timeout: 60000 });
      check("invalid GPU count shows an error", /GPUs per node/.test(await text(page, "#status")));
      check("plan kept after invalid input", (await summary(page)) === before);
      // Back to the value in use: the same cluster, answered at once.
      await page.fill("#gpus", "8");
      await page.dispatchEvent("#gpus", "change");
      await page.waitForSelector("#status.ready", { timeout: 60000 });
      check("plan unchanged after the same GPU count again", (await summary(page)) === before);
    });

    // 5. Real files load (and replace the trace).
    await section("real files", async () => {
      const real = path.join(shared, "sglang-deepseek-v3", "prefill_in4096.json");
      if (fs.existsSync(real)) {
        await page.setInputFiles("#file", real);
        await page.waitForFunction(() => /prefill_in4096/.test(document.querySelector("#trace-info")?.textContent ?? ""), null, { timeout: 60000 });
        await page.waitForSelector("#status.ready", { timeout: 60000 });
        check("real SGLang dump loads", Number(await text(page, "#bal-base")) > 0,
          `BASE ${await text(page, "#bal-base")}, CRAFT ${await text(page, "#bal-craft")}`);
      } else {
        console.log(`SKIP real file: ${real} not found`);
      }
      await page.setInputFiles("#file", path.join(fixtures, "torch", "sglang_stat.pt"));
      await page.waitForFunction(() => /sglang_stat\.pt/.test(document.querySelector("#trace-info")?.textContent ?? ""), null, { timeout: 60000 });
      await page.waitForSelector("#status.ready", { timeout: 60000 });
      check("torch .pt dump loads in the page", /3 batch/.test(await text(page, "#trace-info")), await text(page, "#trace-info"));
      // A broken file after a loaded one keeps the loaded one.
      await loadBroken(page, { name: "broken.json", mimeType: "application/json", buffer: Buffer.from('{"logical_count": [[1, 2], [3]]}') },
        "ragged", (await craftR(page)) === 3 ? 2 : 3, "an inline ragged JSON after a .pt");
      check("settings are in the URL hash", /gpus=8/.test(page.url()) && /r=\d+/.test(page.url()), page.url());
    });

    // 5b. Plans across workloads: several real DeepSeek-V3 dumps loaded at
    // once; every plan made on each (and on all) judged on every one, the
    // main trace untouched; a cluster change re-judges; one file alone is
    // refused visibly and the matrix is kept.
    await section("plans across workloads", async () => {
      const names = ["prefill_in1024.json", "decode_in1000out1000.json", "prefill_in4096.json"];
      const files = names.map((n) => path.join(shared, "sglang-deepseek-v3", n));
      if (!files.every((f) => fs.existsSync(f))) {
        if (process.env.CI === "true") throw new Error(`CI=true but ${files[0]} is missing`);
        console.log(`SKIP plans across workloads: ${files[0]} not found`);
        return;
      }
      const pc = await openPage(browser, origin, "#nodes=1&gpus=16&groups=1&r=4");
      pages.push(pc);
      const main = await summary(pc);
      const t0 = Date.now();
      await pc.setInputFiles("#cross-files", files);
      await pc.waitForSelector("#cross-matrix", { timeout: 180000 });
      await pc.waitForSelector("#status.ready", { timeout: 60000 });
      timings.cross_three_dsv3_ms = Date.now() - t0;
      const rows = () => pc.$$eval("#cross-matrix tbody tr", (trs) => trs.map((tr) => ({
        planner: tr.dataset.planner, on: tr.dataset.madeOn,
        cells: [...tr.querySelectorAll("td.num")].slice(1).map((td) => td.textContent.trim()),
      })));
      const m = await rows();
      const T = names.length;
      check("the matrix has every plan made on each trace and on all, each judged on every trace",
        m.length === 3 * T + 3 && m.every((r) => r.cells.length === T + 1),
        `${m.length} rows × ${m[0]?.cells.length} columns in ${timings.cross_three_dsv3_ms} ms`);
      const num = (c) => Number(c.replace("*", ""));
      const starred = m.every((r) => r.cells.slice(0, T).every((c, j) =>
        c.endsWith("*") === (r.on === "all" || r.on === `T${j + 1}`)));
      check("in-sample exactly where a plan was made on the judged trace", starred);
      const cell = (planner, on, j) => num(m.find((r) => r.planner === planner && r.on === on).cells[j]);
      check("on its own trace each EPLB and CRAFT plan beats BASE",
        [0, 1, 2].every((j) => ["eplb", "craft"].every((p) => cell(p, `T${j + 1}`, j) > cell("base", `T${j + 1}`, j))));
      const craftAll = m.filter((r) => r.planner === "craft" && r.on === "all").map((r) => num(r.cells[T]));
      const robust = m.find((r) => r.planner === "craft-robust");
      check("CRAFT robust's worst case is no lower than CRAFT mean's", robust && num(robust.cells[T]) >= Math.min(...craftAll) - 1e-9,
        `robust ${robust?.cells[T]}, mean ${craftAll}`);
      check("the page says how much gain survives a workload change", /keeps \d+ % of its gain/.test(await text(pc, "#cross-kept")),
        await text(pc, "#cross-kept"));
      check("the main trace's plans are untouched", (await summary(pc)) === main);
      // A cluster change re-judges the traces held.
      await pc.fill("#gpus", "8");
      await pc.dispatchEvent("#gpus", "change");
      await pc.waitForFunction(() => /on 1 node\(s\) × 8 GPU|on 1 × 8/.test(document.querySelector("#cross-caption")?.textContent ?? ""),
        null, { timeout: 180000 });
      await pc.waitForSelector("#status.ready", { timeout: 60000 });
      const m8 = await rows();
      check("a GPU change re-judges every plan", m8.length === m.length && JSON.stringify(m8) !== JSON.stringify(m),
        await text(pc, "#cross-caption"));
      // One file alone: refused, visibly, the matrix kept.
      await pc.setInputFiles("#cross-files", [files[0]]);
      await pc.waitForFunction(() => document.querySelector("#status")?.classList.contains("error"), null, { timeout: 60000 });
      check("one trace alone is refused with one visible message", /at least two traces/.test((await statusOf(pc)).text),
        (await statusOf(pc)).text);
      check("the matrix is kept after the refusal", JSON.stringify(await rows()) === JSON.stringify(m8));
      check("no page errors (across workloads)", pc.errors.length === 0, pc.errors.join("; "));
      check("no request left localhost (across workloads)", pc.outside.length === 0);
    });

    // 5c. Re-planning while serving on the default view: EPLB re-planned
    // every K batches on the last W beside the first plan kept, each
    // re-plan marked with the GB it moved, the sweep over K; K changes
    // answer within 300 ms (median); a window leaving nothing to serve is
    // refused visibly; the plans shown are untouched.
    await section("re-planning while serving", async () => {
      // Balance only at first (the default prices on h100-ib-ndr): the
      // section prices the replay itself, below.
      const ps = await openPage(browser, origin, "#hw=none");
      pages.push(ps);
      const main = await summary(ps);
      const shown = () => ps.$eval("#serving-timeline", (el) => ({
        every: Number(el.dataset.every), replans: Number(el.dataset.replans), points: Number(el.dataset.points),
        marks: el.querySelectorAll(".serving-gb").length,
        sweep: Number(document.querySelector("#serving-sweep")?.dataset.points ?? 0),
        curve: document.querySelector("#serving-sweep .serving-curve")?.getAttribute("points") ?? "",
      }));
      const t0 = Date.now();
      await ps.check("#serve");
      await ps.waitForSelector("#serving-sweep[data-points]:not([data-points='0'])", { timeout: 120000 });
      await ps.waitForSelector("#status.ready", { timeout: 60000 });
      timings.serving_first_ms = Date.now() - t0;
      const first = await shown();
      // 64 batches, W = 16: batches 16..64 served; K = 16 re-plans at 32, 48
      check("the replay serves the batches after the first window and re-plans every K",
        first.every === 16 && first.points === 48 && first.replans === 2 && first.marks === 2,
        `${JSON.stringify(first)} in ${timings.serving_first_ms} ms (sweep included)`);
      const line = await text(ps, "#serving-summary");
      check("the page says what re-planning gained and moved",
        /balancedness [\d.]+ re-planning every 16 on the last 16, [\d.]+ keeping the first plan; 2 re-plan\(s\) moved \d+ expert copies \([\d.]+ GB\)/.test(line), line);
      check("the sweep's curve has a point per interval (1, 2, 4, …, 32)", first.sweep === 6, String(first.sweep));
      check("the interval and window are in the URL hash",
        await ps.waitForFunction(() => /every=16&window=16/.test(location.hash), null, { timeout: 60000 }).then(() => true), ps.url());
      // The interval control, timed from the change to the new replay in the DOM.
      const setEvery = (k) => ps.evaluate((k) => new Promise((resolve, reject) => {
        const svg = () => document.querySelector("#serving-timeline");
        const timer = setTimeout(() => reject(new Error(`no replay for K = ${k} within 60 s`)), 60000);
        const obs = new MutationObserver(() => {
          if (svg()?.dataset.every === String(k)) {
            obs.disconnect(); clearTimeout(timer); resolve(performance.now() - t);
          }
        });
        obs.observe(document.querySelector(".figures"), { subtree: true, attributes: true, childList: true });
        const input = document.querySelector("#every");
        const t = performance.now();
        input.value = String(k);
        input.dispatchEvent(new Event("change", { bubbles: true }));
      }), k);
      const samples = [];
      for (const k of [8, 4, 12, 6, 24, 16, 10]) samples.push({ k, ms: await setEvery(k), ...(await shown()) });
      timings.serving_interval = {
        changes: samples.length,
        ms_median: round(median(samples.map((x) => x.ms))),
        ms_max: round(Math.max(...samples.map((x) => x.ms))),
      };
      check("each interval re-plans at its own points", samples.every((x) => x.replans === Math.ceil((48 - x.k) / x.k) && x.points === 48),
        samples.map((x) => `K=${x.k}:${x.replans}`).join(" "));
      timing("the interval control (median of 7)", { n: samples.length, p50_ms: timings.serving_interval.ms_median }, { p50: 300 },
        `median ${timings.serving_interval.ms_median} ms, max ${timings.serving_interval.ms_max} ms`);
      check("an interval change keeps the sweep's curve", samples.every((x) => x.sweep === 6 && x.curve === first.curve));
      // A new window: the sweep again.
      await ps.fill("#window", "8");
      await ps.dispatchEvent("#window", "change");
      await ps.waitForFunction(() => /window 8\)/.test(document.querySelector("#serving-sweep-caption")?.textContent ?? "")
        && document.querySelector("#serving-timeline")?.dataset.points === "56", null, { timeout: 60000 });
      const w8 = await shown();
      check("a new window re-plans on it and sweeps again", w8.points === 56 && w8.curve !== first.curve && w8.sweep >= 6,
        JSON.stringify(w8));
      // Priced: the time with the pauses.
      await ps.selectOption("#hardware", "h100-ib-ndr");
      await ps.waitForFunction(() => /predicted MoE time with [\d.]+ ms of pauses/.test(document.querySelector("#serving-summary")?.textContent ?? ""),
        null, { timeout: 60000 });
      check("on a hardware the replay gives the time with the pauses against never re-planning",
        /against [\d.]+ ms never re-planning \([\d.]+×\)/.test(await text(ps, "#serving-summary")), await text(ps, "#serving-summary"));
      await ps.selectOption("#hardware", "");
      await ps.waitForFunction(() => !/predicted MoE time/.test(document.querySelector("#serving-summary")?.textContent ?? "x")
        && document.querySelector("#status")?.classList.contains("ready"), null, { timeout: 60000 });
      check("the plans shown are untouched by the replays", (await summary(ps)) === main);
      // A window leaving nothing to serve: one visible line, the replay gone.
      await ps.fill("#window", "64");
      await ps.dispatchEvent("#window", "change");
      await ps.waitForFunction(() => document.querySelector("#status")?.classList.contains("error"), null, { timeout: 60000 });
      const st = await statusOf(ps);
      check("a window as long as the trace is refused with one visible message",
        /leaves none of the trace's 64 to serve/.test(st.text) && (await visibleErrors(ps)).length === 1, st.text);
      check("the refused replay is not left on screen", (await ps.$("#serving-timeline")) === null);
      // In an engine's own knobs: K and W in its forward passes (a pass a
      // trace batch unless told), refused as the engine refuses them, its
      // flags shown for the setting.
      await ps.fill("#window", "16");
      await ps.dispatchEvent("#window", "change");
      await ps.fill("#every", "8");
      await ps.dispatchEvent("#every", "change");
      await ps.waitForFunction(() => document.querySelector("#serving-timeline")?.dataset.every === "8", null, { timeout: 60000 });
      await ps.selectOption("#engine", "sglang");
      await ps.waitForFunction(() => document.querySelector("#status")?.classList.contains("error"), null, { timeout: 60000 });
      const sglangRefuses = await statusOf(ps);
      check("SGLang's knobs refuse an interval below its window in one visible line",
        /SGLang refuses --eplb-rebalance-num-iterations 8 below --expert-distribution-recorder-buffer-size 16/.test(sglangRefuses.text)
          && (await visibleErrors(ps)).length === 1, sglangRefuses.text);
      await ps.fill("#every", "32");
      await ps.dispatchEvent("#every", "change");
      await ps.waitForFunction(() => /--eplb-rebalance-num-iterations 32 --expert-distribution-recorder-buffer-size 16/
        .test(document.querySelector("#serving-flags")?.textContent ?? ""), null, { timeout: 60000 });
      const engineLine = await text(ps, "#serving-engine");
      check("in SGLang's knobs the page says K and W in passes and batches beside its flags",
        /SGLang knobs: K = 32 and W = 16 forward passes of 512 tokens, 32 and 16 trace batches/.test(engineLine), engineLine);
      await ps.selectOption("#engine", "vllm");
      await ps.waitForFunction(() => /--eplb-config '\{"window_size":16,"step_interval":32,/
        .test(document.querySelector("#serving-flags")?.textContent ?? ""), null, { timeout: 60000 });
      check("vLLM's knobs give its --eplb-config, and the URL hash names the engine",
        await ps.waitForFunction(() => /engine=vllm/.test(location.hash), null, { timeout: 60000 }).then(() => true), ps.url());
      await ps.selectOption("#engine", "trtllm");
      await ps.waitForFunction(() => document.querySelector("#status")?.classList.contains("error"), null, { timeout: 60000 });
      const trtRefuses = await statusOf(ps);
      check("TensorRT-LLM's knobs refuse a window it does not keep", /TensorRT-LLM keeps no window to set/.test(trtRefuses.text),
        trtRefuses.text);
      check("no page errors (re-planning while serving)", ps.errors.length === 0, ps.errors.join("; "));
      check("no request left localhost (re-planning while serving)", ps.outside.length === 0);
    });

    // 6. 1 node × 64 GPUs: budget timings, and GPU changes (a full re-plan).
    await section("1 × 64", async () => {
      const p64 = await openPage(browser, origin, "#preset=deepseek-v3&batches=64&nodes=1&gpus=64&groups=1&r=8");
      pages.push(p64);
      check("1 × 64 view opens", /1 node\(s\) × 64 GPU/.test(await text(p64, ".scope")), await text(p64, ".scope"));
      timings.one_by_64 = await timeBudget(p64, "1 × 64");
      const clusterMs = [];
      for (const g of [32, 48, 64]) {
        const before = await p64.$eval("#timings", (el) => el.dataset.clusterMs);
        await p64.fill("#gpus", String(g));
        await p64.dispatchEvent("#gpus", "change");
        await p64.waitForFunction((b) => document.querySelector("#timings")?.dataset.clusterMs !== b
          && document.querySelector("#status")?.classList.contains("ready"), before, { timeout: 60000 });
        check(`GPU change to ${g} re-plans`, new RegExp(`${g} GPU`).test(await text(p64, ".scope")), await text(p64, ".scope"));
        clusterMs.push(Number(await p64.$eval("#timings", (el) => el.dataset.clusterMs)));
      }
      timings.cluster_ms_median = round(median(clusterMs), 1);
      check("GPU change timed", clusterMs.every((x) => x > 0), `median ${timings.cluster_ms_median} ms`);
    });

    // 6b. The default (DeepSeek-V3 with token routes, 8 × 8): a GPU change
    // and a node change, the whole re-plan and GRACE's share of it (GRACE,
    // on a cluster it has not clustered yet, comes with Libra in the
    // follow-up).
    await section("default cluster changes", async () => {
      const pd = await openPage(browser, origin, "");
      pages.push(pd);
      const change = async (sel, value, scope) => {
        const before = await pd.$eval("#timings", (el) => el.dataset.clusterMs);
        const libraBefore = await pd.$eval("#timings", (el) => el.dataset.libraMs);
        await pd.fill(sel, value);
        await pd.dispatchEvent(sel, "change");
        // (the scope is waited for too: a timing that lands late from the
        // previous change can flip clusterMs before this one is answered —
        // seen once in CI, the node change checked against 8 × 4)
        await pd.waitForFunction(([b, re]) => document.querySelector("#timings")?.dataset.clusterMs !== b
          && document.querySelector("#status")?.classList.contains("ready")
          && new RegExp(re).test(document.querySelector(".scope")?.textContent ?? ""),
        [before, scope.source], { timeout: 60000 }).catch(() => {});
        check(`${sel} ${value} re-plans`, scope.test(await text(pd, ".scope")), await text(pd, ".scope"));
        // Libra's row follows in the next answer (a cluster change shows the
        // static plans first): its own timing moves when it lands.
        await pd.waitForFunction((b) => document.querySelector("#timings")?.dataset.libraMs !== b
          && document.querySelector("#row-libra") !== null, libraBefore, { timeout: 60000 }).catch(() => {});
        await settled(pd).catch(() => {});
        check(`${sel} ${value}: Libra's row follows, re-placed for the new cluster`,
          JSON.stringify(await planIds(pd)) === JSON.stringify(WITH_LIBRA)
          && (await pd.$eval("#timings", (el) => el.dataset.libraMs)) !== libraBefore, JSON.stringify(await planIds(pd)));
        return pd.$eval("#timings", (el) => [Number(el.dataset.clusterMs), Number(el.dataset.graceMs), Number(el.dataset.libraMs)]);
      };
      const [gpu, gpuGrace, gpuLibra] = await change("#gpus", "4", /8 node\(s\) × 4 GPU/);
      const [node, nodeGrace, nodeLibra] = await change("#nodes", "4", /4 node\(s\) × 4 GPU/);
      timings.default_changes = { gpu_change_ms: gpu, gpu_change_grace_ms: gpuGrace, gpu_change_libra_ms: gpuLibra,
        node_change_ms: node, node_change_grace_ms: nodeGrace, node_change_libra_ms: nodeLibra };
      check("default: GPU and node changes timed, Libra's share too", [gpu, node, gpuGrace, nodeGrace, gpuLibra, nodeLibra].every((x) => x > 0),
        `8 × 8 → 8 × 4 ${gpu} ms (GRACE ${gpuGrace} ms, Libra ${gpuLibra} ms), → 4 × 4 ${node} ms (GRACE ${nodeGrace} ms, Libra ${nodeLibra} ms)`);
    });

    // 6b'. Issue 52: the same changes made from 1 s after the page opens,
    // while the worker prepares ahead (GRACE's neighbouring clusters, then
    // Libra's path table): each is timed as the idle ones below are, and
    // the table beside theirs says how much slower (reported, not gated).
    await section("changes soon after opening", async () => {
      for (const p of pages) if (p !== page && !p.isClosed()) await p.close();
      // What the line under the status said first, kept by the page itself
      // (so the check does not depend on when it is sampled).
      const recordAhead = () => new MutationObserver((_, obs) => {
        const a = document.querySelector("#ahead")?.dataset.ahead;
        if (a) { globalThis.aheadFirst = a; obs.disconnect(); }
      }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-ahead"] });
      const po = await openPage(browser, origin, "", recordAhead);
      pages.push(po);
      await po.waitForTimeout(1000);
      const aheadSeen = [];
      const ahead = async () => {
        const a = await po.$eval("#ahead", (el) => (el.hidden ? "" : el.dataset.ahead ?? ""));
        if (a) aheadSeen.push(a);
        return a !== "";
      };
      const first = await po.waitForFunction(() => globalThis.aheadFirst, null, { timeout: 60000 })
        .then((h) => h.jsonValue()).catch(() => "");
      check("soon after opening: the page says what it prepares ahead", /^GRACE's clusterings and CRAFT's measurements for /.test(first), first || "(nothing shown)");
      const rows = [];
      const t0 = Date.now();
      const during = [];
      // The budget first (12 changes, 1 s after opening), then each other
      // kind in the order of the idle table, each change once the one
      // before has settled.
      const b = await timeBudget(po, "soon after opening: budget");
      during.push(await ahead());
      rows.push({ change: "budget (CRAFT's R)", xs: b.samples });
      for (const [label, kind, values] of [
        // The idle table's series (below), so the rows compare like with
        // like: a rule shown before answers from what the view kept.
        ["GPUs per node", "gpus", [4, 8, 4, 8, 4, 8]],
        ["nodes", "nodes", [4, 8, 4, 8, 4, 8]],
        ["dispatch rule", "rule", ["vllm", "sglang-static", "local-first", "even", "vllm", "even"]],
        ["Libra's N", "libra-n", [4, 8, 2, 8, 4, 8]],
        ["GRACE's ratio", "grace-ratio", ["0", "0.5", "auto", "1", "0.2", "auto"]],
      ]) {
        const xs = [];
        for (const v of values) {
          during.push(await ahead());
          xs.push(await timeChange(po, kind, v));
          await settled(po);
        }
        rows.push({ change: label, xs });
      }
      const wall_s = round((Date.now() - t0) / 1000, 1);
      const soon = rows.map(({ change, xs }) => ({ change, n: xs.length, p50_ms: round(percentile(xs, 50), 1),
        p95_ms: round(percentile(xs, 95), 1), slowest_ms: [...xs].sort((a, c) => c - a).slice(0, 3).map((x) => round(x, 1)) }));
      const share = during.filter(Boolean).length;
      timings.soon_after_opening = { wall_s, changes_while_preparing: share, changes: during.length, prepared: [...new Set(aheadSeen)], table: soon };
      // How many came while it prepared ahead depends on the machine's
      // speed: reported, not checked.
      check("soon after opening: every change answered",
        soon.every((r) => r.n > 0),
        `${share} of ${during.length} changes made while it prepared ahead, in ${wall_s} s`);
      check("no page errors (soon after opening)", po.errors.length === 0, po.errors.join("; "));
      await po.close();
    });

    // 6c. Every budgeted change, p50 and p95, on the default (token
    // routes) and on the count-only default: docs/speed.md's table. Budgets: a
    // budget change within a frame (p95 ≤ 16 ms, DOM updated), the others
    // 300 ms. The table is written whether or not a change meets its
    // budget (docs/speed.md, the README); what is checked is said per row.
    await section("change timings (p50, p95)", async () => {
      // Timed alone: the pages opened before are closed (their workers
      // prepare GRACE's neighbouring clusters between requests, on the same
      // two cores); they stay in `pages` for the last checks.
      for (const p of pages) if (p !== page && !p.isClosed()) await p.close();
      const table = [];
      for (const [trace, hash] of [["counts", "#routes=0"], ["token routes", ""]]) {
        const pt = await openPage(browser, origin, hash);
        pages.push(pt);
        // With token routes the traffic panel tells plans apart (GRACE's
        // affinity groups keep pairs on their node); with counts only every
        // plan has the closed form of even arrival, the same for all.
        await settled(pt);
        if (trace === "token routes") {
          // Between requests the worker prepares GRACE's neighbouring
          // clusters, then Libra's path-table predictions (seconds of
          // work): the changes are timed once it is idle, as a person who
          // has looked at the page for that long finds it.
          const t0 = Date.now();
          await pt.waitForFunction(() => document.querySelector("#timings")?.dataset.pathTableMs, null, { timeout: 120000 });
          const made = { wall_s: round((Date.now() - t0) / 1000, 1), worker_ms: Number(await pt.$eval("#timings", (el) => el.dataset.pathTableMs)) };
          timings.path_table_made_ahead = made;
          check("token routes: Libra's path-table predictions made between requests", made.worker_ms > 0, JSON.stringify(made));
        }
        const cross = await pt.$$eval(".traffic-row", (rows) => rows.map((r) => `${r.id}:${r.dataset.cross}`));
        const distinct = new Set(cross.map((c) => c.split(":")[1])).size;
        if (trace === "token routes") {
          check("token routes: at least two plans' cross-node traffic differ, GRACE's the least", distinct >= 2
            && Math.min(...cross.map((c) => Number(c.split(":")[1]))) === Number(cross.find((c) => c.startsWith("traffic-grace:"))?.split(":")[1]),
            cross.join(" "));
        }
        const row = (change, xs, budget) => {
          const r = { trace, change, n: xs.length, p50_ms: round(percentile(xs, 50), 1), p95_ms: round(percentile(xs, 95), 1), budget_ms: budget,
            slowest_ms: [...xs].sort((a, b) => b - a).slice(0, 3).map((x) => round(x, 1)) };
          table.push(r);
          return r;
        };
        // 24 budget changes (p95 is the second slowest).
        const b = [await timeBudget(pt, `${trace}: budget`), await timeBudget(pt, `${trace}: budget, again`)];
        const budget = row("budget (CRAFT's R)", b.flatMap((x) => x.samples), 16);
        // The budget is p95 ≤ 16 ms (a frame): 6.8 and 9.8 ms in the
        // fresh-clone CI run at f20da24 (load 2.0–2.8), 9–15 ms before.
        timing(`${trace}: budget changes in the DOM`, budget, { p95: 16 });
        // Each change once the one before has settled (Libra's row back):
        // a change made while the worker still re-places Libra waits for it.
        const series = async (kind, values) => {
          const xs = [];
          for (const v of values) {
            xs.push(await timeChange(pt, kind, v));
            await settled(pt);
          }
          return xs;
        };
        // The path table (token routes only) predicts every token of every
        // layer: seconds on the route default, so it has a row of its own.
        const predictors = ["oracle", "previous-batch", "oracle", "previous-batch"];
        const changes = [
          ["GPUs per node", "gpus", [4, 8, 4, 8, 4, 8]],
          ["nodes", "nodes", [4, 8, 4, 8, 4, 8]],
          ["dispatch rule", "rule", ["vllm", "sglang-static", "local-first", "even", "vllm", "even"]],
          ["Libra's N", "libra-n", [4, 8, 2, 8, 4, 8]],
          ["Libra's predictor", "predictor", predictors],
          // The rows above return to options shown before, which the
          // workspace keeps (KEPT_SCHEDULES); here every N is new to it
          // and replays every layer of every batch, half in the helper. Each is far from the
          // one before: a change is seen when Libra's figures change, and
          // on token routes N = 7 → 8 changed none (timed out at 60 s).
          ["Libra's N, a value not shown before", "libra-n", [3, 1, 5, 2, 8]],
          ["GRACE's ratio", "grace-ratio", ["0", "0.5", "auto", "1", "0.2", "auto"]],
          // The path table's predictions are made ahead (above) and kept
          // with the trace, so a switch to it and N changes on it cost what
          // they cost on the previous batch.
          ...(trace === "counts" ? [] : [
            ["Libra's path table, made ahead", "predictor", ["path-table", "previous-batch", "path-table"]],
            ["Libra's N, path table kept", "libra-n", [4, 8, 4, 8]],
            ["Libra's predictor, from the path table", "predictor", ["previous-batch"]],
          ]),
        ];
        // Libra is shown on both (PER_BATCH_CELLS: with token routes each
        // source's row counts too, 68 M cells for the 8 ranks on 64 GPUs).
        const libraShown = (await pt.$("#row-libra")) !== null;
        check(`${trace}: Libra is shown`, libraShown);
        for (const [label, kind, values] of changes) {
          if (kind.startsWith("libra") || kind === "predictor") {
            if (!libraShown) {
              table.push({ trace, change: label, n: 0, p50_ms: null, p95_ms: null, budget_ms: 300, note: "Libra not shown on this trace" });
              continue;
            }
          }
          const r = row(label, await series(kind, values), 300);
          // Issue 46: a GPU, node, dispatch or Libra change p50 ≤ 150 ms and
          // p95 ≤ 300 ms; the other rows p95 ≤ 300 ms. With 4–6 changes the
          // p95 is the slowest.
          const fast = ["gpus", "nodes", "rule", "libra-n", "predictor"].includes(kind) && !label.includes("path table");
          r.budget_p50_ms = fast ? 150 : undefined;
          timing(`${trace}: ${label} changes`, r, fast ? { p50: 150, p95: 300 } : { p95: 300 });
          check(`${trace}: ${label}: every change answered`, r.n === values.length, JSON.stringify(r));
          // A new N replays every layer of every batch: the page's worker
          // makes half and its helper worker the other half (docs/speed.md).
          if (label.includes("not shown before")) {
            const shared = await pt.$eval("#timings", (el) => el.dataset.libraShared);
            check(`${trace}: a new N's re-plan was shared with the helper worker`, /helper's half made/.test(shared ?? ""), shared);
          }
        }
        check(`${trace}: no page errors (change timings)`, pt.errors.length === 0, pt.errors.join("; "));
      }
      // The path table asked for as soon as the route default is drawn,
      // before the worker has made its predictions ahead: every token of
      // every layer predicted then (10–13 s on this VM, docs/speed.md). It
      // misses the budget by that much and fails only when it stops
      // answering (120 s).
      for (const p of pages) if (p !== page && !p.isClosed()) await p.close();
      const pc = await openPage(browser, origin, "");
      pages.push(pc);
      await settled(pc);
      const ms = round(await timeChange(pc, "predictor", "path-table", 120000), 1);
      const cold = { trace: "token routes", change: "Libra's path table, asked before made ahead", n: 1, p50_ms: ms, p95_ms: ms, budget_ms: 300, slowest_ms: [ms] };
      table.push(cold);
      check(`token routes: the path table asked at once answers (${cold.p95_ms} ms; budget 300 ms, missed by ${round(cold.p95_ms - 300, 0)} ms; checked only to answer within 120 s)`,
        cold.n === 1 && cold.p95_ms > 0, JSON.stringify(cold));
      check("no page errors (the path table asked at once)", pc.errors.length === 0, pc.errors.join("; "));
      timings.changes = { loadavg: os.loadavg().map((x) => round(x)), table };
      console.log(changeTable(timings.machine, timings.loadavg_start, timings.changes.loadavg, table));
      // Issue 52: beside the idle rows, the same changes soon after opening.
      const soon = timings.soon_after_opening;
      if (soon) {
        const lines = soon.table.map((r) => {
          const idle = table.find((x) => x.trace === "token routes" && x.change === r.change);
          const ratio = idle && idle.p50_ms > 0 ? round(r.p50_ms / idle.p50_ms, 2) : NaN;
          r.idle_p50_ms = idle?.p50_ms;
          r.idle_p95_ms = idle?.p95_ms;
          r.p50_ratio = ratio;
          return `| ${r.change} | ${r.p50_ms} / ${r.p95_ms} | ${idle ? `${idle.p50_ms} / ${idle.p95_ms}` : "—"} | ${Number.isFinite(ratio) ? `${ratio}×` : "—"}${ratio > 1.5 ? " ✗" : ""} |`;
        });
        console.log([`changes soon after opening (1 s, while preparing ahead: ${soon.changes_while_preparing} of ${soon.changes}) against idle, token routes, p50 / p95 ms (✗: p50 over 1.5× idle)`,
          "", "| change | soon after opening | idle | p50 ratio |", "| --- | ---: | ---: | ---: |", ...lines].join("\n"));
        // `--bench` (a quiet machine) holds issue 52's budget: every kind
        // within 1.5× of idle; the test command only reports it.
        if (BENCH) {
          for (const r of soon.table) {
            check(`soon after opening: ${r.change} within 1.5× of idle (p50 ${r.p50_ms} against ${r.idle_p50_ms} ms)`, r.p50_ratio <= 1.5, JSON.stringify(r));
          }
        }
      }
    });

    // 7. A worker that does not answer while reading: a page whose read
    // deadline is 200 ms, and a file that takes longer to read.
    await section("read deadline", async () => {
      const pd = await openPage(browser, origin, "#r=8&routes=0", () => { globalThis.moeplanReadDeadlineMs = 200; });
      pages.push(pd);
      const before = { summary: await summary(pd), trace: await text(pd, "#trace-info") };
      await pd.setInputFiles("#file", path.join(brokenDir, "npz-bomb-lying.npz"));
      await expectRestart(pd, {
        label: "worker silent past the read deadline", stopped: "stopped while reading npz-bomb-lying.npz",
        because: /stopped while reading npz-bomb-lying\.npz \(no answer within 0\.2 s\); restarted/, restarts: 1, before, nextR: 3,
      });
      // A panic in the worker: its panic hook posts `crashed` before the wasm
      // traps. No input panics the worker, so the hook's message is posted
      // from the test, inside the live worker; the page must restart it.
      const live = pd.workers().at(-1);
      if (!live) throw new Error("no live worker to crash");
      await live.evaluate(() => postMessage(JSON.stringify({
        kind: "crashed", message: "panicked at app/src/worker.rs:1:1:\nsimulated by the e2e test",
      })));
      await expectRestart(pd, {
        label: "worker panicked", stopped: "stopped (a bug: panicked at app/src/worker.rs:1:1: simulated",
        because: /^the planning worker stopped \(a bug: panicked at .* simulated by the e2e test\); restarted/,
        restarts: 2, before: { summary: await summary(pd), trace: await text(pd, "#trace-info") }, nextR: 5,
      });
      // A third death within a minute: restoring the trace again could loop
      // (a trace, or the work between requests on it, that kills every
      // worker), so the fresh worker starts without one and Generate works.
      const third = pd.workers().at(-1);
      if (!third) throw new Error("no live worker to crash");
      await third.evaluate(() => postMessage(JSON.stringify({
        kind: "crashed", message: "panicked at app/src/worker.rs:1:1:\nsimulated again",
      })));
      await pd.waitForFunction(() => /3 times within a minute; restarted it without a trace/.test(
        document.querySelector("#status")?.textContent ?? ""), null, { timeout: 60000 });
      const capped = await statusOf(pd);
      await pd.waitForTimeout(1500);
      check("worker stopped 3 times in a minute: restarted once more, without a trace, in one message",
        capped.restarts === 3 && (await statusOf(pd)).restarts === 3 && (await visibleErrors(pd)).length === 1
        && /^the planning worker stopped \(a bug: .*simulated again\), 3 times within a minute; restarted it without a trace — load a file or press Generate$/.test(capped.text),
        capped.text);
      await pd.click("#generate");
      await pd.waitForFunction(() => document.querySelector("#status")?.classList.contains("ready"), null, { timeout: 60000 });
      const g = await setBudget(pd, 6);
      check("after the cap, Generate gives a working page", /ready/.test(g.status) && (await statusOf(pd)).restarts === 3,
        `R=6: ${g.replicas} replicas`);
    });

    // 7b. Long work shows a progress bar after 0.4 s, with Cancel: the file
    // that takes longest to read (1.6 s) is cancelled while it reads, and the
    // previous trace and plans come back, said as information.
    await section("progress and cancel", async () => {
      const pc = await openPage(browser, origin, "#r=8&routes=0");
      pages.push(pc);
      const before = { summary: await summary(pc), trace: await text(pc, "#trace-info") };
      check("no progress bar while the page is ready", !(await pc.locator("#busy").isVisible()));
      const t0 = Date.now();
      await pc.setInputFiles("#file", path.join(brokenDir, "npz-bomb-lying.npz"));
      await pc.locator("#busy").waitFor({ state: "visible", timeout: 60000 });
      const shownAfter = Date.now() - t0;
      const working = await statusOf(pc);
      check("long work: a progress bar and what is happening", /^working: .*npz-bomb-lying/.test(working.text)
        && await pc.locator("#busy progress").isVisible(), `${working.text} (bar shown after ${shownAfter} ms)`);
      await pc.click("#cancel");
      await pc.waitForFunction(() => /the previous trace and plans are back$/.test(
        document.querySelector("#status")?.textContent.trim() ?? ""), null, { timeout: 60000 });
      const st = await statusOf(pc);
      check("Cancel: one message saying what was cancelled, not an error",
        /^cancelled while reading npz-bomb-lying\.npz; the previous trace and plans are back$/.test(st.text)
        && /ready/.test(st.cls) && (await visibleErrors(pc)).length === 0 && st.restarts === 1, st.text);
      check("Cancel: the previous trace and plans are shown", (await text(pc, "#trace-info")) === before.trace
        && (await summary(pc)) === before.summary && !(await pc.locator("#busy").isVisible()));
      const b = await setBudget(pc, 3);
      check("Cancel: the page works on after it", /ready/.test(b.status), `R=3: ${b.replicas} replicas`);
    });

    const shot = argValue("--screenshot");
    if (shot) {
      await section("screenshot", async () => {
        const fresh = await openPage(browser, origin, "#preset=deepseek-v3&batches=64&nodes=8&gpus=8&groups=8&r=8&layer=20");
        await fresh.screenshot({ path: shot, fullPage: true });
        await fresh.close();
        console.log(`screenshot: ${shot}`);
      });
    }
  } catch (e) {
    check("e2e run", false, String(e?.message ?? e));
  } finally {
    for (const p of pages) {
      check(`no page errors (${new URL(p.url()).hash || "/"})`, p.errors.length === 0, p.errors.join("; "));
      check(`no request left localhost (${new URL(p.url()).hash || "/"})`, p.outside.length === 0, p.outside.slice(0, 3).join(", "));
    }
    await browser.close();
    fs.rmSync(bigFile, { force: true });
  }

  // 8. Out of memory in a browser whose wasm memory is capped at 256 MiB
  // (4096 pages of 64 KiB), below the page's reading budget. The file
  // reader, a worker of its own, dies reading the bomb: one error, and the
  // planning worker keeps its trace (no restart). The planning worker
  // trapping (as a failed allocation does) is restarted with its trace.
  const small = await launch(["--js-flags=--wasm-max-mem-pages=4096"]);
  try {
    await section("out of memory", async () => {
      const page = await openPage(small, origin, "#r=8");
      const bomb = path.join(brokenDir, "npz-bomb-lying.npz");
      const readerDies = async (label) => {
        const before = { summary: await summary(page), trace: await text(page, "#trace-info") };
        await page.setInputFiles("#file", bomb);
        await page.waitForFunction(() => document.querySelector("#status")?.classList.contains("error"), null, { timeout: 60000 });
        const st = await statusOf(page);
        check(`${label}: one message, the reader out of memory, no restart`,
          /^npz-bomb-lying\.npz: the file reader stopped \(out of memory\?\); the page keeps what it had$/.test(st.text)
          && st.restarts === 0 && (await visibleErrors(page)).length === 1, st.text);
        check(`${label}: the trace and plans are kept`,
          (await text(page, "#trace-info")) === before.trace && (await summary(page)) === before.summary);
        const b = await setBudget(page, (await craftR(page)) === 2 ? 4 : 2);
        check(`${label}: the page works on after it`, /ready/.test(b.status), `${b.replicas} replicas`);
      };
      await readerDies("reader out of memory (generated trace)");
      await page.setInputFiles("#file", path.join(fixtures, "torch", "sglang_stat.pt"));
      await page.waitForFunction(() => /sglang_stat\.pt/.test(document.querySelector("#trace-info")?.textContent ?? "")
        && document.querySelector("#status")?.classList.contains("ready"), null, { timeout: 60000 });
      await readerDies("reader out of memory (a file's trace)");
      // The planning worker trapping: its `error` event, as a wasm abort
      // (a failed allocation) raises it, from inside the live worker.
      const before = { summary: await summary(page), trace: await text(page, "#trace-info") };
      const live = page.workers().find((w) => w.url().endsWith("/worker_loader.js"));
      if (!live) throw new Error("no live planning worker");
      await live.evaluate(() => { setTimeout(() => { throw new WebAssembly.RuntimeError("unreachable"); }); });
      await expectRestart(page, {
        label: "planning worker trapped (a file's trace)", stopped: "stopped (out of memory?)",
        because: /^the planning worker stopped \(out of memory\?\); restarted/, restarts: 1, before,
        nextR: (await craftR(page)) === 2 ? 4 : 2,
      });
      check("restored from the file's bytes", /sglang_stat\.pt/.test(await text(page, "#trace-info")));
      check("no page errors (capped memory)", page.errors.length === 0, page.errors.join("; "));
      check("no request left localhost (capped memory)", page.outside.length === 0);
    });
  } finally {
    await small.close();
    server.close();
  }

  timings.loadavg_end = os.loadavg().map((x) => round(x));
  timings.weight = weight;
  const out = argValue("--timings");
  if (out) fs.writeFileSync(out, JSON.stringify(timings, null, 2));
  console.log(`timings: ${JSON.stringify(timings)}`);
  finish();
}

main();
