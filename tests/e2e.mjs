// End-to-end test of the built planner page (dist/) in Debian's Chromium,
// driven by playwright-core. Serves dist/ itself on 127.0.0.1 and fails if
// the page requests anything from anywhere else.
//
//   node tests/e2e.mjs [--screenshot PATH] [--timings PATH]
//
// Prints one line per check and closes with "N passed, M failed".

import { chromium } from "playwright-core";
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const dist = path.join(root, "dist");
const shared = path.resolve(root, "..", "shared", "data");
const args = process.argv.slice(2);
const argValue = (flag) => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};

const types = {
  ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm",
  ".css": "text/css", ".json": "application/json", ".png": "image/png", ".svg": "image/svg+xml",
};

function serve(dir) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://localhost");
    let file = path.join(dir, decodeURIComponent(url.pathname));
    if (!file.startsWith(dir)) { res.writeHead(403).end(); return; }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, "index.html");
    fs.readFile(file, (err, data) => {
      if (err) { res.writeHead(404).end("not found"); return; }
      res.writeHead(200, { "content-type": types[path.extname(file)] ?? "application/octet-stream" });
      res.end(data);
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

let passed = 0;
let failed = 0;
function check(name, ok, detail = "") {
  if (ok) { passed++; console.log(`ok   ${name}${detail ? ` — ${detail}` : ""}`); }
  else { failed++; console.log(`FAIL ${name}${detail ? ` — ${detail}` : ""}`); }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

async function main() {
  if (!fs.existsSync(path.join(dist, "index.html"))) {
    console.log("FAIL dist/index.html is missing: run `trunk build --release` first");
    console.log("0 passed, 1 failed");
    process.exit(1);
  }
  const server = await serve(dist);
  const origin = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
  const timings = {};
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const outside = [];
    page.on("request", (r) => {
      const u = r.url();
      if (!(u.startsWith(origin) || u.startsWith("data:") || u.startsWith("blob:"))) outside.push(u);
    });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));

    // 1. The default view: a generated DeepSeek-V3 trace, planned.
    await page.goto(`${origin}/#preset=deepseek-v3&batches=64&nodes=1&gpus=64&groups=1&r=8`);
    await page.waitForSelector("#bal-craft", { timeout: 120000 });
    const text = async (sel) => (await page.textContent(sel))?.trim();
    const bal = { base: await text("#bal-base"), eplb: await text("#bal-eplb"), craft: await text("#bal-craft") };
    check("default plan renders", ["base", "eplb", "craft"].every((k) => Number(bal[k]) > 0 && Number(bal[k]) <= 1),
      JSON.stringify(bal));
    check("trace info shows the generated default", /generated deepseek-v3/.test(await text("#trace-info")));
    check("charts are drawn", (await page.locator("svg.chart").count()) >= 5);

    // 2. The budget: every change re-plans on the prepared state.
    const replicasAt = async (r) => {
      const before = await text("#replicas-craft");
      await page.$eval("#budget", (el, v) => { el.value = String(v); el.dispatchEvent(new Event("input", { bubbles: true })); }, r);
      await page.waitForFunction((b) => document.querySelector("#replicas-craft")?.textContent.trim() !== b, before, { timeout: 10000 }).catch(() => {});
      await page.waitForFunction(() => document.querySelector("#timings")?.dataset.budgetMs !== "", null, { timeout: 10000 });
      return Number(await text("#replicas-craft"));
    };
    const r8 = Number(await text("#replicas-craft"));
    const r2 = await replicasAt(2);
    check("budget change re-plans CRAFT", r2 < r8 && r2 <= 128, `R=8: ${r8} replicas, R=2: ${r2}`);
    const budgetMs = [], workerMs = [], drawMs = [], domMs = [];
    for (const r of [1, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 2]) {
      await replicasAt(r);
      const d = await page.$eval("#timings", (el) => ({ ...el.dataset }));
      budgetMs.push(Number(d.budgetMs));
      workerMs.push(Number(d.budgetWorkerMs));
      drawMs.push(Number(d.budgetDrawMs));
      domMs.push(Number(d.budgetDomMs));
    }
    timings.budget_dom_ms_median = median(domMs);
    timings.budget_ms_median = median(budgetMs);
    timings.budget_ms_max = Math.max(...budgetMs);
    timings.budget_worker_ms_median = median(workerMs);
    timings.budget_receive_to_frame_ms_median = median(drawMs);
    check("budget change timed", budgetMs.every((x) => x > 0), `median ${timings.budget_ms_median.toFixed(2)} ms`);

    // 3. GPUs: a new cluster re-plans everything (in the worker).
    const craftBefore = await text("#bal-craft");
    await page.fill("#gpus", "32");
    await page.dispatchEvent("#gpus", "change");
    await page.waitForFunction((b) => document.querySelector("#bal-craft")?.textContent.trim() !== b
      && document.querySelector("#status")?.classList.contains("ready"), craftBefore, { timeout: 60000 });
    check("GPU change re-plans", (await text("#bal-craft")) !== craftBefore && /32 GPU/.test(await text(".scope")),
      `${craftBefore} → ${await text("#bal-craft")}`);
    const clusterMs = [];
    for (const g of [64, 48, 64]) {
      const before = await page.$eval("#timings", (el) => el.dataset.clusterMs);
      await page.fill("#gpus", String(g));
      await page.dispatchEvent("#gpus", "change");
      await page.waitForFunction((b) => document.querySelector("#timings")?.dataset.clusterMs !== b, before, { timeout: 60000 });
      clusterMs.push(Number(await page.$eval("#timings", (el) => el.dataset.clusterMs)));
    }
    timings.cluster_ms_median = median(clusterMs);
    check("GPU change timed", clusterMs.every((x) => x > 0), `median ${timings.cluster_ms_median.toFixed(0)} ms`);

    // 4. A bad value in a field: a message, the plan stays.
    await page.fill("#gpus", "0");
    await page.dispatchEvent("#gpus", "change");
    await page.waitForSelector("#status.error");
    check("invalid GPU count shows an error", /GPUs per node/.test(await text("#status")));
    check("plan kept after invalid input", (await page.locator("#bal-craft").count()) === 1);

    // 5. A real file from ../shared/data.
    const real = path.join(shared, "sglang-deepseek-v3", "prefill_in4096.json");
    if (fs.existsSync(real)) {
      await page.setInputFiles("#file", real);
      await page.waitForFunction(() => /prefill_in4096/.test(document.querySelector("#trace-info")?.textContent ?? ""), null, { timeout: 60000 });
      await page.waitForSelector("#status.ready");
      check("real SGLang dump loads", Number(await text("#bal-base")) > 0, `BASE ${await text("#bal-base")}, CRAFT ${await text("#bal-craft")}`);
    } else {
      console.log(`SKIP real file: ${real} not found`);
    }

    // 5b. A torch.save dump (zip + pickle), read in the worker.
    const pt = path.join(root, "crates", "moeplan", "tests", "fixtures", "torch", "sglang_stat.pt");
    await page.setInputFiles("#file", pt);
    await page.waitForFunction(() => /sglang_stat\.pt/.test(document.querySelector("#trace-info")?.textContent ?? ""), null, { timeout: 60000 });
    await page.waitForSelector("#status.ready");
    check("torch .pt dump loads in the page", /3 batch/.test(await text("#trace-info")), await text("#trace-info"));

    // 6. A broken file: a clear message, the previous trace stays.
    const traceBefore = await text("#trace-info");
    const balBefore = await text("#bal-craft");
    await page.setInputFiles("#file", { name: "broken.json", mimeType: "application/json", buffer: Buffer.from('{"logical_count": [[1, 2], [3]]}') });
    await page.waitForSelector("#status.error", { timeout: 20000 });
    const msg = await text("#status");
    check("broken file shows its error", /broken\.json/.test(msg) && /ragged/.test(msg), msg);
    check("broken file keeps the previous trace", (await text("#trace-info")) === traceBefore && (await text("#bal-craft")) === balBefore);

    // 7. Settings in the URL.
    check("settings are in the URL hash", /gpus=64/.test(page.url()) && /r=\d+/.test(page.url()), page.url());

    const shot = argValue("--screenshot");
    if (shot) {
      const fresh = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      await fresh.goto(`${origin}/#preset=deepseek-v3&batches=64&nodes=8&gpus=8&groups=8&r=8&layer=20`);
      await fresh.waitForSelector("#bal-craft", { timeout: 120000 });
      await fresh.waitForSelector("#status.ready");
      await fresh.screenshot({ path: shot, fullPage: true });
      await fresh.close();
      console.log(`screenshot: ${shot}`);
    }
    check("no page errors", errors.length === 0, errors.join("; "));
    check("no request left localhost", outside.length === 0, outside.slice(0, 3).join(", "));
  } catch (e) {
    check("e2e run", false, String(e));
  } finally {
    await browser.close();
    server.close();
  }
  const out = argValue("--timings");
  if (out) fs.writeFileSync(out, JSON.stringify(timings, null, 2));
  console.log(`timings: ${JSON.stringify(timings)}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main();
