//! Where a plan came from: the traces it was made on ([`TraceRef`], by
//! [`fingerprint`]), what it was judged on ([`Scope`]: in-sample or held
//! out) and the record a plan file keeps ([`Provenance`]).

use serde::{Deserialize, Serialize};

use crate::data::trace::LoadTrace;
use crate::error::{Error, Result};

/// A stable fingerprint of a trace's contents: FNV-1a (64 bits) over its
/// shape, its MoE layer ids and every count's `f64` bits, batch-major, in a
/// fixed little-endian order, written `fnv1a64:` + 16 hex digits. The same
/// counts and layer ids read from any file format give the same
/// fingerprint; one changed count, layer id or batch gives another (the
/// model's name, top-k and layer count are not part of it). Not cryptographic: it tells a
/// plan's own trace from another one, it does not resist forgery.
///
/// ```
/// use moeplan::{data::fingerprint, LoadTrace};
/// use ndarray::Array3;
/// let a = LoadTrace::new(Array3::from_elem((2, 1, 4), 1.0), vec![0])?;
/// let mut c = Array3::from_elem((2, 1, 4), 1.0);
/// c[[1, 0, 3]] = 2.0;
/// let b = LoadTrace::new(c, vec![0])?;
/// assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
/// assert_ne!(fingerprint(&a), fingerprint(&b));
/// assert!(fingerprint(&a).starts_with("fnv1a64:"));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn fingerprint(trace: &LoadTrace) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    };
    eat(b"moeplan.trace.v1");
    let (b, l, e) = trace.counts().dim();
    for n in [b, l, e] {
        eat(&(n as u64).to_le_bytes());
    }
    for id in trace.layer_ids() {
        eat(&id.to_le_bytes());
    }
    for &v in trace.counts() {
        // -0.0 and 0.0 are the same count.
        let v = if v == 0.0 { 0.0f64 } else { v };
        eat(&v.to_bits().to_le_bytes());
    }
    format!("fnv1a64:{h:016x}")
}

/// One trace a plan was made on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct TraceRef {
    /// [`fingerprint`] of the whole trace (every batch, held-out ones too).
    pub fingerprint: String,
    /// Batches of the trace in all.
    pub batches: usize,
    /// The batches the planner saw, `[start, end)`.
    pub planned: [usize; 2],
    /// The trace's share of the mix, when planned on several traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

/// What a plan was made on: one trace (or part of it) or several traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct Provenance {
    /// Every trace planned on, in the order given.
    pub traces: Vec<TraceRef>,
}

impl Provenance {
    /// A plan made on `planned` batches of `trace`.
    pub(crate) fn of(trace: &LoadTrace, planned: std::ops::Range<usize>) -> Result<Provenance> {
        let r = TraceRef {
            fingerprint: fingerprint(trace),
            batches: trace.num_batches(),
            planned: [planned.start, planned.end],
            weight: None,
        };
        let p = Provenance { traces: vec![r] };
        p.validate()?;
        Ok(p)
    }

    /// A plan made on every batch of several traces, each with its share
    /// of the mix (`weights`, one per trace).
    pub(crate) fn of_all(traces: &[&LoadTrace], weights: &[f64]) -> Result<Provenance> {
        if traces.len() != weights.len() {
            return Err(Error::Argument(format!(
                "{} weights for {} traces",
                weights.len(),
                traces.len()
            )));
        }
        let traces = traces
            .iter()
            .zip(weights)
            .map(|(t, &w)| TraceRef {
                fingerprint: fingerprint(t),
                batches: t.num_batches(),
                planned: [0, t.num_batches()],
                weight: Some(w),
            })
            .collect();
        let p = Provenance { traces };
        p.validate()?;
        Ok(p)
    }

    /// Checks what a file may claim: at least one trace, planned batch
    /// ranges non-empty and inside their trace, weights finite and
    /// non-negative.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.traces.is_empty() {
            return Err(Error::Plan("provenance lists no trace".into()));
        }
        for t in &self.traces {
            let [a, b] = t.planned;
            if a >= b || b > t.batches {
                return Err(Error::Plan(format!(
                    "provenance: planned batches {a}..{b} are empty or outside the trace's 0..{}",
                    t.batches
                )));
            }
            if t.weight.is_some_and(|w| !(w.is_finite() && w >= 0.0)) {
                return Err(Error::Plan(
                    "provenance: a trace's weight must be finite and non-negative".into(),
                ));
            }
        }
        Ok(())
    }

    /// Where figures on batches `evaluated` of the trace with fingerprint
    /// `judged` come from, relative to what the plan was made on.
    pub fn scope(&self, judged: &str, evaluated: std::ops::Range<usize>) -> Scope {
        let Some(own) = self.traces.iter().find(|t| t.fingerprint == judged) else {
            return Scope::AnotherTrace {
                fingerprint: judged.to_string(),
                planned_on: self.traces.iter().map(|t| t.fingerprint.clone()).collect(),
                batches: evaluated,
            };
        };
        let [a, b] = own.planned;
        let planned = a..b;
        let of = self.traces.len();
        if evaluated.start >= b || evaluated.end <= a {
            Scope::HeldOut { evaluated, planned }
        } else if evaluated.start >= a && evaluated.end <= b {
            Scope::InSample {
                batches: evaluated,
                of_traces: of,
            }
        } else {
            Scope::PartlyInSample { evaluated, planned }
        }
    }
}

/// Where an evaluation's figures come from, relative to the plan's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Judged on batches the planner saw (`of_traces` > 1: one of the
    /// several traces it was made on).
    InSample {
        /// Batches judged.
        batches: std::ops::Range<usize>,
        /// Traces the plan was made on.
        of_traces: usize,
    },
    /// Judged on batches of the plan's own trace that the planner did not see.
    HeldOut {
        /// Batches judged.
        evaluated: std::ops::Range<usize>,
        /// Batches planned on.
        planned: std::ops::Range<usize>,
    },
    /// Judged on batches some of which the planner saw.
    PartlyInSample {
        /// Batches judged.
        evaluated: std::ops::Range<usize>,
        /// Batches planned on.
        planned: std::ops::Range<usize>,
    },
    /// Judged on a trace the plan was not made on.
    AnotherTrace {
        /// The judged trace's fingerprint.
        fingerprint: String,
        /// The fingerprints of the traces planned on.
        planned_on: Vec<String>,
        /// Batches judged.
        batches: std::ops::Range<usize>,
    },
    /// The plan records nothing about its data (an older plan JSON, an
    /// engine's file): `batches` judged, `holdout` when the file's own
    /// held-out fraction chose them.
    Unknown {
        /// Batches judged.
        batches: std::ops::Range<usize>,
        /// Whether they are the file's held-out fraction.
        holdout: bool,
    },
}

impl Scope {
    /// One word for machines: `in-sample`, `held-out`, `partly-in-sample`,
    /// `another-trace` or `unknown`.
    pub fn kind(&self) -> &'static str {
        match self {
            Scope::InSample { .. } => "in-sample",
            Scope::HeldOut { .. } => "held-out",
            Scope::PartlyInSample { .. } => "partly-in-sample",
            Scope::AnotherTrace { .. } => "another-trace",
            Scope::Unknown { .. } => "unknown",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |r: &std::ops::Range<usize>| r.end.saturating_sub(r.start);
        match self {
            Scope::InSample { batches, of_traces } => {
                write!(f, "in-sample: batches {}..{}", batches.start, batches.end)?;
                if *of_traces > 1 {
                    write!(f, " (one of the {of_traces} traces planned on)")?;
                }
                Ok(())
            }
            Scope::HeldOut { evaluated, planned } => write!(
                f,
                "held-out batches {}..{} (planned on {}..{})",
                evaluated.start, evaluated.end, planned.start, planned.end
            ),
            Scope::PartlyInSample { evaluated, planned } => write!(
                f,
                "partly in-sample: batches {}..{}, planned on {}..{}",
                evaluated.start, evaluated.end, planned.start, planned.end
            ),
            Scope::AnotherTrace {
                fingerprint,
                planned_on,
                batches,
            } => write!(
                f,
                "another trace (fingerprint {fingerprint}; planned on {}), {} batch(es)",
                planned_on.join(", "),
                n(batches)
            ),
            Scope::Unknown { batches, holdout } => write!(
                f,
                "unknown: the plan records no trace; batches {}..{}{}",
                batches.start,
                batches.end,
                if *holdout {
                    " (the file's held-out fraction)"
                } else {
                    ""
                }
            ),
        }
    }
}

/// The examples once in the docs of the items above, which are not public.
#[cfg(test)]
mod examples {
    #[test]
    fn of() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{LoadTrace, data::plan::Provenance};
        use ndarray::Array3;
        let t = LoadTrace::new(Array3::from_elem((4, 1, 2), 1.0), vec![0])?;
        assert_eq!(Provenance::of(&t, 0..4)?.traces[0].batches, 4);
        assert!(Provenance::of(&t, 0..5).is_err());
        Ok(())
    }
    #[test]
    fn of_all() -> Result<(), Box<dyn std::error::Error>> {
        use crate::{LoadTrace, data::plan::Provenance};
        use ndarray::Array3;
        let a = LoadTrace::new(Array3::from_elem((1, 1, 2), 1.0), vec![0])?;
        let b = LoadTrace::new(Array3::from_elem((1, 1, 2), 3.0), vec![0])?;
        let p = Provenance::of_all(&[&a, &b], &[0.5, 0.5])?;
        assert_eq!(p.traces.len(), 2);
        Ok(())
    }
}

/// The examples of items below the door, run as unit tests.
#[cfg(test)]
mod door_examples {
    #[test]
    fn provenance_scope_example() {
        let run = || {
            use moeplan::LoadTrace;
            use moeplan::data::{Provenance, Scope, fingerprint};
            use ndarray::Array3;
            let t = LoadTrace::new(Array3::from_elem((4, 1, 2), 1.0), vec![0])?;
            let other = LoadTrace::new(Array3::from_elem((4, 1, 2), 2.0), vec![0])?;
            let p = Provenance::of(&t, 0..3)?;
            assert_eq!(p.scope(&fingerprint(&t), 3..4).kind(), "held-out");
            assert_eq!(p.scope(&fingerprint(&t), 0..4).kind(), "partly-in-sample");
            assert_eq!(p.scope(&fingerprint(&t), 0..2).kind(), "in-sample");
            assert!(matches!(
                p.scope(&fingerprint(&other), 0..4),
                Scope::AnotherTrace { .. }
            ));
            Ok::<(), moeplan::Error>(())
        };
        run().unwrap();
    }
}
