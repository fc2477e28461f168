//! # moeplan-cuda — run a plan the way an expert-parallel engine would
//!
//! The planner predicts how balanced a placement is from token counts; this
//! crate runs the placement on a GPU and measures kernel time, so the two
//! can be compared. One MoE layer goes through the stages of an
//! expert-parallel engine:
//!
//! | stage | CPU reference (the spec) | GPU |
//! | --- | --- | --- |
//! | token routing: each token's top-k experts, gate weights, source rank | [`routing`] | — (generated on the host, seeded) |
//! | replica selection: (token, k) → physical copy by the planner's own rules ([`moeplan::judge`]): `vllm`, `sglang-static`, `sglang-static-v0`, and GRACE-MoE's `grace-weighted` / `grace-topology` and Libra's `libra`, whose fractional splits are realised in whole rows | [`select`] | [`gpu::Gpu::select`] (the GRACE and Libra selections are made on the host and copied into place) |
//! | dispatch: per-copy counts, offsets, the stable permutation, the row gather | [`dispatch`] | [`gpu::Gpu::dispatch`] |
//! | expert compute: gate/up GEMM, SiLU(gate)·up, down GEMM in bf16 (f32 accumulate) | [`expert`] | [`gpu::Gpu::experts_rank`] (cuBLAS) |
//! | combine: gate-weighted sum back into token order | [`combine`] | [`gpu::Gpu::combine`] |
//!
//! Expert parallelism is emulated on one GPU ([`bench`](mod@bench)): each simulated
//! rank's share — the rows its hosted copies receive — runs alone, timed
//! with CUDA events; a layer takes as long as its slowest rank.
//!
//! Nothing CUDA is needed to build: the driver, NVRTC and cuBLAS are loaded
//! when [`gpu::Gpu::open`] runs, and a machine without them gets
//! [`Error::NoDevice`] rather than a panic.
//!
//! ```
//! use moeplan_cuda::{dispatch, routing, select};
//! let slots = select::LayerSlots::new(&[vec![0, 1], vec![2, 0]], 3, 2)?;
//! let r = routing::generate(&[5.0, 1.0, 1.0], 8, 2, 7)?;
//! let phys = select::select_cpu(&r, &slots, &select::Selector::Vllm)?;
//! let index = dispatch::dispatch_cpu(&phys, slots.num_slots())?;
//! assert_eq!(index.counts.iter().sum::<u32>(), 16);
//! # Ok::<(), moeplan_cuda::Error>(())
//! ```
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]
#![warn(missing_docs)]

pub mod bench;
pub mod check;
pub mod combine;
pub mod dispatch;
pub mod error;
pub mod expert;
pub mod gpu;
pub mod micro;
pub mod routing;
pub mod select;

pub use error::{Error, Result};
