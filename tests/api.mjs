// The JavaScript API as a Node user meets it, from DIR/pkg (what `cargo
// xtask dist` writes and `npm pack` ships): the calls a new user got wrong
// (a misspelt option, an object where the bytes go, the arguments swapped)
// and one wrong type per public function. Every message must name the call
// and the argument or key as the caller wrote it (camelCase, as the `.d.ts`
// declares them), suggest the closest known name where there is one, and
// carry nothing of Rust: no `unwrap`, no snake_case form of a camelCase
// key, no Rust path or type. A right call answers.
//
//   node tests/api.mjs [--dist DIR]
//
// Prints one line per check and closes with "N passed, M failed".

import { check, dist, finish, section } from "./lib.mjs";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const pkg = path.join(dist, "pkg");
const api = await import(pathToFileURL(path.join(pkg, "moeplan_wasm.js")).href);
api.initSync({ module: fs.readFileSync(path.join(pkg, "moeplan_wasm_bg.wasm")) });
const { plan, planners, presets, hardwareNames, Planner } = api;

const TRACE = new TextEncoder().encode(
  '{"logical_count": [[0, 0, 0, 0, 0, 0, 0, 0], [90, 10, 10, 10, 10, 10, 10, 10], [40, 40, 5, 5, 5, 5, 5, 5]]}');

/// What a call threw (its message), or null when it answered.
function thrown(call) {
  try {
    call();
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : `not an Error: ${String(e)}`;
  }
}

/// Words of Rust that must not reach a JavaScript caller.
const RUST = ["unwrap", "replicas_per_gpu", "redundant_experts", "gpus_per_node", "per_g_p_u", "::", "usize",
  "Option<", "at line", "panicked", "RuntimeError"];

/// The call throws one line holding every one of `needles` and no Rust.
function refused(name, call, ...needles) {
  const m = thrown(call);
  const rust = m === null ? [] : RUST.filter((w) => m.includes(w));
  check(name, m !== null && needles.every((n) => m.includes(n)) && rust.length === 0 && !m.includes("\n"),
    m === null ? "it answered" : `${m}${rust.length ? ` (Rust: ${rust.join(", ")})` : ""}`);
}

await section("the three calls a new user got wrong", async () => {
  refused("a misspelt option is named as written, with the closest one and the known ones in camelCase",
    () => plan(TRACE, { nodes: 1, gpusPerNode: 4, replicasPerGPU: 2 }),
    "unknown option `replicasPerGPU`", "did you mean `replicasPerGpu`?", "redundantExperts");
  // named verbatim, though it is the snake_case form the other messages never hold
  const snake = thrown(() => plan(TRACE, { nodes: 1, gpusPerNode: 4, replicas_per_gpu: 2 }));
  check("an option in snake_case is named as written and pointed to its camelCase name",
    snake?.includes("unknown option `replicas_per_gpu`; did you mean `replicasPerGpu`?") ?? false, String(snake));
  refused("an object where the bytes go names the argument and what it takes",
    () => plan({}, { nodes: 1, gpusPerNode: 4 }),
    "plan: `trace` must be a Uint8Array, ArrayBuffer or number[]", "got an object");
  refused("the arguments swapped are said to be swapped",
    () => plan({ nodes: 1, gpusPerNode: 4 }), "they go second, plan(trace, settings)");
});

await section("one wrong type per public function", async () => {
  refused("plan: settings not an object", () => plan(TRACE, "1x4"), "plan: `settings` must be an object");
  refused("plan: a bad value of a known option, in camelCase",
    () => plan(TRACE, { nodes: 1, gpusPerNode: 4, replicasPerGpu: "lots" }), "replicasPerGpu");
  refused("plan: a cluster size that is not a number", () => plan(TRACE, { nodes: "1", gpusPerNode: 4 }),
    "`nodes` must be a whole number");
  const p = new Planner();
  refused("Planner.loadTrace: a file name where the bytes go", () => p.loadTrace("trace.json"),
    "Planner.loadTrace: `bytes` must be a Uint8Array");
  refused("Planner.generate: preset not a string", () => p.generate(3, 4, 1), "Planner.generate: `preset` must be a string");
  refused("Planner.generate: batches not a number", () => p.generate("olmoe", "four", 1),
    "Planner.generate: `batches` must be a whole number");
  refused("Planner.generate: a misspelt preset", () => p.generate("olmo", 4, 1), "did you mean `olmoe`?");
  refused("Planner.view before a cluster says what to call first", () => p.view(2, 0), "configure a cluster first");
  check("Planner.generate answers a right call", thrown(() => p.generate("olmoe", 4, 1)) === null);
  refused("Planner.configure: cluster not an object", () => p.configure("2x8"), "Planner.configure: `cluster` must be an object");
  refused("Planner.configure: a misspelt cluster key", () => p.configure({ nodes: 1, gpusPerNodes: 8 }),
    "unknown cluster setting `gpusPerNodes`", "did you mean `gpusPerNode`?");
  refused("Planner.configure: the budget not a number", () => p.configure({ nodes: 1, gpusPerNode: 8 }, "auto"),
    "`replicasPerGpu` must be a whole number");
  check("Planner.configure answers a right call", thrown(() => p.configure({ nodes: 1, gpusPerNode: 8, groups: 1 })) === null);
  refused("Planner.view: the budget a string", () => p.view("2", 0), "Planner.view: `replicasPerGpu` must be a whole number");
  refused("Planner.view: the layer a fraction", () => p.view(2, 1.5), "Planner.view: `layer` must be a whole number");
  refused("Planner.viewPriced: hardware not a string", () => p.viewPriced(2, 0, 100),
    "Planner.viewPriced: `hardware` must be a string");
  refused("Planner.viewPriced: a misspelt hardware", () => p.viewPriced(2, 0, "h100-ib"), "did you mean `h100-ib-ndr`?");
  refused("Planner.viewPriced: model not a string", () => p.viewPriced(2, 0, "h100-ib-ndr", 7),
    "Planner.viewPriced: `model` must be a string");
  refused("Planner.export: format not a string", () => p.export(2, null), "Planner.export: `format` must be a string");
  check("the listings take no arguments and answer",
    [planners(), presets(), hardwareNames()].every((l) => Array.isArray(l) && l.length > 0));
  const out = plan(Array.from(TRACE), { nodes: 1, gpusPerNode: 4, algorithm: "eplb" });
  check("plan reads bytes given as number[]", out.report.balancedness > 0 && out.report.balancedness <= 1,
    String(out.report.balancedness));
});

finish();
