// End-to-end test of the docs embed (DIR/embed/, built by `cargo xtask
// dist`) in Debian's Chromium: the example docs page's three embeds as a
// docs author wrote them, each its own live planner.
//
//   node tests/embed.mjs [--dist DIR]
//
// What it covers:
//  - the example page (DIR/embed/index.html) shows its three embeds with
//    real content: CRAFT's curve (a polyline with a point per R, the chosen
//    R marked), EPLB against CRAFT (a summary of exactly those two plans,
//    with their balancedness, and the per-layer lines), and one layer's
//    placement (a column per GPU of the embed's cluster, the layer asked
//    for);
//  - each embed is separate: its own shadow root (the page's element ids
//    inside each, unique in the document), its own worker (three workers),
//    and a budget change in one re-plans that one only — the others' figures
//    stay as they were;
//  - a bad attribute is one visible line inside its element, the other
//    embeds untouched; an embed added later by script, and one reading a
//    trace file by URL (fetched from the page's origin), work too;
//  - from file:// (moeplan-embed-file.js), an embed reads a trace from its
//    own file control;
//  - no request leaves the page's origin, no page error.

import { check, dist, finish, launch, root, section, serve } from "./lib.mjs";
import path from "node:path";
import fs from "node:fs";
import os from "node:os";
import { pathToFileURL } from "node:url";

const fixture = path.join(root, "crates", "moeplan", "tests", "fixtures", "torch", "sglang_stat.pt");

if (!fs.existsSync(path.join(dist, "embed", "moeplan-embed.js"))) {
  console.log(`FAIL no embed in ${dist}/embed — build it with \`cargo xtask dist --out ${dist}\``);
  process.exit(1);
}

const server = await serve(dist);
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1200, height: 1000 } });
const outside = [];
const errors = [];
page.on("request", (r) => {
  const u = r.url();
  if (!(u.startsWith(origin) || u.startsWith("data:") || u.startsWith("blob:"))) outside.push(u);
});
page.on("pageerror", (e) => errors.push(String(e)));
// A trace a docs author serves beside the page (from the repository's
// fixtures, never copied into the build).
await page.route(`${origin}/embed/traces/sglang_stat.pt`, (route) =>
  route.fulfill({ status: 200, contentType: "application/octet-stream", body: fs.readFileSync(fixture) }));

// Reads inside one embed's shadow root.
const inside = (id, fn, arg) => page.evaluate(({ id, fn, arg }) => {
  const r = document.getElementById(id)?.shadowRoot;
  return r ? new Function("r", "arg", `return (${fn})(r, arg)`)(r, arg) : null;
}, { id, fn: fn.toString(), arg });
const waitInside = (id, fn, arg, timeout = 180000) => page.waitForFunction(({ id, fn, arg }) => {
  const r = document.getElementById(id)?.shadowRoot;
  return r ? new Function("r", "arg", `return (${fn})(r, arg)`)(r, arg) : false;
}, { id, fn: fn.toString(), arg }, { timeout, polling: 100 });

// What a budget change elsewhere must not move, for each embed.
const snapshot = async () => ({
  curve: await inside("craft-curve", (r) => [
    r.querySelector("svg.chart polyline[stroke-width='2']")?.getAttribute("points"),
    r.querySelector("circle.chosen")?.getAttribute("transform")]),
  summary: await inside("eplb-vs-craft", (r) => r.querySelector("table.summary tbody")?.textContent),
  placement: await inside("layer-placement", (r) => [...r.querySelectorAll("path.slot")].map((p) => p.getAttribute("d")).join("|")),
});

await section("the docs page loads with its three embeds", async () => {
  await page.goto(`${origin}/embed/index.html`);
  const tags = await page.evaluate(() => [...document.querySelectorAll("moeplan-view")].map((e) => e.id));
  check("three <moeplan-view> elements, as written", tags.join() === "craft-curve,eplb-vs-craft,layer-placement", tags.join());
  const scripts = await page.evaluate(() => [...document.scripts].map((s) => s.getAttribute("src") ?? "inline"));
  check("one module script", scripts.length === 1 && scripts[0].endsWith("moeplan-embed.js"), scripts.join());
});

await section("CRAFT's curve", async () => {
  await waitInside("craft-curve", (r) => (r.querySelector("svg.chart polyline[stroke-width='2']")?.getAttribute("points") ?? "").split(" ").length >= 3);
  const pts = await inside("craft-curve", (r) => r.querySelector("svg.chart polyline[stroke-width='2']").getAttribute("points").split(" ").length);
  check("the curve has a point per R", pts >= 3, `${pts} points`);
  const caption = await inside("craft-curve", (r) => r.querySelector("figcaption")?.textContent);
  check("captioned as on the page", /Balancedness against CRAFT's budget/.test(caption ?? ""), caption);
  const marked = await inside("craft-curve", (r) => r.querySelector("circle.chosen")?.getAttribute("visibility"));
  check("the chosen R is marked", marked === "visible", marked);
  const only = await inside("craft-curve", (r) => [r.querySelectorAll("figure").length, r.querySelectorAll("table").length]);
  check("only the chart asked for (charts=\"curve\")", only[0] === 1 && only[1] === 0, JSON.stringify(only));
  const controls = await inside("craft-curve", (r) => ["#budget", "#budget-number", "#budget-auto"].every((s) => r.querySelector(s)));
  check("its budget control (controls=\"budget\")", controls);
});

await section("EPLB against CRAFT", async () => {
  await waitInside("eplb-vs-craft", (r) => /\d/.test(r.querySelector("#bal-craft")?.textContent ?? ""));
  const rows = await inside("eplb-vs-craft", (r) => [...r.querySelectorAll("table.summary tbody tr")].map((t) => t.id));
  check("the summary shows exactly EPLB and CRAFT (planners=\"eplb,craft\")", rows.join() === "row-eplb,row-craft", rows.join());
  const bal = await inside("eplb-vs-craft", (r) => ["#bal-eplb", "#bal-craft"].map((s) => Number(r.querySelector(s)?.textContent)));
  check("both balancedness figures are real", bal.every((b) => b > 0.3 && b <= 1), bal.join(" "));
  check("CRAFT at least as balanced as EPLB", bal[1] >= bal[0] - 1e-9, bal.join(" vs "));
  const label = await inside("eplb-vs-craft", (r) => r.querySelector("#row-craft td")?.textContent);
  check("CRAFT planned with the budget asked for (budget=\"8\")", /R = 8/.test(label ?? ""), label);
  const lines = await inside("eplb-vs-craft", (r) => [...r.querySelectorAll("svg.chart polyline")].filter((p) => (p.getAttribute("points") ?? "").length > 0).length);
  check("the per-layer chart has a line per plan", lines === 2, `${lines} lines`);
});

await section("a layer's placement", async () => {
  await waitInside("layer-placement", (r) => (r.querySelector("path.slot")?.getAttribute("d") ?? "").length > 0);
  const axis = await inside("layer-placement", (r) => r.querySelector("svg.chart text.axis")?.textContent);
  check("a column per GPU of the embed's cluster (gpus-per-node=\"8\", one node)", /GPUs 0–7/.test(axis ?? ""), axis);
  const boxes = await inside("layer-placement", (r) => [...r.querySelectorAll("path.slot")].map((p) => (p.getAttribute("d").match(/M/g) ?? []).length).reduce((a, b) => a + b, 0));
  check("every expert has a box (DeepSeek-V3: 256 experts, plus copies)", boxes >= 256, `${boxes} boxes`);
  const caption = await inside("layer-placement", (r) => r.querySelector("figcaption")?.textContent);
  check("the layer asked for (layer=\"3\": DeepSeek-V3's fourth MoE layer, model layer 6)", /placement of layer 6\b/.test(caption ?? ""), caption);
  const slider = await inside("layer-placement", (r) => !!r.querySelector("#layer"));
  check("no layer slider unless asked for", !slider);
});

await section("embeds are separate", async () => {
  const ids = await page.evaluate(() => {
    const all = [...document.querySelectorAll("[id]")].map((e) => e.id);
    return { light: all.length, unique: new Set(all).size, shadow: [...document.querySelectorAll("moeplan-view")].every((e) => e.shadowRoot) };
  });
  check("each embed in its own shadow root; ids in the document unique", ids.shadow && ids.light === ids.unique, JSON.stringify(ids));
  const placed = await page.evaluate(() => ({
    document: !!document.getElementById("budget"),
    embeds: [...document.querySelectorAll("moeplan-view")].map((e) => !!e.shadowRoot?.getElementById("budget")),
  }));
  check("the page's ids live inside the embeds, not in the document",
    !placed.document && placed.embeds.join() === "true,false,false", JSON.stringify(placed));
  check("one worker per embed", page.workers().length === 3, `${page.workers().length} workers`);

  const before = await snapshot();
  const r0 = await inside("craft-curve", (r) => r.querySelector("#budget-number").value);
  const next = Number(r0) === 2 ? "4" : "2";
  await page.locator("#craft-curve #budget-number").fill(next);
  await page.locator("#craft-curve #budget-number").dispatchEvent("change");
  await waitInside("craft-curve", (r, before) => r.querySelector("circle.chosen")?.getAttribute("transform") !== before, before.curve[1], 30000);
  const moved = await inside("craft-curve", (r) => r.querySelector("#budget-number").value);
  check("a budget change re-plans its embed", moved === next, `R ${r0} → ${moved}`);
  // Give a stray answer every chance to reach another embed.
  await page.waitForTimeout(1500);
  const after = await snapshot();
  check("the curve itself stays (only the marker moves)", after.curve[0] === before.curve[0]);
  check("the comparison is untouched", after.summary === before.summary);
  check("the placement is untouched", after.placement === before.placement);
});

await section("a bad attribute is one visible line in its element", async () => {
  await page.evaluate(() => {
    const e = document.createElement("moeplan-view");
    e.id = "bad";
    e.setAttribute("charts", "curve,pie");
    document.body.append(e);
  });
  await waitInside("bad", (r) => r.querySelector(".moeplan-error"), undefined, 30000);
  const said = await inside("bad", (r) => r.querySelector(".moeplan-error").textContent);
  check("it names the attribute and the value", /unknown chart "pie"/.test(said) && !said.includes("\n"), said);
  const visible = await page.locator("#bad .moeplan-error").isVisible();
  check("it is visible", visible);
  await page.evaluate(() => {
    const e = document.createElement("moeplan-view");
    e.id = "bad2";
    e.setAttribute("gpus", "8");
    document.body.append(e);
  });
  await waitInside("bad2", (r) => r.querySelector(".moeplan-error"), undefined, 30000);
  const unknown = await inside("bad2", (r) => r.querySelector(".moeplan-error").textContent);
  check("an unknown attribute is named", /unknown attribute "gpus"/.test(unknown), unknown);
  const missing = await page.evaluate(() => {
    const e = document.createElement("moeplan-view");
    e.id = "missing";
    e.setAttribute("trace", "traces/none.json");
    document.body.append(e);
  });
  void missing;
  await waitInside("missing", (r) => r.querySelector(".moeplan-error"), undefined, 30000);
  const notFound = await inside("missing", (r) => r.querySelector(".moeplan-error").textContent);
  check("a trace that is not there is said so", /traces\/none\.json.*404/.test(notFound), notFound);
});

await section("an embed added later, reading a trace by URL", async () => {
  await page.evaluate(() => {
    const e = document.createElement("moeplan-view");
    e.id = "from-file";
    e.setAttribute("trace", "traces/sglang_stat.pt");
    e.setAttribute("nodes", "1");
    e.setAttribute("gpus-per-node", "4");
    e.setAttribute("charts", "summary");
    e.setAttribute("planners", "eplb,craft");
    document.body.append(e);
  });
  await waitInside("from-file", (r) => /\d/.test(r.querySelector("#bal-craft")?.textContent ?? "") || r.querySelector(".status.error"), undefined, 60000);
  const err = await inside("from-file", (r) => r.querySelector(".status.error")?.textContent);
  check("the file is read and planned", !err, err ?? "");
  const rows = await inside("from-file", (r) => r.querySelectorAll("table.summary tbody tr").length);
  check("its summary shows its planners", rows === 2, `${rows} rows`);
  const others = await inside("eplb-vs-craft", (r) => r.querySelectorAll("table.summary tbody tr").length);
  check("the example's embeds are as they were", others === 2);
});

await section("every other chart an embed offers", async () => {
  await page.evaluate(() => {
    const e = document.createElement("moeplan-view");
    e.id = "others";
    for (const [k, v] of Object.entries({ preset: "olmoe", batches: "8", nodes: "2", "gpus-per-node": "4",
      charts: "replicas,heat,timeline,traffic", planners: "base,eplb,craft" })) e.setAttribute(k, v);
    document.body.append(e);
  });
  await waitInside("others", (r) => r.querySelectorAll(".traffic-row").length > 0
    && [...r.querySelectorAll("#timeline polyline")].some((p) => (p.getAttribute("points") ?? "").split(" ").length >= 8), undefined, 90000);
  const got = await inside("others", (r) => ({
    figures: [...r.querySelectorAll("figure")].map((f) => f.querySelector("figcaption")?.textContent.split(/[ (:]/)[0]),
    traffic: [...r.querySelectorAll(".traffic-row")].map((t) => t.id),
    heat: [...r.querySelectorAll("svg.chart path")].filter((p) => (p.getAttribute("d") ?? "").length > 20).length,
  }));
  check("the charts asked for, in order", got.figures.join() === "Replicas,CRAFT,Imbalance,Dispatch", got.figures.join());
  check("the traffic panel has a row per planner asked for", got.traffic.join() === "traffic-base,traffic-eplb,traffic-craft", got.traffic.join());
  check("the bars and the load map are drawn", got.heat >= 2, `${got.heat} paths`);
});

await section("mount(element, options), the module's export, with a layer slider", async () => {
  await page.evaluate(async () => {
    const e = document.createElement("div");
    e.id = "mounted";
    document.body.append(e);
    const { mount } = await import("./moeplan-embed.js");
    await mount(e, { preset: "olmoe", batches: "8", nodes: "1", "gpus-per-node": "4", charts: "placement", controls: "layer" });
  });
  await waitInside("mounted", (r) => (r.querySelector("path.slot")?.getAttribute("d") ?? "").length > 0, undefined, 60000);
  const first = await inside("mounted", (r) => r.querySelector("figcaption").textContent);
  await page.locator("#mounted #layer").fill("5");
  await page.locator("#mounted #layer").dispatchEvent("input");
  await waitInside("mounted", (r, first) => r.querySelector("figcaption").textContent !== first, first, 30000);
  const moved = await inside("mounted", (r) => r.querySelector("figcaption").textContent);
  check("its layer slider moves the placement to that layer", /placement of layer 5\b/.test(moved), `${first.trim()} → ${moved.trim()}`);
  const axis = await inside("mounted", (r) => r.querySelector("svg.chart text.axis")?.textContent);
  check("on its own cluster", /GPUs 0–3/.test(axis ?? ""), axis);
  const caption = await inside("layer-placement", (r) => r.querySelector("figcaption")?.textContent);
  check("the example's placement stays on its layer", /placement of layer 6\b/.test(caption ?? ""), caption);
});

check("no request left the page's origin", outside.length === 0, outside.slice(0, 3).join(" "));
check("no page errors", errors.length === 0, errors.slice(0, 3).join(" | "));

// From file://, through moeplan-embed-file.js: a docs page on disk whose
// embed reads a trace from its own file control. The planning worker
// starts the reader from the script the page passes it (a file:// page's
// workers may start no blob: URL the page made).
await section("from file://, a trace read through the embed's file control", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moeplan-embed-"));
  const html = path.join(dir, "docs.html");
  fs.writeFileSync(html, `<!doctype html><meta charset="utf-8"><body>
<moeplan-view id="own" preset="olmoe" batches="8" nodes="1" gpus-per-node="4" charts="summary" planners="eplb,craft" controls="file"></moeplan-view>
<script src="${pathToFileURL(path.join(dist, "embed", "moeplan-embed-file.js")).href}"></script>`);
  const fp = await browser.newPage();
  const fpErrors = [];
  fp.on("pageerror", (e) => fpErrors.push(String(e)));
  try {
    await fp.goto(pathToFileURL(html).href);
    const inOwn = (fn) => fp.waitForFunction((fn) => {
      const r = document.getElementById("own")?.shadowRoot;
      return r ? new Function("r", `return (${fn})(r)`)(r) : false;
    }, fn.toString(), { timeout: 120000, polling: 100 });
    await inOwn((r) => /\d/.test(r.querySelector("#bal-craft")?.textContent ?? ""));
    const table = () => fp.evaluate(() => document.getElementById("own").shadowRoot.querySelector("table.summary tbody").textContent);
    const before = await table();
    await fp.locator("#own .embed-file").setInputFiles(fixture);
    await fp.waitForFunction((before) => {
      const r = document.getElementById("own").shadowRoot;
      return r.querySelector(".status.error") || r.querySelector("table.summary tbody").textContent !== before;
    }, before, { timeout: 60000, polling: 100 });
    const err = await fp.evaluate(() => document.getElementById("own").shadowRoot.querySelector(".status.error")?.textContent);
    const after = await table();
    check("the file is read (the reader started from its script) and planned", !err && /\d/.test(after),
      err ?? `${before.slice(0, 60)} → ${after.slice(0, 60)}`);
    check("no page errors (file://)", fpErrors.length === 0, fpErrors.slice(0, 3).join(" | "));
  } finally {
    await fp.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

await browser.close();
server.close();
finish();
