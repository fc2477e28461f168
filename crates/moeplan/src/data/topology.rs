//! The cluster: `nodes` machines with `gpus_per_node` GPUs each. GPUs are
//! numbered node-major (GPU `g` lives on node `g / gpus_per_node`), the order
//! engines use for expert-parallel ranks.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest cluster accepted: far above any deployed expert-parallel group,
/// low enough that per-GPU buffers never become an allocation hazard.
pub(crate) const MAX_GPUS: usize = 1 << 16;

/// A validated cluster shape. Construct with [`Topology::new`]; fields are
/// private so an invalid topology cannot exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawTopology", into = "RawTopology")]
#[cfg_attr(feature = "typescript", derive(tsify::Tsify))]
pub struct Topology {
    nodes: usize,
    gpus_per_node: usize,
}

#[derive(Serialize, Deserialize)]
struct RawTopology {
    nodes: usize,
    gpus_per_node: usize,
}

impl TryFrom<RawTopology> for Topology {
    type Error = Error;
    fn try_from(raw: RawTopology) -> Result<Self> {
        Topology::new(raw.nodes, raw.gpus_per_node)
    }
}

impl From<Topology> for RawTopology {
    fn from(t: Topology) -> Self {
        RawTopology {
            nodes: t.nodes,
            gpus_per_node: t.gpus_per_node,
        }
    }
}

impl Topology {
    /// A cluster of `nodes` × `gpus_per_node` GPUs.
    ///
    /// ```
    /// use moeplan::Topology;
    /// let t = Topology::new(2, 8)?;
    /// assert_eq!(t.num_gpus(), 16);
    /// assert!(Topology::new(0, 8).is_err());
    /// # Ok::<(), moeplan::Error>(())
    /// ```
    pub fn new(nodes: usize, gpus_per_node: usize) -> Result<Self> {
        if nodes == 0 {
            return Err(Error::Topology("at least one node is needed".into()));
        }
        if gpus_per_node == 0 {
            return Err(Error::Topology(
                "at least one GPU per node is needed".into(),
            ));
        }
        match nodes.checked_mul(gpus_per_node) {
            Some(n) if n <= MAX_GPUS => Ok(Topology {
                nodes,
                gpus_per_node,
            }),
            _ => Err(Error::Topology(format!(
                "{nodes} nodes × {gpus_per_node} GPUs is more than the {MAX_GPUS} GPUs supported"
            ))),
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// GPUs in each node.
    pub fn gpus_per_node(&self) -> usize {
        self.gpus_per_node
    }

    /// All GPUs in the cluster.
    pub fn num_gpus(&self) -> usize {
        self.nodes * self.gpus_per_node
    }

    /// The node GPU `gpu` belongs to.
    pub(crate) fn node_of(&self, gpu: usize) -> usize {
        gpu / self.gpus_per_node
    }
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} node(s) × {} GPU(s)", self.nodes, self.gpus_per_node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(nodes: usize, gpus: usize, ok: bool) {
        assert_eq!(Topology::new(nodes, gpus).is_ok(), ok, "{nodes}×{gpus}");
    }

    #[test]
    fn shapes() {
        check(1, 1, true);
        check(8, 8, true);
        check(0, 8, false);
        check(8, 0, false);
        check(usize::MAX, 2, false);
        check(1 << 10, 1 << 7, false);
    }

    #[test]
    fn serde_rejects_invalid() -> Result<(), serde_json::Error> {
        assert!(serde_json::from_str::<Topology>(r#"{"nodes":0,"gpus_per_node":8}"#).is_err());
        let t: Topology = serde_json::from_str(r#"{"nodes":2,"gpus_per_node":4}"#)?;
        assert_eq!(t.num_gpus(), 8);
        Ok(())
    }
}
