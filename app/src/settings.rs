//! The page's settings and their URL-hash form, so a link reproduces a view:
//! `#preset=deepseek-v3&batches=64&seed=7&nodes=8&gpus=8&groups=8&r=auto&layer=0&mem=deepseek-v3&rule=even`
//! (and `&routes=0` when the generator makes counts only, not token routes; `&n=4` and
//! `&predictor=oracle` when Libra's options differ from the registry's
//! defaults; `&ratio=0.2` when GRACE's non-uniformity ratio is not `auto`;
//! `&every=16&window=16` while serving with re-planning is shown;
//! `&hw=none` for balance only, `&hw=a100-80g-efa` for another machine than
//! [`DEFAULT_HARDWARE`]; `&phase=decode`; `&rules=one` when every row is
//! judged under the one rule chosen). Missing or unreadable keys fall back
//! to the defaults.

use moeplan::data::model;
use moeplan::planners::{
    EXTRA_EXPERTS_PER_GPU, NONUNIFORMITY, OptionKind, OptionSpec, PREDICTOR, Value,
};
use moeplan::studies::ENGINES;
use moeplan_view::dispatch_rule;

/// The machine the page prices on until the person chooses another:
/// DeepSeek-V3 (the default model, 671 B parameters in FP8) fits on the
/// default 64 H100s with room for its KV cache, and the preset is
/// calibrated on AIConfigurator's measured H100 kernels, so its predictions
/// carry a measured error band (docs/cost.md).
pub const DEFAULT_HARDWARE: &str = "h100-ib-ndr";

/// The hash's word for balance only (no hardware).
const NO_HARDWARE: &str = "none";

/// The hardware menu's value for a loaded hardware file (no preset has
/// this name: theirs start with the GPU).
pub const FILE_HARDWARE: &str = "file";

/// A hardware file read on the page, checked as the CLI's `--hardware FILE`
/// is ([`moeplan::formats::read_hardware`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareFile {
    /// The file's name on the person's disk.
    pub file: String,
    /// The preset's own name (its `name` field).
    pub name: String,
    /// Where its figures come from ([`moeplan::data::hardware::Hardware::provenance`]).
    pub provenance: &'static str,
    /// The file's JSON, sent with every request priced on it.
    pub json: String,
}

impl HardwareFile {
    /// Reads and checks a hardware file's bytes; the error is one line
    /// naming the file.
    ///
    /// ```
    /// use moeplan_app::settings::HardwareFile;
    /// let h100 = moeplan::data::hardware::preset("h100-ib-ndr")?;
    /// let f = HardwareFile::read("gpu.json", &serde_json::to_vec(h100).unwrap()).unwrap();
    /// assert_eq!((f.name.as_str(), f.provenance), ("h100-ib-ndr", "calibrated"));
    /// assert!(HardwareFile::read("x.json", b"{\"name\": 1}").unwrap_err().starts_with("x.json: "));
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn read(file: &str, bytes: &[u8]) -> Result<HardwareFile, String> {
        let h = moeplan::formats::read_hardware(bytes).map_err(|e| format!("{file}: {e}"))?;
        Ok(HardwareFile {
            file: file.to_string(),
            name: h.name.to_string(),
            provenance: h.provenance(),
            json: String::from_utf8_lossy(bytes).into_owned(),
        })
    }
}

/// Everything a user sets on the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Generator preset.
    pub preset: String,
    /// Generated batches.
    pub batches: usize,
    /// Generator seed.
    pub seed: u32,
    /// The generator makes token routes (GRACE's affinity), not counts.
    pub routes: bool,
    /// Nodes.
    pub nodes: usize,
    /// GPUs per node.
    pub gpus_per_node: usize,
    /// EPLB's expert groups.
    pub groups: usize,
    /// CRAFT's budget, `None` = automatic.
    pub replicas_per_gpu: Option<usize>,
    /// Layer index shown in the placement view.
    pub layer: usize,
    /// The model every plan is judged on (its sizes price replica memory,
    /// the traffic's bytes, the copies and the time); empty: the trace's,
    /// else DeepSeek-V3 (`moeplan::judge::ModelChoice`, the worker's
    /// judge chooses; the view says which, [`moeplan_view::page::Frame::model`]).
    pub memory_model: String,
    /// The dispatch rule the plans are measured under ([`moeplan::judge::Rule`]'s name).
    pub rule: String,
    /// Libra's `N`: copies per GPU per layer and batch.
    pub libra_n: usize,
    /// Libra's predictor (a word of its registry option).
    pub predictor: String,
    /// GRACE's non-uniformity ratio (a word of its registry option:
    /// `auto` or a ratio).
    pub grace_ratio: String,
    /// The hardware preset every plan is priced on
    /// ([`moeplan::data::hardware`]'s name), or [`FILE_HARDWARE`]: the
    /// file in `hardware_file`; empty: balance only. [`DEFAULT_HARDWARE`]
    /// by default.
    pub hardware: String,
    /// Prefill or decode batches (`moeplan eval --phase`'s words): in
    /// decode each token is a request holding 4,096 tokens of KV cache, so
    /// replicas' memory caps the batch.
    pub phase: String,
    /// Every row judged under the one rule chosen; `false` (the default):
    /// each planner under the rule its system serves under (GRACE's
    /// topology-aware routing, Libra's rebalancer), the rest under the one
    /// chosen.
    pub one_rule: bool,
    /// A hardware file the person loaded (what `moeplan calibrate --out`
    /// writes), kept while another preset is chosen so the menu can go back
    /// to it; never in the URL hash (a link cannot carry a file).
    pub hardware_file: Option<HardwareFile>,
    /// Serving with re-planning shown: EPLB re-planned every `every`
    /// batches on the last `window`.
    pub serve: bool,
    /// The re-plan interval `K`, in batches (an engine's forward passes
    /// when `engine` is set).
    pub every: usize,
    /// The window `W` each re-plan reads, in the same unit.
    pub window: usize,
    /// The engine whose knobs `K` and `W` are (`moeplan replay --engine`'s
    /// names); empty: trace batches and moeplan's relabelled move.
    pub engine: String,
    /// With an engine, tokens a forward pass serves (0: a trace batch).
    pub tokens_per_pass: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            // The one default model (`moeplan::judge::DEFAULT_MODEL`):
            // generated, and whose expert size the prices use.
            preset: moeplan::judge::DEFAULT_MODEL.into(),
            batches: 64,
            seed: 7,
            // Token routes by default: traffic, GRACE's affinity grouping
            // and Libra's path table mean something the first time a
            // person looks (counts alone give every plan the same traffic).
            routes: true,
            nodes: 8,
            gpus_per_node: 8,
            groups: 8,
            replicas_per_gpu: None,
            layer: 0,
            memory_model: String::new(),
            rule: "even".into(),
            libra_n: default_count(&EXTRA_EXPERTS_PER_GPU),
            predictor: PREDICTOR.default.to_string(),
            grace_ratio: NONUNIFORMITY.default.to_string(),
            hardware: DEFAULT_HARDWARE.into(),
            phase: PHASES[0].into(),
            one_rule: false,
            hardware_file: None,
            serve: false,
            every: 16,
            window: 16,
            engine: String::new(),
            tokens_per_pass: 0,
        }
    }
}

fn default_count(spec: &OptionSpec) -> usize {
    match spec.default {
        Value::Count(n) => n,
        _ => 0,
    }
}

impl Settings {
    /// Reads a URL hash (with or without the leading `#`).
    ///
    /// ```
    /// use moeplan_app::settings::Settings;
    /// let s = Settings::from_hash("#nodes=2&gpus=4&r=8&preset=olmoe&bogus=1&batches=x&rule=optimal");
    /// assert_eq!((s.nodes, s.gpus_per_node, s.replicas_per_gpu), (2, 4, Some(8)));
    /// assert_eq!(s.rule, "optimal");
    /// assert_eq!(Settings::from_hash("#rule=bogus").rule, "even");
    /// assert_eq!(s.preset, "olmoe");
    /// assert_eq!(s.batches, Settings::default().batches);
    /// assert_eq!(Settings::from_hash(&s.to_hash()), s);
    /// let r = Settings::from_hash("#routes=0");
    /// assert!(!r.routes && s.routes);
    /// assert_eq!(Settings::from_hash(&r.to_hash()), r);
    /// let k = Settings::from_hash("#every=4&window=8");
    /// assert!(k.serve && !s.serve && (k.every, k.window) == (4, 8));
    /// assert_eq!(Settings::from_hash(&k.to_hash()), k);
    /// let e = Settings::from_hash("#every=1000&window=500&engine=sglang&tpp=4096");
    /// assert_eq!((e.engine.as_str(), e.tokens_per_pass), ("sglang", 4096));
    /// assert_eq!(Settings::from_hash(&e.to_hash()), e);
    /// assert_eq!(Settings::from_hash("#engine=tgi").engine, "");
    /// // Priced by default; `hw=none` for balance only.
    /// assert_eq!(s.hardware, "h100-ib-ndr");
    /// let b = Settings::from_hash("#hw=none&phase=decode&rules=one");
    /// assert!(b.hardware.is_empty() && b.phase == "decode" && b.one_rule);
    /// assert_eq!(Settings::from_hash(&b.to_hash()), b);
    /// ```
    pub fn from_hash(hash: &str) -> Settings {
        let mut s = Settings::default();
        for pair in hash.trim_start_matches('#').split('&') {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            let num = || v.parse::<usize>().ok().filter(|&x| x > 0 && x <= 1 << 16);
            match k {
                "preset" if model::preset(v).is_ok() => s.preset = v.to_ascii_lowercase(),
                "batches" => s.batches = num().unwrap_or(s.batches).min(4096),
                "seed" => s.seed = v.parse().unwrap_or(s.seed),
                "routes" => s.routes = v != "0",
                "nodes" => s.nodes = num().unwrap_or(s.nodes),
                "gpus" => s.gpus_per_node = num().unwrap_or(s.gpus_per_node),
                "groups" => s.groups = num().unwrap_or(s.groups),
                "r" if v == "auto" => s.replicas_per_gpu = None,
                "r" => s.replicas_per_gpu = v.parse().ok().or(s.replicas_per_gpu),
                "layer" => s.layer = v.parse().unwrap_or(0),
                "mem" if v.is_empty() || model::preset(v).is_ok() => {
                    s.memory_model = v.to_ascii_lowercase()
                }
                "rule" if dispatch_rule(v).is_ok() => s.rule = v.to_string(),
                "hw" if v == NO_HARDWARE => s.hardware = String::new(),
                "hw" if moeplan::data::hardware::preset(v).is_ok() => {
                    s.hardware = v.to_ascii_lowercase()
                }
                "phase" if PHASES.contains(&v) => s.phase = v.to_string(),
                "rules" => s.one_rule = v == "one",
                "n" => {
                    s.libra_n = v
                        .parse()
                        .ok()
                        .filter(|&x| x <= 1 << 10)
                        .unwrap_or(s.libra_n)
                }
                "predictor" if Value::parse(PREDICTOR.kind, v).is_ok() => {
                    s.predictor = v.to_string()
                }
                "ratio" if grace_ratios().contains(&v) => s.grace_ratio = v.to_string(),
                "every" => {
                    s.every = num().unwrap_or(s.every);
                    s.serve = true
                }
                "window" => {
                    s.window = num().unwrap_or(s.window);
                    s.serve = true
                }
                "engine" if ENGINES.iter().any(|e| e.name == v) => {
                    s.engine = v.to_string();
                    s.serve = true
                }
                "tpp" => s.tokens_per_pass = num().unwrap_or(0),
                _ => {}
            }
        }
        s
    }

    /// The hash for these settings.
    pub fn to_hash(&self) -> String {
        let d = Settings::default();
        let mut libra = String::new();
        if self.libra_n != d.libra_n {
            libra.push_str(&format!("&n={}", self.libra_n));
        }
        if self.predictor != d.predictor {
            libra.push_str(&format!("&predictor={}", self.predictor));
        }
        if self.grace_ratio != d.grace_ratio {
            libra.push_str(&format!("&ratio={}", self.grace_ratio));
        }
        // A file cannot travel in a link: it opens on the default machine.
        if self.hardware.is_empty() {
            libra.push_str(&format!("&hw={NO_HARDWARE}"));
        } else if self.hardware != d.hardware && self.hardware != FILE_HARDWARE {
            libra.push_str(&format!("&hw={}", self.hardware));
        }
        if self.phase != d.phase {
            libra.push_str(&format!("&phase={}", self.phase));
        }
        if self.one_rule {
            libra.push_str("&rules=one");
        }
        if self.serve {
            libra.push_str(&format!("&every={}&window={}", self.every, self.window));
            if !self.engine.is_empty() {
                libra.push_str(&format!("&engine={}", self.engine));
            }
            if self.tokens_per_pass > 0 {
                libra.push_str(&format!("&tpp={}", self.tokens_per_pass));
            }
        }
        format!(
            "#preset={}&batches={}&seed={}&nodes={}&gpus={}&groups={}&r={}&layer={}&mem={}&rule={}{}",
            self.preset,
            self.batches,
            self.seed,
            self.nodes,
            self.gpus_per_node,
            self.groups,
            self.replicas_per_gpu
                .map_or("auto".to_string(), |r| r.to_string()),
            self.layer,
            self.memory_model,
            self.rule,
            if self.routes { "" } else { "&routes=0" }
        ) + &libra
    }

    /// Libra's options as the worker's request carries them (registry
    /// names and values).
    ///
    /// ```
    /// use moeplan_app::settings::Settings;
    /// let s = Settings::from_hash("#n=3&predictor=oracle");
    /// assert_eq!((s.libra_n, s.predictor.as_str()), (3, "oracle"));
    /// assert_eq!(Settings::from_hash(&s.to_hash()), s);
    /// assert_eq!(Settings::from_hash("#predictor=magic").predictor, "previous-batch");
    /// assert_eq!(s.per_batch()[0], ("extra_experts_per_gpu".to_string(), "3".to_string()));
    /// ```
    pub fn per_batch(&self) -> Vec<(String, String)> {
        vec![
            (
                EXTRA_EXPERTS_PER_GPU.name.to_string(),
                self.libra_n.to_string(),
            ),
            (PREDICTOR.name.to_string(), self.predictor.clone()),
        ]
    }

    /// The static planners' options as the worker's request carries them
    /// (GRACE's non-uniformity ratio).
    ///
    /// ```
    /// use moeplan_app::settings::Settings;
    /// let s = Settings::from_hash("#ratio=0.2");
    /// assert_eq!(s.static_options(), vec![("nonuniformity".to_string(), "0.2".to_string())]);
    /// assert_eq!(Settings::from_hash(&s.to_hash()), s);
    /// assert_eq!(Settings::from_hash("#ratio=0.25").grace_ratio, "auto");
    /// ```
    pub fn static_options(&self) -> Vec<(String, String)> {
        vec![(NONUNIFORMITY.name.to_string(), self.grace_ratio.clone())]
    }

    /// The cluster the settings name.
    pub fn cluster(&self) -> moeplan_view::Cluster {
        moeplan_view::Cluster {
            nodes: self.nodes,
            gpus_per_node: self.gpus_per_node,
            groups: self.groups,
        }
    }
}

/// The phases the page prices (`moeplan eval --phase`'s words), the
/// default first.
pub const PHASES: [&str; 2] = ["prefill", "decode"];

/// The words GRACE's non-uniformity ratio takes (`auto` first).
pub fn grace_ratios() -> &'static [&'static str] {
    match NONUNIFORMITY.kind {
        OptionKind::Choice(words) => words,
        _ => &[],
    }
}
