// What every browser test of the built artefacts shares: a static server
// for a folder (no request leaves it), the pass/fail tally, sections whose
// exceptions fail them, and Debian's Chromium launched through
// playwright-core (never a downloaded browser).

import { chromium } from "playwright-core";
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/// The repository's root (this file is in tests/).
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/// The value after `flag` on the command line, if any.
export const argValue = (flag) => {
  const args = process.argv.slice(2);
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};

/// The build under test: `--dist DIR`, else `dist/` in the repository.
export const dist = path.resolve(argValue("--dist") ?? path.join(root, "dist"));

export const types = {
  ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm",
  ".css": "text/css", ".json": "application/json", ".png": "image/png", ".svg": "image/svg+xml",
  ".woff2": "font/woff2", ".woff": "font/woff", ".ttf": "font/ttf",
};

export function serve(dir) {
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

/// Records on `page` the requests that do not start with `allowed` (data:
/// and blob: URLs are the page's own) in `page.outside`, and uncaught page
/// errors in `page.errors` — with `console`, console errors too.
export function track(page, allowed, { console = false } = {}) {
  page.outside = [];
  page.errors = [];
  page.on("request", (r) => {
    const u = r.url();
    if (!(u.startsWith(allowed) || u.startsWith("data:") || u.startsWith("blob:"))) page.outside.push(u);
  });
  page.on("pageerror", (e) => page.errors.push(String(e)));
  if (console) page.on("console", (m) => { if (m.type() === "error") page.errors.push(`console: ${m.text()}`); });
  return page;
}

export const tally = { passed: 0, failed: 0, failures: [] };
export function check(name, ok, detail = "") {
  if (ok) { tally.passed++; console.log(`ok   ${name}${detail ? ` — ${detail}` : ""}`); }
  else {
    tally.failed++;
    const line = `FAIL ${name}${detail ? ` — ${detail}` : ""}`;
    tally.failures.push(line.slice(0, 400));
    console.log(line);
  }
  return ok;
}

/// Runs one section; an exception (a wait that ran out, above all) fails it.
/// While developing, `E2E_ONLY=words` runs only the sections whose name
/// holds them, `a|b` those holding either (each other one says it was
/// skipped); CI never sets it.
export async function section(name, fn) {
  const only = process.env.E2E_ONLY;
  if (only && !only.split("|").some((w) => name.includes(w))) {
    console.log(`SKIP ${name} (E2E_ONLY=${only})`);
    return;
  }
  try {
    await fn();
  } catch (e) {
    check(name, false, String(e?.message ?? e).split("\n")[0]);
  }
}

export const launchArgs = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"];
export const launch = (extra = []) => chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: [...launchArgs, ...extra],
});

/// Prints the tally's last line and exits with its verdict.
/// The failures are repeated last: CI keeps only the tail of a long run's
/// output, and a failure printed early was cut from it (stop 63).
export function finish() {
  if (tally.failures.length > 0) console.log(`failed:\n${tally.failures.join("\n")}`);
  console.log(`${tally.passed} passed, ${tally.failed} failed`);
  process.exit(tally.failed === 0 ? 0 : 1);
}
