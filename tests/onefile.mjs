// End-to-end test of the one-file page (DIR/moeplan.html, written by
// `cargo xtask dist`) in Debian's Chromium: opened from file:// with no
// server, it must load nothing but itself (file:), data: and blob: URLs,
// render a plan, load a trace through its file input, and refuse a broken
// one with one visible error, the plan kept.
//
//   node tests/onefile.mjs [--dist DIR]
//
// Prints one line per check and closes with "N passed, M failed".

import { check, dist, finish, launch, root, section } from "./lib.mjs";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { pathToFileURL } from "node:url";

const file = path.join(dist, "moeplan.html");
const fixtures = path.join(root, "crates", "moeplan", "tests", "fixtures");
/// A broken file and the words its error must contain (from EXPECTED).
const BROKEN = "ragged-rows.json";

const text = async (page, sel) => (await page.textContent(sel, { timeout: 5000 }))?.trim();
const summary = (page) => page.$eval("#summary", (el) => el.innerText);
/// Each plan's balancedness in the summary, by planner id.
const figures = (page) => page.$$eval("#summary [id^='bal-']", (els) => els.map((e) => [e.id.slice(4), e.textContent.trim()]));
/// At least EPLB and CRAFT, every figure a balancedness in (0, 1].
const numbers = (fs) => ["eplb", "craft"].every((k) => fs.some(([id]) => id === k))
  && fs.every(([, x]) => x !== "" && Number.isFinite(Number(x)) && Number(x) > 0 && Number(x) <= 1);
const shown = (fs) => fs.map(([k, x]) => `${k} ${x}`).join(", ");

function expectedWords(name) {
  for (const line of fs.readFileSync(path.join(fixtures, "broken", "EXPECTED"), "utf8").split("\n")) {
    const [f, words] = line.split("\t");
    if (f === name && words) return words.trim();
  }
  throw new Error(`${name} is not in broken/EXPECTED`);
}

/// The markup with every script's text left out: what the browser reads as
/// tags and attributes.
const markupOf = (html) => html.replace(/(<script\b[^>]*>)[\s\S]*?<\/script>/gi, "$1</script>");

async function main() {
  if (!fs.existsSync(file)) {
    console.log(`FAIL ${file} is missing: run \`cargo xtask dist\` first`);
    console.log("0 passed, 1 failed");
    process.exit(1);
  }
  const html = fs.readFileSync(file);
  const gz = zlib.gzipSync(html, { level: 9 }).length;
  const mib = (n) => (n / 2 ** 20).toFixed(2);
  console.log(`${file.startsWith(root + path.sep) ? path.relative(root, file) : file}: ${html.length} bytes (${mib(html.length)} MiB), gzip -9 ${gz} bytes (${mib(gz)} MiB)`);

  // The file names nothing to load: every src / href is data: or a fragment,
  // and every script is inline.
  const markup = markupOf(html.toString("utf8"));
  const refs = [...markup.matchAll(/\s(src|href)\s*=\s*["']?([^"'\s>]*)/gi)].map((m) => `${m[1]}=${m[2]}`);
  const outside = refs.filter((r) => !/^(src|href)=(data:|#)/i.test(r));
  check("the file references nothing but data: and #", outside.length === 0,
    `${refs.length} references${outside.length ? `; outside: ${outside.join(", ")}` : ""}`);
  const scripts = [...markup.matchAll(/<script\b[^>]*>/gi)].map((m) => m[0]);
  check("one inline module script and no other", scripts.length === 1 && /type="module"/.test(scripts[0]), scripts.join(" "));
  check("no preload links or integrity attributes left", !/rel="(module)?preload"|integrity=/.test(markup));

  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const requests = [];
    const failed = [];
    const errors = [];
    page.on("request", (r) => requests.push(r.url()));
    page.on("requestfailed", (r) => failed.push(`${r.url().slice(0, 80)}: ${r.failure()?.errorText}`));
    page.on("pageerror", (e) => errors.push(String(e)));

    await section("the plan renders from file://", async () => {
      const t0 = Date.now();
      await page.goto(pathToFileURL(file).href);
      await page.waitForSelector("#bal-craft", { timeout: 120000 });
      await page.waitForSelector("#status.ready", { timeout: 60000 });
      const bal = await figures(page);
      check("the default plan renders from file://", numbers(bal), `${Date.now() - t0} ms, ${shown(bal)}`);
      const workers = page.workers().map((w) => w.url());
      check("the worker runs from a blob: URL", workers.length === 1 && workers[0].startsWith("blob:"), workers.join(" "));
      check("charts are drawn", (await page.locator("svg.chart").count()) >= 5);
    });

    await section("a trace loads through the file input", async () => {
      const before = { summary: await summary(page), trace: await text(page, "#trace-info") };
      await page.setInputFiles("#file", path.join(fixtures, "torch", "sglang_stat.pt"));
      await page.waitForFunction(() => /sglang_stat\.pt/.test(document.querySelector("#trace-info")?.textContent ?? ""), null, { timeout: 60000 });
      await page.waitForSelector("#status.ready", { timeout: 60000 });
      const info = await text(page, "#trace-info");
      check("the trace info names the file", /sglang_stat\.pt/.test(info) && /3 batch/.test(info) && info !== before.trace, info);
      const bal = await figures(page);
      check("the plan re-renders on it", numbers(bal) && (await summary(page)) !== before.summary,
        shown(bal));
    });

    await section("a broken file is refused, the plan kept", async () => {
      const words = expectedWords(BROKEN);
      const before = { summary: await summary(page), trace: await text(page, "#trace-info") };
      await page.setInputFiles("#file", path.join(fixtures, "broken", BROKEN));
      await page.waitForFunction((n) => {
        const s = document.querySelector("#status");
        return s?.classList.contains("error") && s.textContent.includes(n);
      }, BROKEN, { timeout: 10000 });
      const errs = await page.locator(".error:visible").allTextContents();
      const msg = errs[0] ?? "";
      check(`${BROKEN}: one visible error with "${words}"`,
        errs.length === 1 && msg.startsWith(`${BROKEN}: `) && msg.toLowerCase().includes(words.toLowerCase()),
        `${msg.slice(0, 160)}${errs.length !== 1 ? ` (${errs.length} errors shown)` : ""}`);
      check(`${BROKEN}: the plan and trace are kept`,
        (await summary(page)) === before.summary && (await text(page, "#trace-info")) === before.trace);
    });

    const schemes = [...new Set(requests.map((u) => u.split(":")[0]))].sort();
    const off = requests.filter((u) => !/^(file|data|blob):/.test(u));
    check("every request is file:, data: or blob:", off.length === 0,
      `${requests.length} requests (${schemes.join(", ")})${off.length ? `; others: ${off.slice(0, 5).join(", ")}` : ""}`);
    check("the file is the only file: request", requests.filter((u) => u.startsWith("file:")).length === 1,
      requests.filter((u) => u.startsWith("file:")).join(" "));
    check("no request failed", failed.length === 0, failed.slice(0, 3).join(" | "));
    check("no uncaught page error", errors.length === 0, errors.slice(0, 3).join(" | "));
  } finally {
    await browser.close();
  }
  finish();
}

main().catch((e) => {
  console.log(`FAIL ${String(e?.stack ?? e)}`);
  process.exit(1);
});
