//! TensorRT-LLM's load-balancer placement YAML: written from a plan
//! ([`write_placement`]) and read back ([`read_placement`]) by a streaming
//! deserializer that charges the meter for every slot before it is kept.

use super::*;

/// Writes TensorRT-LLM's load-balancer YAML for `plan`: `num_slots`, every
/// MoE layer's slots keyed by the plan's layer ids, rank-major, and
/// `layer_updates_per_iter: 0` (a static placement; the online balancer
/// would move it). Needs the same slot count on every GPU in every layer
/// (TensorRT-LLM has one `num_slots`, split evenly over the EP ranks):
/// [`Plan::padded_to_uniform`] makes one that fits.
///
/// TensorRT-LLM looks every layer up by its decoder layer index
/// (`WideEPMoE`'s `layer_idx`: DeepSeek-V3's MoE layers are 3..60), so the
/// keys must be model layer ids. `model_layers` is the model's layer count
/// when the trace knew it ([`crate::LoadTrace::known_model_layers`]); when
/// it is `None` and the plan's ids are exactly `0..L` they may be positions
/// among the MoE layers (a `.npy` of MoE rows): such a file would serve
/// layers 3..57 the placements planned for 6..60 and stop the engine at
/// layer 58, so it is refused with how to name the model. Ids that do not
/// start at 0 were named by their source (TensorRT-LLM's own statistics).
///
/// The lists are written inline, one line per layer, as TensorRT-LLM's own
/// generator does; the text holds only integers, so it is written directly.
///
/// ```
/// use moeplan::{LayerPlacement, Plan, Topology, formats};
/// // MoE layer 3 on two GPUs: experts 0 and 1 on GPU 0, 2 and 0 on GPU 1
/// let layer = LayerPlacement {
///     layer: 3,
///     gpus: vec![vec![0, 1], vec![2, 0]],
/// };
/// let plan = Plan::new(Topology::new(1, 2)?, 3, vec![layer], "by-hand")?;
/// let yaml = formats::write_placement(&plan, None)?;
/// assert!(yaml.contains("\n  3: [0, 1, 2, 0]\n"), "{yaml}");
/// assert!(yaml.contains("num_slots: 4\n"));
/// // MoE layer 0 of a trace that does not know its model: which layer is it?
/// let layer = LayerPlacement {
///     layer: 0,
///     gpus: vec![vec![0, 1], vec![2, 0]],
/// };
/// let plan = Plan::new(Topology::new(1, 2)?, 3, vec![layer], "by-hand")?;
/// assert!(formats::write_placement(&plan, None).is_err());
/// assert!(formats::write_placement(&plan, Some(1)).is_ok());
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn write_placement(plan: &Plan, model_layers: Option<usize>) -> Result<String> {
    use std::fmt::Write;
    crate::formats::check_plan_model_layers(crate::formats::ModelKeyed::Keys, plan, model_layers)?;
    let last = plan.layers().last().map_or(0, |l| l.layer as usize);
    if let Some(n) = model_layers.filter(|&n| n <= last) {
        return Err(Error::Export {
            format: PLACEMENT,
            message: format!("the plan has MoE layer {last} but the model only {n} layers"),
        });
    }
    let per_gpu = plan.uniform_slots_per_gpu().ok_or_else(|| Error::Export {
        format: PLACEMENT,
        message: "slot counts differ between GPUs or layers; TensorRT-LLM splits one num_slots \
                  evenly over its EP ranks (pad the plan to write it)"
            .into(),
    })?;
    let slots = per_gpu * plan.topology().num_gpus();
    let mut out = String::with_capacity(32 + plan.layers().len() * (slots * 5 + 8));
    out.push_str(
        "# moeplan plan for TensorRT-LLM's MoE load balancer (moe_config.load_balancer)\n\
         initial_global_assignments:\n",
    );
    for (lp, row) in plan.layers().iter().zip(plan.physical_to_logical()) {
        let _ = write!(out, "  {}: [", lp.layer);
        for (i, x) in row.iter().enumerate() {
            let _ = write!(out, "{}{x}", if i == 0 { "" } else { ", " });
        }
        out.push_str("]\n");
    }
    let _ = write!(out, "layer_updates_per_iter: 0\nnum_slots: {slots}\n");
    Ok(out)
}

/// Whether `bytes` hold a TensorRT-LLM load-balancer placement: a top-level
/// `initial_global_assignments:` or `num_slots:` line (block YAML, as
/// TensorRT-LLM writes it).
pub(crate) fn is_placement(bytes: &[u8]) -> bool {
    bytes.split(|&b| b == b'\n').any(|line| {
        line.starts_with(b"initial_global_assignments:") || line.starts_with(b"num_slots:")
    })
}

/// The placement as read, before it meets a topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Slots in all, over every rank.
    pub num_slots: usize,
    /// The EP size, when the file says it (the co-occurrence generator
    /// writes `ep_size`; the engine's own file does not).
    pub ep_size: Option<usize>,
    /// Layer updates per iteration (0: static).
    pub layer_updates_per_iter: u64,
    /// Layer id → the expert of every slot, rank-major.
    pub assignments: BTreeMap<u32, Vec<u32>>,
}

/// Parses a load-balancer YAML into a [`Placement`] (no topology needed).
/// The file's numbers are charged to `meter` before parsing, and the parse
/// stops once it builds more than the text holds (YAML aliases can repeat
/// a list many times over).
pub(crate) fn read_placement_yaml(bytes: &[u8], meter: &mut crate::Meter) -> Result<Placement> {
    // Flow nesting is charged before the parser runs (first: the scan stops
    // at the first level too deep): libyaml's time grows with tokens ×
    // depth (a 400 KB file of nested `[` took 74 s).
    let depth = crate::data::limits::yaml_flow_depth(bytes, meter.budget().max_depth);
    meter.depth(depth, "the placement YAML's [ ] and { } nesting")?;
    // Every number of the text is a run of digits: an upper bound on what a
    // parse without aliases builds.
    let numbers = bytes
        .iter()
        .zip(bytes.iter().skip(1).chain(std::iter::once(&b' ')))
        .filter(|(a, b)| a.is_ascii_digit() && !b.is_ascii_digit())
        .count() as u64;
    meter.values(numbers, 8, "the placement YAML")?;
    let left = Cell::new(numbers);
    let doc = DocSeed { left: &left }
        .deserialize(serde_yaml_ng::Deserializer::from_slice(bytes))
        .map_err(|e| Error::parse(PLACEMENT, e.to_string()))?;
    let num_slots = doc
        .num_slots
        .ok_or_else(|| Error::parse(PLACEMENT, "no num_slots"))?;
    let assignments = doc
        .assignments
        .ok_or_else(|| Error::parse(PLACEMENT, "no initial_global_assignments"))?;
    if assignments.is_empty() {
        return Err(Error::parse(
            PLACEMENT,
            "initial_global_assignments is empty",
        ));
    }
    if let Some((layer, row)) = assignments.iter().find(|(_, r)| r.len() != num_slots) {
        return Err(Error::parse(
            PLACEMENT,
            format!(
                "layer {layer} lists {} slots, num_slots is {num_slots}",
                row.len()
            ),
        ));
    }
    Ok(Placement {
        num_slots,
        ep_size: doc.ep_size,
        layer_updates_per_iter: doc.layer_updates_per_iter.unwrap_or(0),
        assignments,
    })
}

/// Reads a load-balancer YAML back into a plan for the MoE layers
/// `layer_ids` (every one must be in the file, and no other) of
/// `num_experts` experts, its slots split over `topology`'s GPUs — or, when
/// none is given and the file says its `ep_size`, over that many GPUs on
/// one node (the second value says the topology was assumed).
///
/// ```
/// use moeplan::formats::{read_placement, write_placement};
/// use moeplan::{LoadTrace, Topology, planners::base};
/// use ndarray::Array3;
/// let trace = LoadTrace::new(Array3::from_elem((1, 2, 4), 1.0), vec![3, 5])?;
/// let t = Topology::new(1, 2)?;
/// let plan = base(&trace, t, 1)?;
/// let yaml = write_placement(&plan, None)?;
/// let mut meter = moeplan::Meter::new(moeplan::ReadLimits::default());
/// let (read, assumed) = read_placement(yaml.as_bytes(), Some(t), &[3, 5], 4, &mut meter)?;
/// assert_eq!((read.layers(), assumed), (plan.layers(), false));
/// # Ok::<(), moeplan::Error>(())
/// ```
pub fn read_placement(
    bytes: &[u8],
    topology: Option<Topology>,
    layer_ids: &[u32],
    num_experts: usize,
    meter: &mut crate::Meter,
) -> Result<(Plan, bool)> {
    let p = read_placement_yaml(bytes, meter)?;
    let (topology, assumed) = match (topology, p.ep_size) {
        (Some(t), Some(ep)) if ep != t.num_gpus() => {
            return Err(Error::Mismatch(format!(
                "the {PLACEMENT} says ep_size {ep}, the cluster given has {} GPUs",
                t.num_gpus()
            )));
        }
        (Some(t), _) => (t, false),
        (None, Some(ep)) => (Topology::new(1, ep)?, true),
        (None, None) => {
            return Err(Error::Argument(format!(
                "the {PLACEMENT} lists slots but not which GPU holds them: give the cluster \
                 (--gpus-per-node, and --nodes for more than one node)"
            )));
        }
    };
    let d = topology.num_gpus();
    if p.num_slots % d != 0 {
        return Err(Error::parse(
            PLACEMENT,
            format!(
                "num_slots {} does not split evenly over {d} GPUs",
                p.num_slots
            ),
        ));
    }
    let in_file: Vec<u32> = p.assignments.keys().copied().collect();
    if in_file != layer_ids {
        return Err(Error::Mismatch(format!(
            "the {PLACEMENT} places layers {}, the trace has MoE layers {}",
            span(&in_file),
            span(layer_ids)
        )));
    }
    let rows: Vec<Vec<u32>> = p.assignments.into_values().collect();
    let plan =
        crate::formats::vllm::plan_from_rows(&rows, topology, layer_ids, num_experts, PLACEMENT)?;
    Ok((plan, assumed))
}

/// A list of layer ids in few words: `3..60 (58)` when consecutive.
fn span(ids: &[u32]) -> String {
    match (ids.first(), ids.last()) {
        (Some(a), Some(b)) if (b - a) as usize + 1 == ids.len() => {
            format!("{a}..{b} ({} layers)", ids.len())
        }
        _ if ids.len() <= 8 => format!("{ids:?}"),
        _ => format!("{:?}… ({} layers)", &ids[..8], ids.len()),
    }
}

/// The parsed document.
struct Doc {
    num_slots: Option<usize>,
    ep_size: Option<usize>,
    layer_updates_per_iter: Option<u64>,
    assignments: Option<BTreeMap<u32, Vec<u32>>>,
}

#[derive(serde::Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Field {
    NumSlots,
    EpSize,
    LayerUpdatesPerIter,
    InitialGlobalAssignments,
    #[serde(other)]
    Other,
}

/// A layer key: an integer, or (in JSON, which is YAML too) its string.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum LayerKey {
    Number(u32),
    Text(String),
}

/// Seeds that count every number they build against `left`.
struct DocSeed<'c> {
    left: &'c Cell<u64>,
}
struct AssignmentsSeed<'c> {
    left: &'c Cell<u64>,
}
struct SlotsSeed<'c> {
    left: &'c Cell<u64>,
}

fn take<E: de::Error>(left: &Cell<u64>, n: u64) -> std::result::Result<(), E> {
    match left.get().checked_sub(n) {
        Some(rest) => {
            left.set(rest);
            Ok(())
        }
        None => Err(E::custom(
            "builds more numbers than the text holds (YAML aliases repeat lists): refused",
        )),
    }
}

impl<'de> DeserializeSeed<'de> for DocSeed<'_> {
    type Value = Doc;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Doc, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocSeed<'_> {
    type Value = Doc;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a mapping with num_slots and initial_global_assignments")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Doc, A::Error> {
        let mut doc = Doc {
            num_slots: None,
            ep_size: None,
            layer_updates_per_iter: None,
            assignments: None,
        };
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::NumSlots => doc.num_slots = Some(map.next_value()?),
                Field::EpSize => doc.ep_size = Some(map.next_value()?),
                Field::LayerUpdatesPerIter => doc.layer_updates_per_iter = Some(map.next_value()?),
                Field::InitialGlobalAssignments => {
                    doc.assignments =
                        Some(map.next_value_seed(AssignmentsSeed { left: self.left })?);
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(doc)
    }
}

impl<'de> DeserializeSeed<'de> for AssignmentsSeed<'_> {
    type Value = BTreeMap<u32, Vec<u32>>;
    fn deserialize<D: de::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AssignmentsSeed<'_> {
    type Value = BTreeMap<u32, Vec<u32>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a mapping from layer index to the expert of every slot")
    }
    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<LayerKey>()? {
            take::<A::Error>(self.left, 1)?;
            let layer = match key {
                LayerKey::Number(n) => n,
                LayerKey::Text(s) => s.trim().parse().map_err(|_| {
                    de::Error::custom(format!("layer key {s:?} is not a whole number"))
                })?,
            };
            if layer as usize >= crate::data::trace::MAX_LAYERS {
                return Err(de::Error::custom(format!("layer {layer} is out of range")));
            }
            let row = map.next_value_seed(SlotsSeed { left: self.left })?;
            if out.insert(layer, row).is_some() {
                return Err(de::Error::custom(format!("layer {layer} is listed twice")));
            }
        }
        Ok(out)
    }
}

impl<'de> DeserializeSeed<'de> for SlotsSeed<'_> {
    type Value = Vec<u32>;
    fn deserialize<D: de::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Vec<u32>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for SlotsSeed<'_> {
    type Value = Vec<u32>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of expert ids, one per slot")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Vec<u32>, A::Error> {
        let mut row = Vec::new();
        while let Some(x) = seq.next_element::<u32>()? {
            take::<A::Error>(self.left, 1)?;
            row.push(x);
        }
        Ok(row)
    }
}
