// The JavaScript API as a TypeScript user sees it: every export called and
// a field of every returned object read, so a declaration that goes missing,
// loses its type (`any`) or changes shape fails `tsc`. The lines under
// `@ts-expect-error` must stay errors: tsc fails if one starts to compile.
// `cargo xtask test` type-checks it (strict, no emit); it also runs as it is
// (compiled, in Node or a page), each refused call throwing at run time too.

import init, { initSync, plan, planners, presets, start, Planner } from "moeplan-wasm";
import type {
  Algorithm,
  ClusterSettings,
  EvalReport,
  LayerStats,
  PlanFile,
  PlanResult,
  PlanSettings,
  PlannerInfo,
  Preset,
  ScheduleReplay,
  TraceStats,
  View,
} from "moeplan-wasm";

/** `true` only when `T` is `any`. */
type IsAny<T> = 0 extends 1 & T ? true : false;
/** Compiles only when `T` is not `any`. */
function typed<T>(value: T, ..._proof: IsAny<T> extends true ? [never] : []): T {
  return value;
}

/** Throws unless `call` throws: what the type checker refuses, the module refuses too. */
function refused(call: () => unknown): void {
  try {
    call();
  } catch {
    return;
  }
  throw new Error(`accepted: ${call.toString()}`);
}

/** Uses every export on a trace's bytes (any supported format) and the module's `.wasm` bytes. */
export async function run(trace: Uint8Array, wasm: BufferSource): Promise<string[]> {
  await init({ module_or_path: wasm });
  initSync({ module: wasm }); // already initialised: a no-op
  start(); // init() ran it (the panic hook); again is harmless
  const seen: string[] = [];

  // --- plan(): settings typed from the core's registry -------------------
  const settings: PlanSettings = {
    nodes: 1,
    gpusPerNode: 8,
    algorithm: "craft",
    replicasPerGpu: "auto",
    objective: "paper",
    refine: false,
    groups: 1,
    redundantExperts: 8,
    nonuniformity: "0.2",
    predictor: "path-table",
  };
  const result: PlanResult = typed(plan(trace, settings));
  const file: PlanFile = typed(result.plan);
  seen.push(file.format, file.algorithm, String(file.version), String(file.num_experts));
  seen.push(String(file.topology.nodes * file.topology.gpus_per_node));
  const firstLayer = file.layers[0];
  if (firstLayer) seen.push(String(firstLayer.layer), String(firstLayer.gpus[0]?.length));
  seen.push(String(file.summary.slots_per_gpu_max), String(file.summary.replicas_per_layer.length));
  seen.push(String(file.provenance?.traces[0]?.fingerprint));
  const report: EvalReport = typed(result.report);
  const balance: number = report.balancedness + report.imbalance_ratio + report.gap + report.bound;
  seen.push(String(balance), String(report.per_layer.length), String(report.packing_bound ?? "none"));
  const budget: number | null = typed(result.budget);
  seen.push(String(budget));
  const schedule: ScheduleReplay | null = typed(result.schedule);
  if (schedule) {
    seen.push(schedule.about, schedule.rule, String(schedule.per_batch_copies.length));
    seen.push(String(schedule.per_batch_bytes_copied[0]), String(schedule.extra_slots_per_gpu), String(schedule.resident_slots_per_gpu));
  }
  const libra = plan(trace, { nodes: 1, gpusPerNode: 4, algorithm: "libra", extraExpertsPerGpu: 4 });
  seen.push(String(libra.schedule?.per_batch_imbalance_ratio.length));

  // --- planners(), presets() ---------------------------------------------
  const list: PlannerInfo[] = typed(planners());
  for (const p of list) {
    const id: Algorithm = p.id;
    seen.push(id, p.display, p.about, p.needs);
    for (const o of p.options) {
      seen.push(o.name, o.kind, String(o.default), o.unit ?? "", (o.choices ?? []).join("|"));
    }
  }
  const shapes: Preset[] = typed(presets());
  for (const s of shapes) {
    seen.push(s.name, s.display, String(s.moeLayers * s.experts * s.topK * s.groups + s.expertBytes));
  }

  // --- Planner: a trace kept between calls --------------------------------
  const planner = typed(new Planner());
  const stats: TraceStats = typed(planner.generate("olmoe", 4, 7));
  seen.push(stats.model ?? "unknown", String(stats.batches * stats.experts), String(stats.top_k));
  const layer: LayerStats | undefined = stats.layers[0];
  const hottest: [number, number] | undefined = layer?.hottest[0];
  seen.push(String(layer?.top2_share), String(hottest?.[1]));
  seen.push(String(typed(planner.loadTrace(trace)).total_tokens));
  const cluster: ClusterSettings = { nodes: 1, gpusPerNode: 8 };
  const first: View = typed(planner.configure(cluster, undefined));
  const view: View = typed(planner.view(2, 0));
  seen.push(String(first.auto_replicas_per_gpu), String(view.replicas_per_gpu), view.focus ?? "");
  seen.push(String(view.topology.gpus_per_node), String(view.layer_ids.length), String(view.heat[0]?.[0]));
  for (const f of view.plans) {
    seen.push(f.name, f.label ?? "", String(f.budget), String(f.balancedness), String(f.traffic?.cross_node));
    seen.push(String(f.per_batch_imbalance?.length), f.schedule ?? "static");
  }
  seen.push(...view.notes, ...(view.planner_notes ?? []).map((n) => `${n.name}: ${n.text}`));
  const point = view.curve[0];
  if (point) seen.push(String(point.replicas_per_gpu + point.predicted_balancedness + point.bound));
  seen.push(String(view.layer.layer), String(view.layer.gpus[0]?.[0]?.[2]));
  const grouping = view.grouping;
  if (grouping) {
    seen.push(String(grouping.ratio), String(grouping.curve[0]?.utilisation), String(grouping.sizes.length));
  }
  const exported: string = typed(planner.export(2, "sglang"));
  seen.push(exported, planner.export(null, "moeplan"));
  planner.free();

  // --- misspelt or mistyped settings stay errors --------------------------
  // @ts-expect-error: `replicasPerGPU` is not an option (`replicasPerGpu` is)
  refused(() => plan(trace, { nodes: 1, gpusPerNode: 8, replicasPerGPU: 8 }));
  // @ts-expect-error: not a registered planner
  refused(() => plan(trace, { nodes: 1, gpusPerNode: 8, algorithm: "crafty" }));
  // @ts-expect-error: `objective` is one of "mean" | "paper"
  refused(() => plan(trace, { nodes: 1, gpusPerNode: 8, objective: "median" }));
  // @ts-expect-error: a flag is a boolean
  refused(() => plan(trace, { nodes: 1, gpusPerNode: 8, refine: "yes" }));
  // @ts-expect-error: a count is a number; only a budget (and groups, the model's) may be "auto"
  refused(() => plan(trace, { nodes: 1, gpusPerNode: 8, localPercent: "auto" }));
  // groups: "auto" is the model's (the default), as the engines pass it
  plan(trace, { nodes: 1, gpusPerNode: 8, groups: "auto" });
  // @ts-expect-error: the cluster is required
  refused(() => plan(trace, { algorithm: "eplb" }));
  const fresh = new Planner();
  fresh.generate("olmoe", 2, 1);
  // @ts-expect-error: `gpus` is not a cluster setting
  refused(() => fresh.configure({ nodes: 1, gpus: 8 }));
  fresh.free();
  // @ts-expect-error: no such field on the view
  seen.push(String(view.replicas));
  return seen;
}
