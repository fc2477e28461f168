//! Named hardware: one GPU kind and the links between GPUs inside a node
//! and between nodes — what the cost model ([`crate::judge::cost`]) turns
//! rows, copies and messages into time with. Every figure is the vendor's
//! or the paper's, its source beside it; the efficiencies (the fraction of
//! a peak that real kernels sustain) are measured where moeplan measured
//! them and stated as assumptions elsewhere. A custom preset is the same
//! shape read from JSON (`schemas/moeplan.hardware.schema.json`,
//! `crate::formats::hardware`).
//!
//! Units: TFLOPS = 10¹² FLOP/s (dense, no sparsity), GB/s = 10⁹ bytes/s
//! per direction, memory in GiB (2³⁰ bytes), latency in µs.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One GPU's peaks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    /// Dense BF16 tensor throughput, TFLOPS.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor throughput, TFLOPS; 0 where the GPU has no FP8
    /// tensor cores (FP8 weights are then computed in BF16).
    pub fp8_tflops: f64,
    /// Memory bandwidth, GB/s.
    pub hbm_gb_per_s: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
}

/// One kind of link as a GPU sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Bandwidth per direction, GB/s: one GPU's own, or the whole node's
    /// when `shared_by_node` (one NIC for every GPU of the node).
    pub gb_per_s: f64,
    /// Time one transfer takes before its first byte lands, µs.
    pub latency_us: f64,
    /// The bandwidth is the node's, shared by its GPUs.
    #[serde(default)]
    pub shared_by_node: bool,
}

/// The fraction of each peak that real kernels sustain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Efficiency {
    /// Expert GEMMs at large row counts, of the tensor peak.
    pub gemm: f64,
    /// Weight reads, of the memory bandwidth.
    pub hbm: f64,
    /// All-to-all inside a node, of the link bandwidth.
    pub intra_node: f64,
    /// All-to-all between nodes, of the link bandwidth.
    pub inter_node: f64,
    /// How a copy's weight read `w` and GEMMs `g` add up: `(w^p +
    /// g^p)^(1/p)` — `p = 1` their sum, large `p` the larger alone (the
    /// roofline). Real grouped GEMMs sit between: neither overlaps fully.
    pub roofline_p: f64,
}

/// One all-to-all kernel as measured: the fixed time of a dispatch and of
/// a combine, and the bandwidth the kernel achieves on the bytes the cost
/// model counts (its token messages), per GPU and direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommKernel {
    /// Fixed time of one dispatch (launch, notify, the first byte), µs.
    pub dispatch_fixed_us: f64,
    /// Fixed time of one combine, µs.
    pub combine_fixed_us: f64,
    /// Achieved bandwidth inside a node, GB/s; 0: the link's sustained
    /// bandwidth (`intra_node` × `efficiency.intra_node`).
    pub intra_gb_per_s: f64,
    /// Achieved bandwidth between nodes, GB/s (the node's when the link is
    /// shared by the node); 0: the link's sustained bandwidth.
    pub inter_gb_per_s: f64,
}

/// The kernels' own times, fitted to measurements (`moeplan calibrate`):
/// what the peaks and efficiencies alone miss — a fixed time per
/// grouped-GEMM call and per all-to-all, and the bandwidth each
/// all-to-all kernel reaches. A preset without them prices with the
/// links' latencies and sustained bandwidths.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kernels {
    /// Fixed time of one GPU's expert computation in one layer (the
    /// grouped GEMMs' launch and their last partial wave), µs: paid by
    /// every GPU that receives rows.
    pub moe_fixed_us: f64,
    /// DeepEP's normal (high-throughput) kernels.
    pub normal: CommKernel,
    /// DeepEP's low-latency kernels.
    pub low_latency: CommKernel,
}

/// Where a preset's figures were fitted and how well they held there
/// (the fit's residuals, [`crate::judge::calibrate`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// What was measured: the tables or bench file and the GPU.
    pub source: Cow<'static, str>,
    /// Measurements the fit used.
    pub rows: u32,
    /// Median of |predicted − measured| / measured over them, percent.
    pub median_error_pct: f64,
    /// The largest such error, percent.
    pub worst_error_pct: f64,
}

/// A named machine: GPU, links and efficiencies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    /// Name on the command line and in the page; starts with the GPU
    /// (`h100-…`).
    pub name: Cow<'static, str>,
    /// One line: the GPU and the links.
    pub about: Cow<'static, str>,
    /// The GPU.
    pub gpu: Gpu,
    /// Links between GPUs of one node.
    pub intra_node: Link,
    /// Links between nodes.
    pub inter_node: Link,
    /// Fractions of the peaks sustained.
    pub efficiency: Efficiency,
    /// The kernels' fixed times and achieved bandwidths, where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<Kernels>,
    /// Where the figures were fitted, and their error there; `None`: from
    /// datasheets and assumptions, not fitted to this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// NVIDIA GPUs' sustained fractions. GEMM 0.75 and memory 0.88: moeplan-cuda
/// on an H100 SXM (docs/cuda.md: DeepSeek-V3 expert GEMMs at 737 of 989
/// TFLOPS, gathers at 2,958 of 3,352 GB/s). NVLink 0.8: DeepEP's README
/// gives ~160 GB/s reachable of the H800's 200 GB/s per direction. RDMA
/// 0.9: the same README gives ~50 GB/s of a 400 Gb/s port as its ceiling;
/// 0.9 is an assumption for protocol overhead. Taken for the other GPUs
/// too, PCIe and Ethernet included (an assumption: no measurement here).
/// `roofline_p` 1.22: fitted to the same H100 GEMM series (one expert ×
/// 256 rows took 53 µs where weight read and GEMM alone take ~30 µs each);
/// it then gives 139 µs at 1,024 rows (measured 139) and 501 at 4,096
/// (measured 490).
const NVIDIA: Efficiency = Efficiency {
    gemm: 0.75,
    hbm: 0.88,
    intra_node: 0.8,
    inter_node: 0.9,
    roofline_p: 1.22,
};

/// The H100 SXM fitted to measured kernel times (issue 47): AIConfigurator
/// 0.12.0's `h100_sxm` tables (the `aiconfigurator-core` wheel: SGLang
/// 0.5.10 wide-EP decode MoE, 0.5.12 DeepEP normal and low-latency inside
/// one node; DeepSeek-V3's shape, FP8 block weights, uniform routing, EP
/// 8–256), read and fitted by `moeplan calibrate --hardware h100-ib-ndr
/// --aiconfigurator …/h100_sxm` (e460ef0): 65 measurements, in-sample
/// median 1.3 %, worst 10.6 % (docs/cost.md, "Fitted to measurements").
/// The link fractions are not fitted (inside one node the kernels'
/// achieved bandwidths below replace them).
const H100_FITTED: Efficiency = Efficiency {
    gemm: 0.653,
    hbm: 0.819,
    intra_node: 0.8,
    inter_node: 0.9,
    roofline_p: 2.195,
};

/// The same fit's kernel times: 20.9 µs per grouped-GEMM call; DeepEP's
/// normal kernels 42.1 µs (dispatch) and 78.2 µs (combine) fixed at
/// 301 GB/s achieved over NVLink 4's 450, the low-latency ones 10.1 and
/// 12.9 µs at 235 GB/s. Between nodes: the link's (the 0.5.12 tables are
/// one node only).
const H100_KERNELS: Kernels = deepep_on(450.0);

/// [`H100_KERNELS`] on a GPU whose NVLink carries `nvlink_gb_per_s` per
/// direction: the fixed times as measured on the H100, each kernel's
/// achieved bandwidth the same fraction of its link (301 / 450 and
/// 235 / 450). What a preset not fitted to its own GPU's tables takes
/// from the H100's (its structure, not its speed); checked against the
/// H200's and B200's own tables in docs/cost.md.
const fn deepep_on(nvlink_gb_per_s: f64) -> Kernels {
    let scale = nvlink_gb_per_s / 450.0;
    Kernels {
        moe_fixed_us: 20.89,
        normal: CommKernel {
            dispatch_fixed_us: 42.06,
            combine_fixed_us: 78.16,
            intra_gb_per_s: 301.43 * scale,
            inter_gb_per_s: 0.0,
        },
        low_latency: CommKernel {
            dispatch_fixed_us: 10.14,
            combine_fixed_us: 12.93,
            intra_gb_per_s: 234.78 * scale,
            inter_gb_per_s: 0.0,
        },
    }
}

/// InfiniBand NDR / ConnectX-7: 400 Gb/s = 50 GB/s per GPU per direction
/// (NVIDIA DGX H100 / B200 user guides: one 400 Gb/s ConnectX-7 per GPU);
/// latency a few µs end to end through a switch (assumption: 5 µs with
/// GPU-initiated RDMA).
const IB_NDR: Link = Link {
    gb_per_s: 50.0,
    latency_us: 5.0,
    shared_by_node: false,
};

/// NVLink 4 (H100, H200): 18 links × 25 GB/s = 450 GB/s per direction
/// (NVIDIA H100 datasheet: "NVLink 900 GB/s", both directions). Latency:
/// assumption, 3 µs per transfer through NVSwitch.
const NVLINK4: Link = Link {
    gb_per_s: 450.0,
    latency_us: 3.0,
    shared_by_node: false,
};

/// 25 Gb Ethernet, one port per node (GRACE-MoE, seed 003, "Implementation
/// Details"): 3.125 GB/s shared by the node's GPUs; TCP latency
/// (assumption): 30 µs.
const ETH_25G: Link = Link {
    gb_per_s: 3.125,
    latency_us: 30.0,
    shared_by_node: true,
};

/// Every built-in hardware preset.
pub const PRESETS: &[Hardware] = &[
    Hardware {
        name: Cow::Borrowed("a100-80g-efa"),
        about: Cow::Borrowed(
            "A100 SXM 80 GB, NVLink 3, AWS p4de EFA 400 Gb/s per node (CRAFT's cluster)",
        ),
        // NVIDIA A100 datasheet (nvidia.com, "NVIDIA A100 Tensor Core GPU",
        // 80GB SXM column): BF16 312 TFLOPS dense, no FP8, 2,039 GB/s, 80 GB.
        gpu: Gpu {
            bf16_tflops: 312.0,
            fp8_tflops: 0.0,
            hbm_gb_per_s: 2039.0,
            memory_gib: 80.0,
        },
        // Same datasheet: NVLink 600 GB/s, both directions.
        intra_node: Link {
            gb_per_s: 300.0,
            latency_us: 3.0,
            shared_by_node: false,
        },
        // AWS EC2 P4 page: p4de.24xlarge, "400 Gbps" EFA per instance
        // (4 × 100 Gb/s) = 50 GB/s per node. EFA's SRD latency
        // (assumption): 15 µs.
        inter_node: Link {
            gb_per_s: 50.0,
            latency_us: 15.0,
            shared_by_node: true,
        },
        efficiency: NVIDIA,
        kernels: None,
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("h100-ib-ndr"),
        about: Cow::Borrowed("H100 SXM 80 GB, NVLink 4, InfiniBand NDR 400 Gb/s per GPU"),
        // NVIDIA H100 datasheet, SXM column: BF16 1,979 TFLOPS with
        // sparsity = 989.5 dense, FP8 3,958 sparse = 1,979 dense,
        // 3.35 TB/s, 80 GB.
        gpu: Gpu {
            bf16_tflops: 989.5,
            fp8_tflops: 1979.0,
            hbm_gb_per_s: 3350.0,
            memory_gib: 80.0,
        },
        intra_node: NVLINK4,
        inter_node: IB_NDR,
        efficiency: H100_FITTED,
        kernels: Some(H100_KERNELS),
        calibration: Some(Calibration {
            source: Cow::Borrowed(
                "AIConfigurator 0.12.0's H100 SXM tables (SGLang wide-EP decode MoE, DeepEP normal and low-latency; DeepSeek-V3's shape)",
            ),
            rows: 65,
            median_error_pct: 1.3,
            worst_error_pct: 10.6,
        }),
    },
    Hardware {
        name: Cow::Borrowed("h800-ib-ndr"),
        about: Cow::Borrowed(
            "H800 SXM 80 GB, NVLink 400 GB/s, InfiniBand NDR 400 Gb/s per GPU (DeepEP's tables)",
        ),
        // The H100 SXM's compute and memory (H800 datasheet); NVLink cut to
        // 400 GB/s both directions. DeepEP's README (legacy.md) measures on
        // it: "H800 (~160 GB/s NVLink maximum bandwidth)", "CX7 InfiniBand
        // 400 Gb/s RDMA network card (~50 GB/s maximum bandwidth)".
        gpu: Gpu {
            bf16_tflops: 989.5,
            fp8_tflops: 1979.0,
            hbm_gb_per_s: 3350.0,
            memory_gib: 80.0,
        },
        intra_node: Link {
            gb_per_s: 200.0,
            latency_us: 3.0,
            shared_by_node: false,
        },
        inter_node: IB_NDR,
        efficiency: H100_FITTED,
        kernels: Some(deepep_on(200.0)),
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("h200-ib-ndr"),
        about: Cow::Borrowed(
            "H200 SXM 141 GB, NVLink 4, InfiniBand NDR 400 Gb/s per GPU (Libra's node)",
        ),
        // NVIDIA H200 datasheet: H100's tensor peaks, 141 GB HBM3e at
        // 4.8 TB/s; Libra (seed 004, Table 2): 8 × H200-SXM5-141GB, NVSwitch
        // 900 GB/s.
        gpu: Gpu {
            bf16_tflops: 989.5,
            fp8_tflops: 1979.0,
            hbm_gb_per_s: 4800.0,
            memory_gib: 141.0,
        },
        intra_node: NVLINK4,
        inter_node: IB_NDR,
        efficiency: H100_FITTED,
        kernels: Some(deepep_on(450.0)),
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("b200-ib-ndr"),
        about: Cow::Borrowed("B200 180 GB, NVLink 5, InfiniBand NDR 400 Gb/s per GPU"),
        // NVIDIA DGX B200 datasheet: 8 GPUs, 1,440 GB HBM3e, 64 TB/s,
        // FP8 72 PFLOPS (sparse) → per GPU 180 GB, 8 TB/s, FP8 4.5 PF and
        // BF16 2.25 PF dense; NVLink 5 1.8 TB/s both directions; eight
        // 400 Gb/s ConnectX-7 ports.
        gpu: Gpu {
            bf16_tflops: 2250.0,
            fp8_tflops: 4500.0,
            hbm_gb_per_s: 8000.0,
            memory_gib: 180.0,
        },
        intra_node: Link {
            gb_per_s: 900.0,
            latency_us: 3.0,
            shared_by_node: false,
        },
        inter_node: IB_NDR,
        efficiency: H100_FITTED,
        kernels: Some(deepep_on(900.0)),
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("4090-pcie4-25gbe"),
        about: Cow::Borrowed("RTX 4090 24 GB, PCIe 4.0 x16, 25 Gb Ethernet per node (GRACE-MoE's)"),
        // NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090:
        // FP16/BF16 tensor with FP32 accumulate 165.2 TFLOPS dense, FP8 with
        // FP32 accumulate 330.3 dense, 1,008 GB/s GDDR6X, 24 GB (GRACE's
        // servers had 48 GB boards: give a custom preset for those).
        gpu: Gpu {
            bf16_tflops: 165.2,
            fp8_tflops: 330.3,
            hbm_gb_per_s: 1008.0,
            memory_gib: 24.0,
        },
        // PCI-SIG: PCIe 4.0 x16 = 16 GT/s × 16 lanes × 128/130 = 31.5 GB/s
        // per direction (GRACE-MoE writes 63 GB/s "per direction": both
        // directions together). Peer-to-peer through the root complex
        // (assumption): 10 µs.
        intra_node: Link {
            gb_per_s: 31.5,
            latency_us: 10.0,
            shared_by_node: false,
        },
        inter_node: ETH_25G,
        efficiency: NVIDIA,
        kernels: None,
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("3090-pcie1-25gbe"),
        about: Cow::Borrowed("RTX 3090 24 GB, PCIe 1.0 x16, 25 Gb Ethernet per node (GRACE-MoE's)"),
        // NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090: FP16/BF16
        // tensor with FP32 accumulate 71 TFLOPS dense, no FP8, 936 GB/s,
        // 24 GB.
        gpu: Gpu {
            bf16_tflops: 71.0,
            fp8_tflops: 0.0,
            hbm_gb_per_s: 936.0,
            memory_gib: 24.0,
        },
        // GRACE-MoE (seed 003): "PCIe 1.0 ×16 channels (4 GB/s per
        // direction)" (2.5 GT/s × 16 lanes × 8/10).
        intra_node: Link {
            gb_per_s: 4.0,
            latency_us: 10.0,
            shared_by_node: false,
        },
        inter_node: ETH_25G,
        efficiency: NVIDIA,
        kernels: None,
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("mi300x-ib-ndr"),
        about: Cow::Borrowed("MI300X 192 GB, Infinity Fabric, 400 Gb/s RDMA per GPU"),
        // AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOPS dense, FP8
        // 2,614.9 dense, 5.3 TB/s HBM3, 192 GB; 7 Infinity Fabric links of
        // 128 GB/s both directions = 448 GB/s per direction to the node's
        // peers. One 400 Gb/s NIC per GPU (AMD Instinct platform reference;
        // assumption for the latency, as for InfiniBand).
        gpu: Gpu {
            bf16_tflops: 1307.4,
            fp8_tflops: 2614.9,
            hbm_gb_per_s: 5300.0,
            memory_gib: 192.0,
        },
        intra_node: Link {
            gb_per_s: 448.0,
            latency_us: 3.0,
            shared_by_node: false,
        },
        inter_node: IB_NDR,
        // Not measured on AMD: the NVIDIA fractions, an assumption.
        efficiency: NVIDIA,
        kernels: None,
        calibration: None,
    },
    Hardware {
        name: Cow::Borrowed("910b-hccs-roce"),
        about: Cow::Borrowed("Ascend 910B 64 GB, HCCS, 200 GbE RoCE per NPU (Atlas 800T A2)"),
        // Huawei publishes no datasheet with these; the commonly reported
        // figures (e.g. Gitee AI's Ascend 910B page: FP16 280 TFLOPS,
        // 64 GB HBM2e) and 1.6 TB/s HBM2e; no FP8. Treat as uncertain.
        gpu: Gpu {
            bf16_tflops: 280.0,
            fp8_tflops: 0.0,
            hbm_gb_per_s: 1600.0,
            memory_gib: 64.0,
        },
        // HCCS full mesh of 8 NPUs, 392 GB/s reported per NPU both
        // directions (uncertain); Atlas 800T A2: 8 × 200 GE RoCE ports,
        // one per NPU = 25 GB/s.
        intra_node: Link {
            gb_per_s: 196.0,
            latency_us: 5.0,
            shared_by_node: false,
        },
        inter_node: Link {
            gb_per_s: 25.0,
            latency_us: 8.0,
            shared_by_node: false,
        },
        // Not measured on Ascend: assumption.
        efficiency: NVIDIA,
        kernels: None,
        calibration: None,
    },
];

impl Hardware {
    /// Where the figures come from, in a word or three: `calibrated` (fitted
    /// to its own GPU's measured kernel times, [`Hardware::calibration`]),
    /// `H100-fitted kernels` (its datasheet with the kernel times fitted on
    /// an H100) or `datasheet`. The CLI's `hardware` table and the page's
    /// hardware menu show it.
    ///
    /// ```
    /// use moeplan::data::hardware::preset;
    /// assert_eq!(preset("h100-ib-ndr")?.provenance(), "calibrated");
    /// assert_eq!(preset("b200-ib-ndr")?.provenance(), "H100-fitted kernels");
    /// assert_eq!(preset("a100-80g-efa")?.provenance(), "datasheet");
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn provenance(&self) -> &'static str {
        match (&self.calibration, &self.kernels) {
            (Some(_), _) => "calibrated",
            (None, Some(_)) => "H100-fitted kernels",
            (None, None) => "datasheet",
        }
    }

    /// Refuses a preset whose figures cannot be used: every peak finite
    /// and positive (FP8 may be 0: none), efficiencies in (0, 1],
    /// latencies finite and not negative, name non-empty.
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |what: &str, x: f64, rule: &str| {
            Error::Argument(format!(
                "hardware {:?}: {what} = {x} must be {rule}",
                self.name
            ))
        };
        if self.name.trim().is_empty() {
            return Err(Error::Argument("hardware: name must not be empty".into()));
        }
        let positive = [
            ("gpu.bf16_tflops", self.gpu.bf16_tflops),
            ("gpu.hbm_gb_per_s", self.gpu.hbm_gb_per_s),
            ("gpu.memory_gib", self.gpu.memory_gib),
            ("intra_node.gb_per_s", self.intra_node.gb_per_s),
            ("inter_node.gb_per_s", self.inter_node.gb_per_s),
        ];
        for (what, x) in positive {
            if !(x.is_finite() && x > 0.0) {
                return Err(bad(what, x, "finite and positive"));
            }
        }
        let non_negative = [
            ("gpu.fp8_tflops", self.gpu.fp8_tflops),
            ("intra_node.latency_us", self.intra_node.latency_us),
            ("inter_node.latency_us", self.inter_node.latency_us),
        ];
        for (what, x) in non_negative {
            if !(x.is_finite() && x >= 0.0) {
                return Err(bad(what, x, "finite and not negative"));
            }
        }
        let e = self.efficiency;
        for (what, x) in [
            ("efficiency.gemm", e.gemm),
            ("efficiency.hbm", e.hbm),
            ("efficiency.intra_node", e.intra_node),
            ("efficiency.inter_node", e.inter_node),
        ] {
            if !(x.is_finite() && x > 0.0 && x <= 1.0) {
                return Err(bad(what, x, "in (0, 1]"));
            }
        }
        if !(e.roofline_p.is_finite() && (1.0..=64.0).contains(&e.roofline_p)) {
            return Err(bad("efficiency.roofline_p", e.roofline_p, "in [1, 64]"));
        }
        if let Some(k) = &self.kernels {
            let mut fields = vec![("kernels.moe_fixed_us", k.moe_fixed_us)];
            for (name, c) in [("normal", &k.normal), ("low_latency", &k.low_latency)] {
                fields.extend([
                    (name, c.dispatch_fixed_us),
                    (name, c.combine_fixed_us),
                    (name, c.intra_gb_per_s),
                    (name, c.inter_gb_per_s),
                ]);
            }
            for (what, x) in fields {
                // A day is far beyond any kernel; a bandwidth past 1 PB/s too.
                if !(x.is_finite() && (0.0..=1e9).contains(&x)) {
                    let what = if what.starts_with("kernels") {
                        what.to_string()
                    } else {
                        format!("kernels.{what}")
                    };
                    return Err(bad(&what, x, "finite, not negative and at most 1e9"));
                }
            }
        }
        if let Some(c) = &self.calibration {
            for (what, x) in [
                ("calibration.median_error_pct", c.median_error_pct),
                ("calibration.worst_error_pct", c.worst_error_pct),
            ] {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(bad(what, x, "finite and not negative"));
                }
            }
        }
        Ok(())
    }

    /// Tensor throughput for weights of `bytes_per_weight` bytes: FP8
    /// weights run on the FP8 peak where the GPU has one, else on BF16.
    pub(crate) fn tflops_for(&self, bytes_per_weight: usize) -> f64 {
        if bytes_per_weight == 1 && self.gpu.fp8_tflops > 0.0 {
            self.gpu.fp8_tflops
        } else {
            self.gpu.bf16_tflops
        }
    }
}

/// The presets' names and one-line descriptions, in [`PRESETS`]' order —
/// what front ends list.
///
/// ```
/// let names: Vec<&str> = moeplan::data::hardware::listed().map(|(n, _)| n).collect();
/// assert_eq!(names[1], "h100-ib-ndr");
/// ```
pub fn listed() -> impl Iterator<Item = (&'static str, &'static str)> {
    PRESETS.iter().map(|h| {
        let text = |c: &'static Cow<'static, str>| -> &'static str {
            match c {
                Cow::Borrowed(s) => s,
                Cow::Owned(s) => s.as_str(),
            }
        };
        (text(&h.name), text(&h.about))
    })
}

/// Looks a preset up by name (case-insensitive).
///
/// ```
/// assert_eq!(moeplan::data::hardware::preset("H100-IB-NDR")?.gpu.memory_gib, 80.0);
/// assert!(moeplan::data::hardware::preset("tpu-v5").is_err());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn preset(name: &str) -> Result<&'static Hardware> {
    PRESETS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name.as_ref()).collect();
            Error::Argument(format!(
                "unknown hardware {name:?}; known: {} (or a JSON file, schemas/moeplan.hardware.schema.json)",
                names.join(", ")
            ))
        })
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn tflops_for() -> Result<(), Box<dyn std::error::Error>> {
        let h = crate::data::hardware::preset("h100-ib-ndr")?;
        assert_eq!(h.tflops_for(1), 1979.0);
        assert_eq!(h.tflops_for(2), 989.5);
        let a = crate::data::hardware::preset("a100-80g-efa")?;
        assert_eq!(a.tflops_for(1), 312.0); // no FP8 tensor cores
        Ok(())
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn hardware_check_example() {
        let run = || {
            let mut h = moeplan::data::hardware::preset("h100-ib-ndr")?.clone();
            assert!(h.check().is_ok());
            h.efficiency.gemm = 1.5;
            assert!(
                h.check()
                    .unwrap_err()
                    .to_string()
                    .contains("efficiency.gemm")
            );
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
