// The one-file page (DIR/moeplan.html) in Debian's Firefox ESR, opened from
// file:// with no server: it must render a plan, load a trace through its
// file input, and make no request but data: and blob: ones. Playwright
// drives only its own patched Firefox, so this test speaks WebDriver BiDi
// to the stock browser through puppeteer-core (which never downloads one).
//
//   node tests/firefox.mjs [--dist DIR]
//
// Without /usr/bin/firefox-esr it fails under CI=true (`cargo xtask setup`
// installs it) and says it skipped otherwise.

import puppeteer from "puppeteer-core";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { check, dist, finish, root, section } from "./lib.mjs";

const file = path.join(dist, "moeplan.html");
const FIREFOX = process.env.FIREFOX ?? "/usr/bin/firefox-esr";
const trace = path.join(root, "crates", "moeplan", "tests", "fixtures", "torch", "sglang_stat.pt");

async function main() {
  if (!fs.existsSync(FIREFOX)) {
    if (process.env.CI === "true") {
      check(`Firefox at ${FIREFOX}`, false, "missing under CI=true (cargo xtask setup installs firefox-esr)");
    } else {
      console.log(`SKIP the one-file page in Firefox: ${FIREFOX} not found`);
    }
    finish();
  }
  if (!check("dist/moeplan.html exists", fs.existsSync(file), file)) finish();
  const browser = await puppeteer.launch({ browser: "firefox", executablePath: FIREFOX, headless: true });
  try {
    await section("the one-file page in Firefox, from file://", async () => {
      const page = await browser.newPage();
      const errors = [];
      const outside = [];
      page.on("pageerror", (e) => errors.push(String(e)));
      page.on("request", (r) => {
        const u = r.url();
        if (!(u.startsWith("data:") || u.startsWith("blob:") || u === pathToFileURL(file).href)) outside.push(u);
      });
      await page.goto(pathToFileURL(file).href);
      await page.waitForSelector("#bal-craft", { timeout: 180000 });
      await page.waitForSelector("#status.ready", { timeout: 120000 });
      const bal = await page.$$eval("#summary [id^='bal-']", (els) => els.map((e) => [e.id.slice(4), Number(e.textContent.trim())]));
      check(`a plan renders in ${await browser.version()}`,
        bal.length >= 3 && bal.every(([, x]) => x > 0 && x <= 1), JSON.stringify(bal));
      const before = await page.$eval("#summary", (el) => el.innerText);
      const input = await page.$("#file");
      await input.uploadFile(trace);
      // A 3-batch file answers in about a second alone; the wait is for an
      // answer that never comes (issue 46: no wall-clock gate), and what the
      // page showed when it gave up is printed, since once (a fresh clone
      // beside another, 0a63b41) it did not come within 60 s.
      const shown = () => page.evaluate(() => ({
        status: document.querySelector("#status")?.textContent.trim(),
        cls: document.querySelector("#status")?.className,
        restarts: document.querySelector("#status")?.dataset.restarts,
        info: document.querySelector("#trace-info")?.textContent.trim(),
        files: document.querySelector("#file")?.files?.length,
      }));
      const t0 = Date.now();
      const came = await page.waitForFunction(() => /sglang_stat\.pt/.test(document.querySelector("#trace-info")?.textContent ?? "")
        && document.querySelector("#status")?.classList.contains("ready"), { timeout: 300000 }).then(() => true, () => false);
      if (!check(`the trace's answer comes (${((Date.now() - t0) / 1e3).toFixed(1)} s)`, came, JSON.stringify(await shown()))) return;
      const info = await page.$eval("#trace-info", (el) => el.textContent.trim());
      check("a trace loads through the file input", /3 batch/.test(info)
        && (await page.$eval("#summary", (el) => el.innerText)) !== before, info);
      check("no request but data: and blob:", outside.length === 0, outside.slice(0, 3).join(" "));
      check("no page errors", errors.length === 0, errors.join("; "));
    });
  } finally {
    await browser.close();
  }
  finish();
}

main();
