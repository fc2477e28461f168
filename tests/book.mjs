// End-to-end test of the book (DIR/book/, built by `cargo xtask dist` or
// `cargo xtask book`) in Debian's Chromium, from a static server and from
// file://.
//
//   node tests/book.mjs [--dist DIR]
//
// What it covers:
//  - every relative link in the built pages leads to a file of the book;
//  - from a static server: every planner chapter (EPLB, CRAFT, GRACE-MoE,
//    Libra) carries a live <moeplan-view> that plans (its summary table
//    filled in its shadow root), and a budget moved in it changes its
//    figures; in CRAFT's, a node change re-plans, a dispatch-rule change
//    re-judges, and a real trace chosen in its file control (one of
//    SGLang's DeepSeek-V3 dumps from ../shared/data, required when
//    CI=true) is planned; the book's search finds "redundant"; no request leaves the
//    origin, no page error and no console error;
//  - from file://: the chapters open, with the sidebar and the text, the
//    search finds "redundant" (its index is a script, not a fetch), and the
//    same widgets plan and follow a budget, started by the classic script
//    that carries the embed's files (moeplan-embed-file.js: a browser
//    fetches no module, wasm or worker file from file://), and EPLB's plans
//    a real trace chosen in its file control; nothing is
//    requested outside the book's folder, no page or console error.

import { check, dist, finish, launch, root, section, serve, track } from "./lib.mjs";
import path from "node:path";
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const bookDir = path.join(dist, "book");
if (!fs.existsSync(path.join(bookDir, "index.html")) || !fs.existsSync(path.join(bookDir, "embed", "moeplan-embed.js"))) {
  console.log(`FAIL no book with its embed in ${bookDir} — build it with \`cargo xtask dist --out ${dist}\``);
  console.log("0 passed, 1 failed");
  process.exit(1);
}

/// A real trace a reader brings: one of SGLang's DeepSeek-V3 dumps (the book
/// cannot ship it; the test reads it from ../shared/data).
const REAL = path.resolve(root, "..", "shared", "data", "sglang-deepseek-v3", "prefill_in4096.json");

/// The chapters with a planner's widget: file, widget id, the planner's row
/// in the widget's summary.
const PLANNERS = [["eplb.html", "eplb-widget", "EPLB"], ["craft.html", "craft-widget", "CRAFT"],
  ["grace.html", "grace-widget", "GRACE"], ["libra.html", "libra-widget", "LIBRA"]];

const server = await serve(dist);
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await launch();

/// A page that records requests off `allowed`, page errors and console errors.
const openPage = async (allowed) =>
  track(await browser.newPage({ viewport: { width: 1200, height: 1000 } }), allowed, { console: true });

/// What every section ends with: nothing requested off `where`, no page or
/// console error; then the page closes.
async function closeClean(page, what, where) {
  check(`no request left ${where} (${what})`, page.outside.length === 0, page.outside.join(" "));
  check(`no page or console error (${what})`, page.errors.length === 0, page.errors.join("; "));
  await page.close();
}

/// Reads `fn(shadowRoot)` inside widget `id`.
const inside = (page, id, fn) => page.evaluate(({ id, fn }) => {
  const r = document.getElementById(id)?.shadowRoot;
  return r ? new Function("r", `return (${fn})(r)`)(r) : null;
}, { id, fn: fn.toString() });
const waitInside = (page, id, fn, timeout = 180000) => page.waitForFunction(({ id, fn }) => {
  const r = document.getElementById(id)?.shadowRoot;
  return r ? new Function("r", `return (${fn})(r)`)(r) : false;
}, { id, fn: fn.toString() }, { timeout, polling: 100 });

/// The search: opened with its button, `word` typed key by key (mdBook
/// searches on keyup), the results' titles. mdBook loads its index when the
/// search first opens; a word typed before it has loaded finds nothing
/// until typed again, as a reader would.
async function search(page, word) {
  await page.click("#mdbook-search-toggle");
  for (let attempt = 0; attempt < 4; attempt++) {
    await page.fill("#mdbook-searchbar", "");
    await page.locator("#mdbook-searchbar").pressSequentially(word);
    const found = await page.waitForFunction(() => document.querySelectorAll("#mdbook-searchresults li").length > 0,
      null, { timeout: 5000 }).then(() => true, () => false);
    if (found) break;
  }
  return page.$$eval("#mdbook-searchresults li", (lis) => lis.map((li) => li.textContent.trim().slice(0, 60)));
}

const summaryText = (r) => r.querySelector("table.summary tbody")?.textContent ?? "";

/// Opens chapter `url`, checks its widget `id` plans `planner` and that a
/// budget moved in it changes its figures.
async function widgetLive(page, url, file, id, planner) {
  await page.goto(url);
  const title = await page.$eval("main h1", (h) => h.textContent.trim());
  const widgets = await page.$$eval("main moeplan-view", (els) => els.map((e) => e.id));
  check(`${file} ("${title}"): a live widget`, widgets.includes(id), widgets.join());
  // The chapter's planner planned (Libra, per batch, lands after the
  // static plans).
  await page.waitForFunction(({ id, planner }) => {
    const r = document.getElementById(id)?.shadowRoot;
    const rows = [...(r?.querySelectorAll("table.summary tbody tr") ?? [])].map((tr) => tr.textContent);
    return rows.some((t) => t.startsWith(planner) && /\d\.\d{3}/.test(t));
  }, { id, planner }, { timeout: 180000, polling: 100 });
  const planned = await inside(page, id, (r) => [...r.querySelectorAll("table.summary tbody tr")].map((tr) => tr.textContent.slice(0, 40)));
  check(`${file}: ${planner} planned in the widget`, planned.some((t) => t.startsWith(planner)), planned.join(" | "));
  const before = await inside(page, id, summaryText);
  const r0 = await inside(page, id, (r) => r.querySelector("#budget-number")?.value);
  const next = String(Number(r0 ?? 0) === 2 ? 6 : 2);
  await page.locator(`#${id} #budget-number`).fill(next);
  await page.locator(`#${id} #budget-number`).dispatchEvent("change");
  await page.waitForFunction(({ id, before }) =>
    (document.getElementById(id)?.shadowRoot?.querySelector("table.summary tbody")?.textContent ?? before) !== before,
  { id, before }, { timeout: 60000, polling: 100 }).catch(() => {});
  const after = await inside(page, id, summaryText);
  check(`${file}: the budget ${r0} → ${next} changes the figures`, after !== before && /\d/.test(after),
    `${before.slice(0, 80)} → ${after.slice(0, 80)}`);
}

/// In widget `id` (already planned): the cluster and the dispatch rule
/// changed from its controls, each seen in its figures.
async function clusterAndRule(page, file, id) {
  const rows = (r) => r.querySelector("table.summary tbody")?.textContent ?? "";
  const before = await inside(page, id, rows);
  const nodes = await inside(page, id, (r) => r.querySelector("#nodes")?.value);
  const next = nodes === "2" ? "4" : "2";
  await page.locator(`#${id} #nodes`).fill(next);
  await page.locator(`#${id} #nodes`).dispatchEvent("change");
  await page.waitForFunction(({ id, before }) => {
    const t = document.getElementById(id)?.shadowRoot?.querySelector("table.summary tbody")?.textContent;
    return t && t !== before && /\d\.\d{3}/.test(t);
  }, { id, before }, { timeout: 120000, polling: 100 }).catch(() => {});
  const after = await inside(page, id, rows);
  check(`${file}: nodes ${nodes} → ${next} re-plans every plan`, after !== before, `${before.slice(0, 60)} → ${after.slice(0, 60)}`);
  const measured = (r) => (r.querySelector("#summary-caption")?.textContent ?? "").replace("measured under dispatch rule: ", "");
  const rule0 = await inside(page, id, measured);
  // SGLang's static dispatch (vLLM's splits evenly over copies on counts
  // without routes: the same figures as `even`).
  await page.locator(`#${id} #rule`).selectOption("sglang-static");
  await page.waitForFunction(({ id, after }) => {
    const r = document.getElementById(id)?.shadowRoot;
    const t = r?.querySelector("table.summary tbody")?.textContent;
    return /sglang-static$/.test(r?.querySelector("#summary-caption")?.textContent ?? "") && t && t !== after;
  }, { id, after }, { timeout: 60000, polling: 100 }).catch(() => {});
  const rule1 = await inside(page, id, measured);
  const judged = await inside(page, id, rows);
  check(`${file}: the dispatch rule ${rule0} → ${rule1} re-judges the plans`, rule0 === "even" && rule1 === "sglang-static" && judged !== after,
    `${after.slice(0, 60)} → ${judged.slice(0, 60)}`);
}

/// In widget `id` (already planned): a real trace chosen in its file
/// control replaces the generated one, every plan made again on it.
async function ownTrace(page, file, id) {
  if (!fs.existsSync(REAL)) {
    if (process.env.CI === "true") check(`${file}: a real trace chosen in the widget`, false, `CI=true but ${REAL} is missing`);
    else console.log(`SKIP ${file}: a real trace chosen in the widget (${REAL} not found)`);
    return;
  }
  const before = await inside(page, id, summaryText);
  await page.locator(`#${id} input.embed-file`).setInputFiles(REAL);
  await page.waitForFunction(({ id, before }) => {
    const t = document.getElementById(id)?.shadowRoot?.querySelector("table.summary tbody")?.textContent;
    return t && t !== before && /\d\.\d{3}/.test(t);
  }, { id, before }, { timeout: 120000, polling: 100 }).catch(() => {});
  const after = await inside(page, id, summaryText);
  const errors = await inside(page, id, (r) => [...r.querySelectorAll(".error")].map((e) => e.textContent.trim()));
  check(`${file}: a real trace chosen in the widget (SGLang's prefill_in4096.json) is planned`,
    after !== before && /\d\.\d{3}/.test(after) && errors.length === 0,
    `${before.slice(0, 60)} → ${after.slice(0, 60)}${errors.length ? `; ${errors.join("; ")}` : ""}`);
}

await section("every link between the book's pages leads to a file of the book", async () => {
  // The chapters include docs/ pages, whose links were written for the
  // repository: one to a source file (../crates/…) breaks in the book.
  const pages = [];
  const walk = (d) => fs.readdirSync(d, { withFileTypes: true }).forEach((e) =>
    e.isDirectory() ? walk(path.join(d, e.name)) : e.name.endsWith(".html") && pages.push(path.join(d, e.name)));
  walk(bookDir);
  const broken = [];
  let links = 0;
  for (const page of pages) {
    for (const [, href] of fs.readFileSync(page, "utf8").matchAll(/href="([^"]+)"/g)) {
      if (/^(https?:|#|mailto:|data:|javascript:)/.test(href)) continue;
      const file = href.split("#")[0];
      if (!file) continue;
      links++;
      if (!fs.existsSync(path.resolve(path.dirname(page), decodeURI(file)))) broken.push(`${path.relative(bookDir, page)} → ${href}`);
    }
  }
  check(`every link between the book's pages resolves (${links} links in ${pages.length} pages)`,
    broken.length === 0 && links > 100, broken.slice(0, 5).join("; "));
});

await section("from a static server: every planner chapter's widget plans, and a budget moves it", async () => {
  const page = await openPage(origin);
  for (const [file, id, planner] of PLANNERS) {
    await widgetLive(page, `${origin}/book/${file}`, file, id, planner);
    // The cluster and the rule, on the quickest chapter.
    if (file === "craft.html") {
      await clusterAndRule(page, file, id);
      await ownTrace(page, file, id);
    }
  }
  await closeClean(page, "planner chapters", "the origin");
});

await section("from a static server: the search finds \"redundant\"", async () => {
  const page = await openPage(origin);
  await page.goto(`${origin}/book/index.html`);
  const hits = await search(page, "redundant");
  check("the search finds \"redundant\"", hits.length > 0, `${hits.length} results: ${hits.slice(0, 3).join(" | ")}`);
  await closeClean(page, "search", "the origin");
});

await section("from file://: the chapters and the search", async () => {
  const base = pathToFileURL(bookDir).href;
  const page = await openPage(base);
  await page.goto(`${base}/index.html`);
  const chapters = await page.$$eval("#mdbook-sidebar a, .sidebar a, mdbook-sidebar-scrollbox a", (as) => as.map((a) => a.textContent.trim()));
  const toc = chapters.length ? chapters : await page.$$eval("a", (as) => as.map((a) => a.textContent.trim()));
  check("the book opens from file://, its contents listed", ["EPLB", "CRAFT", "GRACE-MoE", "Libra"].every((c) => toc.some((t) => t.includes(c))),
    toc.slice(0, 12).join(" | "));
  const hits = await search(page, "redundant");
  check("from file://: the search finds \"redundant\"", hits.length > 0, `${hits.length} results`);
  await page.goto(`${base}/grace.html`);
  const text = await page.$eval("main", (m) => m.textContent);
  check("from file://: a chapter's text (GRACE-MoE)", /affinity/.test(text) && /spectral/.test(text));
  await closeClean(page, "file://", "the book's folder");
});

await section("from file://: every planner chapter's widget plans, and a budget moves it", async () => {
  const base = pathToFileURL(bookDir).href;
  const page = await openPage(base);
  for (const [file, id, planner] of PLANNERS) {
    await widgetLive(page, `${base}/${file}`, `file://…/${file}`, id, planner);
    if (file === "eplb.html") await ownTrace(page, `file://…/${file}`, id);
  }
  const scripts = await page.$$eval("script[src]", (ss) => ss.map((s) => s.getAttribute("src")));
  check("from file://: the embed that carries its files (moeplan-embed-file.js)", scripts.some((s) => s.endsWith("embed/moeplan-embed-file.js")), scripts.join(" "));
  await closeClean(page, "file://, planner chapters", "the book's folder");
});

await browser.close();
server.close();
finish();
