// End-to-end test of the page's presenter and sharing features in Debian's
// Chromium (playwright-core), on a built dist folder served from 127.0.0.1.
//
//   node tests/present.mjs [--dist DIR] [--screenshot PATH]
//
// What it covers:
//  - keyboard shortcuts: `]` / `[` move CRAFT's budget along its curve (the
//    summary's R, balancedness, the slider and the URL hash follow), ignored
//    while typing in a field; `g` / `G` double and halve the GPUs per node
//    through the cluster path (the field and the plan follow); `a` toggles
//    the automatic budget; `?` shows the list of keys;
//  - the three scenarios (buttons and keys 1–3): each sets what it names
//    (trace, cluster, budget) and shows its sentence, and its figures show
//    the effect named (hot GPUs without replicas, a flat curve on one node,
//    GiB per GPU for a large model's experts);
//  - each paper's own setting (keys 4–6, and each from its URL hash): its
//    line compares the paper's figure with the ratio of the two rows'
//    tokens/s the table shows, and says below, within or above as that
//    ratio falls;
//  - export of every chart as SVG (parsed as image/svg+xml: no parsererror,
//    the same shapes and path data as on the page, styles inline, a size and
//    a title) and as PNG (magic bytes, twice the chart's size);
//  - "Copy link": the clipboard holds the page's URL with the settings'
//    hash; without a clipboard, the link shows selected in a field;
//  - the presenter view at 1280 × 720: large type, nothing wider than the
//    window;
//  - no request off localhost, no page errors.

import { argValue, check, dist, finish, launch, root, section, serve } from "./lib.mjs";
import fs from "node:fs";
import path from "node:path";

const screenshot = argValue("--screenshot");

const server = await serve(dist);
const origin = `http://127.0.0.1:${server.address().port}`;
const browser = await launch();
const outside = [];
const errors = [];

async function openPage(context, hash = "") {
  const page = await context.newPage();
  page.on("request", (r) => {
    const u = r.url();
    if (!(u.startsWith(origin) || u.startsWith("data:") || u.startsWith("blob:"))) outside.push(u);
  });
  page.on("pageerror", (e) => errors.push(String(e)));
  if (process.env.PRESENT_DEBUG) page.on("console", (m) => console.log("console:", m.text()));
  await page.goto(`${origin}/${hash}`);
  await page.waitForSelector("#bal-craft", { timeout: 120000 });
  await page.waitForSelector("#status.ready", { timeout: 60000 });
  return page;
}

const text = async (page, sel) => (await page.textContent(sel, { timeout: 5000 }))?.trim();
const craftR = async (page) => Number((await text(page, "#row-craft td")).match(/R = (\d+)/)?.[1]);
const num = async (page, sel) => Number(await text(page, sel));
const hashOf = (page) => page.evaluate(() => location.hash);
/// Waits until `fn` (in the page) returns a truthy value.
const until = (page, fn, arg, timeout = 60000) => page.waitForFunction(fn, arg, { timeout, polling: 50 });
/// Presses a key with the focus on the page itself, not a field.
async function press(page, key) {
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press(key);
}
const ready = (page) => page.waitForSelector("#status.ready", { timeout: 60000, state: "attached" });
/// Waits for the URL hash to hold `part` (it follows the settings after 250 ms).
const hashHas = (page, part) => until(page, (p) => location.hash.includes(p), part);

const context = await browser.newContext({ viewport: { width: 1280, height: 720 }, acceptDownloads: true });
await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
const page = await openPage(context);

await section("the default view is no scenario", async () => {
  check("no scenario is marked on the default view", (await page.$$("#present .scenarios button.active")).length === 0
    && (await text(page, "#scenario-note")) === "");
});

await section("the keys are listed", async () => {
  const line = await text(page, "#shortcuts");
  check("a help line names the keys", /\[/.test(line) && /budget/.test(line) && /GPUs/.test(line) && /scenarios/.test(line), line);
  await press(page, "?");
  await page.waitForSelector("#shortcut-list", { timeout: 5000 });
  const list = await text(page, "#shortcut-list");
  check("? shows the list of keys", list.includes("GPUs per node") && list.includes("presenter"), list.slice(0, 80));
  await press(page, "?");
  await page.waitForSelector("#shortcut-list", { state: "detached", timeout: 5000 });
  check("? hides it again", true);
});

await section("budget keys", async () => {
  const r0 = await craftR(page);
  const curve = await page.$$eval("svg.chart[aria-label*='against replicas'] text.tick", (ts) =>
    ts.map((t) => Number(t.textContent)).filter((x) => Number.isInteger(x)));
  const bal0 = await text(page, "#bal-craft");
  const marker0 = await page.$eval("circle.chosen", (c) => c.getAttribute("transform"));
  await press(page, "]");
  await until(page, (r) => !(document.querySelector("#row-craft td")?.textContent ?? "").includes(`R = ${r}`), r0);
  await ready(page);
  const r1 = await craftR(page);
  const next = curve.filter((x) => x > r0).sort((a, b) => a - b)[0];
  check("] raises CRAFT's R to the curve's next point", r1 > r0 && (next === undefined || r1 === next), `${r0} → ${r1} (curve ticks ${curve.join(" ")})`);
  await until(page, (b) => document.querySelector("#bal-craft")?.textContent.trim() !== b, bal0);
  const bal1 = await text(page, "#bal-craft");
  check("CRAFT's balancedness changes", Number(bal1) > Number(bal0), `${bal0} → ${bal1}`);
  const marker1 = await page.$eval("circle.chosen", (c) => c.getAttribute("transform"));
  check("the curve's marker moves", marker1 !== marker0, `${marker0} → ${marker1}`);
  check("the slider shows the new R", (await page.$eval("#budget", (e) => e.value)) === String(r1));
  await hashHas(page, `r=${r1}`);
  check("the URL hash holds the new R", (await hashOf(page)).includes(`r=${r1}`));
  check("the automatic budget is off", !(await page.$eval("#budget-auto", (e) => e.checked)));

  await press(page, "[");
  await until(page, (r) => (document.querySelector("#row-craft td")?.textContent ?? "").includes(`R = ${r}`), r0);
  check("[ brings R back down", (await craftR(page)) === r0);

  // Typing in a field is text, not a command.
  await page.focus("#seed");
  await page.keyboard.press("]");
  await page.waitForTimeout(400);
  check("] in a number field leaves the budget alone", (await craftR(page)) === r0);
  await page.evaluate(() => document.activeElement?.blur());

  await press(page, "a");
  await until(page, () => document.querySelector("#budget-auto")?.checked);
  await hashHas(page, "r=auto");
  check("a turns the automatic budget on", true);
  await press(page, "a");
  await until(page, () => !document.querySelector("#budget-auto")?.checked);
  await hashHas(page, `r=${r0}`);
  check("a turns it off at the R shown", (await craftR(page)) === r0);
});

await section("GPU keys", async () => {
  await ready(page);
  const gpus0 = Number(await page.$eval("#gpus", (e) => e.value));
  const summary0 = await page.$eval("#summary tbody", (e) => e.innerText);
  const cells0 = await page.$eval("svg.heat", (e) => e.innerHTML.length);
  await press(page, "g");
  await until(page, (g) => document.querySelector("#gpus")?.value === String(g * 2), gpus0);
  await until(page, (s) => document.querySelector("#summary tbody")?.innerText !== s, summary0);
  await ready(page);
  check("g doubles the GPUs per node (the field shows it)", true, `${gpus0} → ${gpus0 * 2}`);
  const summary1 = await page.$eval("#summary tbody", (e) => e.innerText);
  check("the plans change with the cluster", summary1 !== summary0);
  await hashHas(page, `gpus=${gpus0 * 2}`);
  check("the URL hash holds the new cluster", true);
  const cells1 = await page.$eval("svg.heat", (e) => e.innerHTML.length);
  check("the load map is redrawn for the new cluster", cells1 !== cells0);
  await press(page, "G");
  await until(page, (g) => document.querySelector("#gpus")?.value === String(g), gpus0);
  await until(page, (s) => document.querySelector("#summary tbody")?.innerText === s, summary0);
  check("G halves them back, and the plans are as before", true);
});

const craftMemory = (page) => page.$eval("#row-craft", (r) => parseFloat(r.querySelectorAll("td")[4]?.textContent));

await section("scenarios", async () => {
  await ready(page);
  // 1: hot experts, no replicas yet.
  await page.click("#scenario-hot");
  await until(page, () => location.hash.includes("r=0") && location.hash.includes("layer=34"));
  await until(page, () => /R = 0(?!\d)/.test(document.querySelector("#row-craft td")?.textContent ?? ""));
  await ready(page);
  const irBase = await num(page, "#ir-base");
  const irEplb = await num(page, "#ir-eplb");
  check("hot: BASE's hottest GPU carries about 3× the mean (as the sentence says)", irBase > 2.7 && irBase < 3.3, `BASE imbalance ${irBase}`);
  check("hot: EPLB brings it near the mean", irEplb < 1.5, `EPLB imbalance ${irEplb}`);
  check("hot: the sentence shows", (await text(page, "#scenario-note")).includes("hot GPUs"));
  check("hot: its button is marked", await page.$eval("#scenario-hot", (b) => b.classList.contains("active")));
  check("hot: the placement shows layer 34's place", (await page.$eval("#layer", (e) => e.value)) === "34");
  const irCraft0 = await num(page, "#ir-craft");
  await press(page, "]");
  await until(page, (x) => Number(document.querySelector("#ir-craft")?.textContent) < x, irCraft0);
  check("hot: ] gives CRAFT replicas and its hottest GPU cools", true, `${irCraft0} → ${await text(page, "#ir-craft")}`);

  // 2, by key: one node, a flat curve.
  await press(page, "2");
  await until(page, () => document.querySelector("#nodes")?.value === "1");
  await until(page, () => /R = 32(?!\d)/.test(document.querySelector("#row-craft td")?.textContent ?? ""));
  await ready(page);
  const base = await num(page, "#bal-base");
  const craft = await num(page, "#bal-craft");
  check("flat (key 2): one node of 8 GPUs", (await page.$eval("#gpus", (e) => e.value)) === "8");
  check("flat: BASE is already balanced", base > 0.9, `BASE ${base}`);
  check("flat: 32 replicas per GPU buy about 0.02", craft - base < 0.03 && craft >= base, `CRAFT R = 32 ${craft}`);
  const gib = await craftMemory(page);
  check("flat: and cost 1.3 GiB per GPU", Math.abs(gib - 1.3) < 0.1, `${gib} GiB`);
  check("flat: the sentence shows", (await text(page, "#scenario-note")).includes("One node"));

  // 3: a large model's experts.
  await page.click("#scenario-memory");
  await until(page, () => /glm/i.test(document.querySelector("#trace-info")?.textContent ?? ""));
  await until(page, () => /R = 64(?!\d)/.test(document.querySelector("#row-craft td")?.textContent ?? ""));
  await ready(page);
  const info = await text(page, "#trace-info");
  check("memory: the trace is GLM-4.5's shape", /89 MoE layers × 160 experts/.test(info), info);
  check("memory: the expert size is GLM-4.5's", (await page.$eval("#mem", (e) => e.value)) === "glm-4.5");
  const gib64 = await craftMemory(page);
  const bal64 = await num(page, "#bal-craft");
  check("memory: BASE has its row (160 experts split over 32 GPUs)", (await page.$("#bal-base")) !== null);
  check("memory: R = 64 costs 2.8 GiB per GPU", Math.abs(gib64 - 2.8) < 0.1, `${gib64} GiB`);
  await press(page, "a");
  await until(page, () => document.querySelector("#budget-auto")?.checked);
  await until(page, () => !/R = 64(?!\d)/.test(document.querySelector("#row-craft td")?.textContent ?? ""));
  await ready(page);
  const gibKnee = await craftMemory(page);
  const balKnee = await num(page, "#bal-craft");
  check("memory: the knee (R = 8) takes 0.35 GiB for about 0.02 less balance",
    (await craftR(page)) === 8 && Math.abs(gibKnee - 0.35) < 0.05 && balKnee < bal64 && bal64 - balKnee < 0.03, `knee ${gibKnee} GiB, ${balKnee}; R = 64 ${gib64} GiB, ${bal64}`);
  // Back to the hot scenario for the exports (every chart drawn).
  await press(page, "1");
  await until(page, () => document.querySelector("#nodes")?.value === "8" && /deepseek/i.test(document.querySelector("#trace-info")?.textContent ?? ""));
  await ready(page);
});

await section("each paper's setting", async () => {
  // scenario id, key, the rows the paper's figure compares, a part of its hash.
  const papers = [
    ["craft-paper", "4", "craft", "eplb", "hw=a100-80g-efa&phase=decode"],
    ["grace-paper", "5", "grace", "base", "hw=4090-pcie4-25gbe"],
    ["libra-paper", "6", "libra", "eplb", "predictor=noisy&hw=h200-ib-ndr"],
  ];
  const lineOf = async (p, planner, against) => {
    await until(p, (ids) => {
      const line = document.querySelector("#scenario-paper")?.textContent ?? "";
      return / serves [\d.]+× /.test(line) && ids.every((id) => /[\d]/.test(document.querySelector(`#tput-${id}`)?.textContent ?? ""))
        && document.querySelector("#status")?.classList.contains("ready");
    }, [planner, against], 240000);
    const line = await text(p, "#scenario-paper");
    const ratio = Number(line.match(/Here: .*? serves ([\d.]+)× /)?.[1]);
    const table = (await num(p, `#tput-${planner}`)) / (await num(p, `#tput-${against}`));
    const [lo, hi] = (line.match(/the paper's ([\d.]+)(?:–([\d.]+))?×/) ?? []).slice(1).map(Number);
    const said = line.match(/(below|within|above) the paper's/)?.[1];
    const should = ratio < lo ? "below" : ratio > (hi || lo) ? "above" : "within";
    return { line, ratio, table, said, should };
  };
  for (const [id, key, planner, against, part] of papers) {
    // Its button, and for the last its key.
    if (id === "libra-paper") await press(page, key);
    else await page.click(`#scenario-${id}`);
    await hashHas(page, part);
    const r = await lineOf(page, planner, against);
    check(`${id} (${id === "libra-paper" ? `key ${key}` : "button"}): its line's ratio is the table's tokens/s ratio, and says ${r.should} the paper's range`,
      Math.abs(r.ratio - r.table) <= 0.006 && r.said === r.should && (await page.$eval(`#scenario-${id}`, (b) => b.classList.contains("active"))),
      `${r.line} · table ${r.table.toFixed(4)}`);
  }
  // From the URL hash alone: a link opens the scenario with its line.
  const [id, , planner, against] = papers[papers.length - 1];
  const link = await page.$eval(`#scenario-${id}`, () => location.hash);
  const fresh = await openPage(context, link);
  const r = await lineOf(fresh, planner, against);
  check(`${id} from its link: marked, its line from the figures`,
    (await fresh.$eval(`#scenario-${id}`, (b) => b.classList.contains("active"))) && Math.abs(r.ratio - r.table) <= 0.006, r.line);
  await fresh.close();
  await press(page, "1");
  await until(page, () => document.querySelector("#nodes")?.value === "8" && /deepseek/i.test(document.querySelector("#trace-info")?.textContent ?? ""));
  await ready(page);
});

/// The shapes of a chart, in an SVG document or on the page.
const shapesOf = (svg) => {
  const all = (sel) => [...svg.querySelectorAll(sel)];
  return {
    paths: all("path").map((p) => p.getAttribute("d") ?? ""),
    polylines: all("polyline").map((p) => p.getAttribute("points") ?? ""),
    rects: all("rect").length,
    circles: all("circle").length,
    texts: all("text").map((t) => t.textContent),
  };
};

await section("export as SVG", async () => {
  await page.waitForTimeout(300);
  // The menu lists the charts drawn when a person opens it (focus or
  // pointer): charts can land well after the answer that brings them.
  await page.focus("#export-figure");
  await page.waitForTimeout(100);
  const options = await page.$$eval("#export-figure option", (os) => os.map((o) => ({ value: o.value, label: o.textContent })));
  const charts = await page.$$eval("figure svg.chart", (ss) => ss.length);
  check("the menu lists every chart on the page", options.length === charts && charts >= 5, `${options.length} entries, ${charts} charts`);
  for (const { value, label } of options) {
    await page.selectOption("#export-figure", value);
    const [download] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#export-svg")]);
    const file = await download.path();
    const xml = fs.readFileSync(file, "utf8");
    const name = download.suggestedFilename();
    const result = await page.evaluate(({ xml, value, shapesSrc }) => {
      const shapesOf = eval(shapesSrc);
      const doc = new DOMParser().parseFromString(xml, "image/svg+xml");
      const error = doc.querySelector("parsererror")?.textContent ?? null;
      const svg = doc.documentElement;
      // The chart on the page with this entry's label (the menu's order).
      const i = [...document.querySelectorAll("#export-figure option")].findIndex((o) => o.value === value);
      const live = document.querySelectorAll("figure svg.chart")[i];
      const mine = shapesOf(svg);
      const theirs = shapesOf(live);
      const styled = [...svg.querySelectorAll("path, polyline, text")].every((e) => /fill:/.test(e.getAttribute("style") ?? ""));
      return {
        error, root: svg.localName, ns: svg.namespaceURI,
        width: Number(svg.getAttribute("width")), height: Number(svg.getAttribute("height")),
        title: svg.querySelector("title")?.textContent ?? "",
        desc: svg.querySelector("desc")?.textContent ?? "",
        same: JSON.stringify(mine.paths) === JSON.stringify(theirs.paths)
          && JSON.stringify(mine.polylines) === JSON.stringify(theirs.polylines)
          && mine.circles === theirs.circles && mine.rects === theirs.rects + 1
          && JSON.stringify(mine.texts) === JSON.stringify(theirs.texts),
        series: mine.paths.length + mine.polylines.length,
        drawn: mine.paths.some((d) => d.length > 10) || mine.polylines.some((p) => p.length > 10),
        styled,
        external: /(href|src)=["'](https?:|\/\/)/.test(xml) || /@import|url\(\s*['"]?https?:/.test(xml),
      };
    }, { xml, value, shapesSrc: shapesOf.toString() });
    const ok = result.error === null && result.root === "svg" && result.ns === "http://www.w3.org/2000/svg"
      && result.width > 0 && result.height > 0 && result.same && result.drawn && result.styled
      && !result.external && result.title.length > 0 && result.desc.includes("preset=");
    check(`SVG of "${label.slice(0, 40)}" parses and holds the chart`, ok,
      `${name}: ${result.error ? `parse error ${result.error.slice(0, 80)}` : `${result.series} series, ${result.width}×${result.height}, same shapes ${result.same}, styled ${result.styled}`}`);
  }
});

await section("export as PNG", async () => {
  await page.selectOption("#export-figure", { index: 0 });
  const [width, height] = await page.$eval("figure svg.chart", (s) => s.getAttribute("viewBox").split(" ").slice(2).map(Number));
  const [download] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#export-png")]);
  const bytes = fs.readFileSync(await download.path());
  const magic = bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  const w = bytes.readUInt32BE(16);
  const h = bytes.readUInt32BE(20);
  check("PNG export is a PNG", magic && download.suggestedFilename().endsWith(".png"), download.suggestedFilename());
  check("at twice the chart's size", w === width * 2 && h === height * 2, `${w}×${h} for a ${width}×${height} chart`);
  check("with something drawn", bytes.length > 8000, `${bytes.length} bytes`);
});

await section("copy link", async () => {
  await page.waitForTimeout(300);
  await page.click("#copy-link");
  await until(page, () => /copied/.test(document.querySelector("#present-note")?.textContent ?? ""));
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  const url = page.url();
  check("the clipboard holds the page's URL", copied === url, copied);
  check("whose hash holds the settings", /#preset=deepseek-v3&.*nodes=8&gpus=8.*&r=\d+.*&layer=34/.test(copied), copied.split("#")[1]);
  // A fresh page from that link shows the same plan.
  const again = await openPage(context, copied.slice(origin.length + 1));
  await until(again, () => /R = \d+/.test(document.querySelector("#row-craft td")?.textContent ?? ""));
  check("the link reopens the same view", (await craftR(again)) === (await craftR(page))
    && (await text(again, "#bal-craft")) === (await text(page, "#bal-craft")));
  await again.close();

  // No clipboard at all (as on some file:// pages): the link, selected.
  const bare = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  await bare.addInitScript(() => Object.defineProperty(Navigator.prototype, "clipboard", { get: () => undefined }));
  const p2 = await openPage(bare, "#nodes=2&gpus=4");
  await p2.click("#copy-link");
  await p2.waitForSelector("#share-link", { timeout: 5000 });
  await until(p2, () => (document.querySelector("#present-note")?.textContent ?? "").length > 0);
  const shown = await p2.$eval("#share-link", (e) => ({ value: e.value, selected: e.selectionEnd - e.selectionStart, active: document.activeElement === e }));
  check("without a clipboard the link shows in a field, selected", shown.value.includes("#preset=") && shown.value.includes("nodes=2&gpus=4") && shown.selected === shown.value.length,
    `${shown.value.split("#")[1]} (selected ${shown.selected})`);
  check("and the note says what happened", /copied|Ctrl\+C/.test(await text(p2, "#present-note")), await text(p2, "#present-note"));
  await bare.close();
});

await section("presenter view at 1280 × 720", async () => {
  const before = await page.$eval("table.summary", (t) => parseFloat(getComputedStyle(t).fontSize));
  await press(page, "p");
  await until(page, () => document.body.classList.contains("presenter"));
  await page.waitForTimeout(300);
  const m = await page.evaluate(() => {
    const px = (sel) => { const e = document.querySelector(sel); return e ? parseFloat(getComputedStyle(e).fontSize) : 0; };
    // The tick labels as drawn: their height on screen.
    const ticks = [...document.querySelectorAll("figure svg.chart text.tick")].map((t) => t.getBoundingClientRect().height).filter((h) => h > 0);
    return {
      wide: document.documentElement.scrollWidth, table: px("table.summary"), caption: px(".grid figure figcaption"),
      tick: Math.min(...ticks), button: px("#present button"),
      pressed: document.querySelector("#presenter-toggle")?.getAttribute("aria-pressed"),
    };
  });
  check("p turns the presenter view on", m.pressed === "true");
  check("nothing wider than the window", m.wide <= 1280, `${m.wide} px`);
  check("the table's type is large", m.table >= 18 && m.table > before, `${before} → ${m.table} px`);
  check("captions are large", m.caption >= 17, `${m.caption} px`);
  check("tick labels read from the back of the room", m.tick >= 11, `smallest tick ${m.tick.toFixed(1)} px high`);
  if (screenshot) await page.screenshot({ path: screenshot });
  await press(page, "p");
  await until(page, () => !document.body.classList.contains("presenter"));
  check("p turns it off", true);
});

check("no request off localhost", outside.length === 0, outside.slice(0, 3).join(" "));
check("no page errors", errors.length === 0, errors.slice(0, 3).join(" | "));

await browser.close();
server.close();
finish();
