//! A compact, self-contained record of a plan: what must survive a reload.
//!
//! The ops of a [`Plan`] follow from its inputs (the tc-relevant part of the
//! network: node capacities, circuit rates and leaf overrides), its
//! [`PlanConfig`] and its [`Allocation`] (queue, classid minor and leaf
//! handles of every node and circuit). A [`PlanRecord`] stores exactly
//! those, one JSON array per node and per circuit (about 80-100 bytes per
//! circuit instead of ~1.4 KB with the ops), and [`PlanRecord::replan`]
//! re-derives the identical plan. The ops can be kept as well
//! ([`PlanRecord::new`] with `with_ops`), for readers that want them.

use serde::{Deserialize, Serialize};

use lqos_model::{Circuit, Network, Node, Rate, SmolStr, SqmOverride};

use crate::error::PlanError;
use crate::plan::{Allocation, CircuitSlot, InterfacePlan, NodeSlot, Plan};
use crate::plan_config::PlanConfig;

/// Format number of [`PlanRecord`] (the full `Plan` JSON of earlier
/// versions had none).
pub const RECORD_FORMAT: u32 = 2;

/// Rates in records: a number of kbit/s when exact, else `"<bps>bit"`.
mod kbit {
    use lqos_model::Rate;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Kbit(u64),
        Bits(String),
    }

    pub fn serialize<S: Serializer>(r: &Rate, s: S) -> Result<S::Ok, S::Error> {
        if r.bps() % 1000 == 0 {
            Repr::Kbit(r.bps() / 1000).serialize(s)
        } else {
            Repr::Bits(format!("{}bit", r.bps())).serialize(s)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        use serde::de::Error;
        match Repr::deserialize(d)? {
            Repr::Kbit(k) => k
                .checked_mul(1000)
                .map(Rate::from_bps)
                .ok_or_else(|| D::Error::custom(format!("rate {k} kbit/s is too large"))),
            Repr::Bits(b) => b
                .strip_suffix("bit")
                .and_then(|n| n.parse().ok())
                .map(Rate::from_bps)
                .ok_or_else(|| D::Error::custom(format!("bad rate {b:?}"))),
        }
    }
}

/// A network node: name, index of its parent in [`PlanInputs::nodes`],
/// download and upload capacity (kbit/s), virtual.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRow(
    pub String,
    pub Option<u32>,
    #[serde(with = "kbit")] pub Rate,
    #[serde(with = "kbit")] pub Rate,
    pub bool,
);

/// A circuit and its slot: id, name, parent node (index into
/// [`PlanInputs::nodes`]), download min, upload min, download max, upload
/// max, sqm override; then the slot: parent slot, queue, minor, download
/// leaf major, upload leaf major.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::type_complexity)]
pub struct CircuitRow(
    pub SmolStr,
    pub SmolStr,
    pub Option<u32>,
    #[serde(with = "kbit")] pub Rate,
    #[serde(with = "kbit")] pub Rate,
    #[serde(with = "kbit")] pub Rate,
    #[serde(with = "kbit")] pub Rate,
    pub Option<SqmOverride>,
    pub u32,
    pub u32,
    pub u16,
    pub Option<u16>,
    pub Option<u16>,
);

/// A planned node slot: name, parent slot, queue, minor, generated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRow(pub String, pub Option<u32>, pub u32, pub u16, pub bool);

/// The tc-relevant inputs of a plan and its allocation, row by row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanInputs {
    /// HTB queues per direction of the allocation.
    pub queues: u32,
    /// Network nodes in preorder (parents first).
    pub nodes: Vec<NodeRow>,
    /// Allocated node slots (real and generated), parents first.
    pub slots: Vec<SlotRow>,
    /// Circuits in input order, each with its slot.
    pub circuits: Vec<CircuitRow>,
    /// Every device address/prefix in input order (the IP map and the
    /// classifier's filters follow from them), with its filter handle.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<PrefixRow>,
}

/// A device address or prefix: circuit index, device index within the
/// circuit, device id, device name, address/prefix, filter handle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixRow(
    pub u32,
    pub u32,
    pub SmolStr,
    pub SmolStr,
    #[serde(serialize_with = "net_str")] pub ipnet::IpNet,
    pub u32,
);

/// An `IpNet` as its `Display` text (what `ipnet`'s own `Serialize` writes
/// to JSON), formatted without `core::fmt` for IPv4.
fn net_str<S: serde::Serializer>(n: &ipnet::IpNet, s: S) -> Result<S::Ok, S::Error> {
    if !s.is_human_readable() {
        return n.serialize(s);
    }
    let mut b = Vec::with_capacity(48);
    crate::text::push_net(&mut b, n);
    // Only ASCII is written.
    s.serialize_str(std::str::from_utf8(&b).unwrap_or_default())
}

/// A plan as stored: config + inputs + allocation, and optionally the ops.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// [`RECORD_FORMAT`].
    pub format: u32,
    /// The config the plan was made with.
    pub config: PlanConfig,
    /// Inputs and allocation; `None` when only the ops are known (a plan
    /// read from an old file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<PlanInputs>,
    /// The allocation, when there are no inputs to carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// The ops (only when asked for, or when there are no inputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<InterfacePlan>>,
    /// The IP map, when there are no inputs to re-derive it from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_map: Option<crate::ipmap::IpMap>,
}

/// Why a record does not give back a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The record's format is not one this version reads.
    #[error("plan record format {found} is not {RECORD_FORMAT}")]
    Format {
        /// The format number found.
        found: u32,
    },
    /// Neither inputs nor ops: nothing to plan from.
    #[error("the plan record has neither inputs nor ops")]
    Empty,
    /// The stored inputs are inconsistent (a node's parent index, ...).
    #[error("the plan record is inconsistent: {0}")]
    Inconsistent(String),
    /// Re-planning the stored inputs failed.
    #[error("re-planning the stored inputs: {0}")]
    Plan(#[from] PlanError),
    /// The circuits of the network and of the allocation differ (the plan
    /// was not made from this network).
    #[error("circuit {index} of the network is {net:?} but the allocation has {slot:?}")]
    Mismatch {
        /// Index of the first differing circuit.
        index: usize,
        /// Circuit id in the network.
        net: String,
        /// Circuit id in the allocation.
        slot: String,
    },
}

/// The row builders behind [`PlanInputs::new`] and [`PlanRecordRef`]
/// (one source for both, so both give the same rows).
struct Rows<'a> {
    net: &'a Network,
    alloc: &'a Allocation,
    /// Nodes in preorder and each node's position in it.
    order: Vec<lqos_model::NodeIdx>,
    index: Vec<u32>,
    /// Filter handle of each prefix.
    handles: hashbrown::HashMap<ipnet::IpNet, u32>,
    /// Number of device prefixes.
    prefix_count: usize,
}

impl<'a> Rows<'a> {
    /// Checks that `alloc` is the allocation of `net`'s plan.
    fn new(net: &'a Network, alloc: &'a Allocation) -> Result<Rows<'a>, RecordError> {
        if net.circuits().len() != alloc.circuits.len() {
            return Err(RecordError::Inconsistent(format!(
                "{} circuits in the network, {} in the allocation",
                net.circuits().len(),
                alloc.circuits.len()
            )));
        }
        for (i, (c, s)) in net.circuits().iter().zip(&alloc.circuits).enumerate() {
            if c.id != s.id {
                return Err(RecordError::Mismatch {
                    index: i,
                    net: c.id.to_string(),
                    slot: s.id.to_string(),
                });
            }
        }
        let order = net.nodes_preorder();
        let mut index = vec![u32::MAX; net.graph().node_count()];
        for (i, &n) in order.iter().enumerate() {
            index[n.index()] = i as u32;
        }
        let handles = alloc.filters.iter().map(|f| (f.net, f.handle)).collect();
        let prefix_count = net
            .circuits()
            .iter()
            .flat_map(|c| &c.devices)
            .map(|d| d.ipv4.len() + d.ipv6.len())
            .sum();
        Ok(Rows {
            net,
            alloc,
            order,
            index,
            handles,
            prefix_count,
        })
    }

    fn nodes(&self) -> impl Iterator<Item = NodeRow> + '_ {
        self.order.iter().map(|&n| {
            let node = self.net.node(n);
            NodeRow(
                node.name.clone(),
                self.net.parent(n).map(|p| self.index[p.index()]),
                node.download,
                node.upload,
                node.virtual_node,
            )
        })
    }

    fn slots(&self) -> impl Iterator<Item = SlotRow> + '_ {
        self.alloc
            .nodes
            .iter()
            .map(|n| SlotRow(n.name.clone(), n.parent, n.queue, n.minor, n.generated))
    }

    fn circuits(&self) -> impl Iterator<Item = CircuitRow> + '_ {
        let net = self.net;
        net.circuits()
            .iter()
            .zip(&self.alloc.circuits)
            .map(move |(c, s)| {
                let parent = c
                    .parent
                    .as_deref()
                    .and_then(|p| net.node_by_name(p))
                    .map(|n| self.index[n.index()]);
                CircuitRow(
                    c.id.clone(),
                    s.name.clone(),
                    parent,
                    c.download_min,
                    c.upload_min,
                    c.download_max,
                    c.upload_max,
                    c.sqm.clone(),
                    s.parent,
                    s.queue,
                    s.minor,
                    s.leaf_download,
                    s.leaf_upload,
                )
            })
    }

    fn prefixes(&self) -> impl Iterator<Item = PrefixRow> + '_ {
        self.net
            .circuits()
            .iter()
            .enumerate()
            .flat_map(move |(ci, c)| {
                c.devices.iter().enumerate().flat_map(move |(di, d)| {
                    let v4 = d.ipv4.iter().map(|n| ipnet::IpNet::V4(*n));
                    v4.chain(d.ipv6.iter().map(|n| ipnet::IpNet::V6(*n)))
                        .map(move |n| {
                            let handle = self.handles.get(&n.trunc()).copied().unwrap_or(0);
                            PrefixRow(
                                ci as u32,
                                di as u32,
                                d.id.clone(),
                                d.name.clone(),
                                n,
                                handle,
                            )
                        })
                })
            })
    }
}

impl PlanInputs {
    /// Rows of `net` and `alloc` (which must be `net`'s plan's allocation).
    pub fn new(net: &Network, alloc: &Allocation) -> Result<PlanInputs, RecordError> {
        let rows = Rows::new(net, alloc)?;
        let mut prefixes = Vec::with_capacity(rows.prefix_count);
        prefixes.extend(rows.prefixes());
        Ok(PlanInputs {
            queues: alloc.queues,
            nodes: rows.nodes().collect(),
            slots: rows.slots().collect(),
            circuits: rows.circuits().collect(),
            prefixes,
        })
    }

    /// The network these rows describe (tc-relevant fields only: no
    /// devices, comments, node ids or types).
    pub fn network(&self) -> Result<Network, RecordError> {
        let mut net = Network::new();
        for (i, NodeRow(name, parent, down, up, virt)) in self.nodes.iter().enumerate() {
            let parent = match parent {
                None => None,
                Some(p) if (*p as usize) < i => Some(self.nodes[*p as usize].0.as_str()),
                Some(p) => {
                    return Err(RecordError::Inconsistent(format!(
                        "node {name:?} has parent index {p}, not before it"
                    )))
                }
            };
            let node = Node {
                name: name.clone(),
                id: None,
                node_type: None,
                download: *down,
                upload: *up,
                virtual_node: *virt,
            };
            net.add_node(parent, node)
                .map_err(|e| RecordError::Inconsistent(e.to_string()))?;
        }
        let mut circuits = Vec::with_capacity(self.circuits.len());
        for r in &self.circuits {
            let parent = match r.2 {
                None => None,
                Some(p) => Some(
                    self.nodes
                        .get(p as usize)
                        .ok_or_else(|| {
                            RecordError::Inconsistent(format!(
                                "circuit {:?} has parent index {p} of {} nodes",
                                r.0,
                                self.nodes.len()
                            ))
                        })?
                        .0
                        .as_str()
                        .into(),
                ),
            };
            circuits.push(Circuit {
                id: r.0.clone(),
                name: r.1.clone(),
                parent,
                download_min: r.3,
                upload_min: r.4,
                download_max: r.5,
                upload_max: r.6,
                comment: SmolStr::default(),
                sqm: r.7.clone(),
                devices: Vec::new(),
            });
        }
        let mut last: Option<(u32, u32)> = None;
        for PrefixRow(ci, di, id, name, n, _) in &self.prefixes {
            let c = circuits.get_mut(*ci as usize).ok_or_else(|| {
                RecordError::Inconsistent(format!("prefix {n} of circuit index {ci}"))
            })?;
            // Rows of one device are consecutive.
            if last != Some((*ci, *di)) || c.devices.is_empty() {
                last = Some((*ci, *di));
                c.devices.push(lqos_model::Device {
                    id: id.clone(),
                    name: name.clone(),
                    mac: SmolStr::default(),
                    ipv4: Vec::new(),
                    ipv6: Vec::new(),
                    line: 0,
                });
            }
            let d = c.devices.last_mut().expect("pushed above");
            match n {
                ipnet::IpNet::V4(v) => d.ipv4.push(*v),
                ipnet::IpNet::V6(v) => d.ipv6.push(*v),
            }
        }
        net.set_circuits(circuits);
        Ok(net)
    }

    /// The allocation these rows describe.
    pub fn allocation(&self) -> Allocation {
        Allocation {
            queues: self.queues,
            nodes: self
                .slots
                .iter()
                .map(|SlotRow(name, parent, queue, minor, generated)| NodeSlot {
                    name: name.clone(),
                    parent: *parent,
                    queue: *queue,
                    minor: *minor,
                    generated: *generated,
                })
                .collect(),
            circuits: self
                .circuits
                .iter()
                .map(|r| CircuitSlot {
                    id: r.0.clone(),
                    name: r.1.clone(),
                    parent: r.8,
                    queue: r.9,
                    minor: r.10,
                    leaf_download: r.11,
                    leaf_upload: r.12,
                })
                .collect(),
            filters: crate::plan::filter_slots(
                self.prefixes
                    .iter()
                    .filter(|r| r.5 != 0)
                    .map(|r| (r.4, r.5)),
            ),
        }
    }
}

/// A sequence serialized from an iterator made on demand.
struct Seq<F>(F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// [`PlanInputs`] of a network, serialized row by row without being built.
struct InputsRef<'a>(Rows<'a>);

impl Serialize for InputsRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let r = &self.0;
        // The fields and order of `PlanInputs`.
        let mut st = s.serialize_struct("PlanInputs", 5)?;
        st.serialize_field("queues", &r.alloc.queues)?;
        st.serialize_field("nodes", &Seq(|| r.nodes()))?;
        st.serialize_field("slots", &Seq(|| r.slots()))?;
        st.serialize_field("circuits", &Seq(|| r.circuits()))?;
        if r.prefix_count > 0 {
            st.serialize_field("prefixes", &Seq(|| r.prefixes()))?;
        } else {
            st.skip_field("prefixes")?;
        }
        st.end()
    }
}

/// A [`PlanRecord`] borrowed from its plan and network: it serializes to
/// exactly the JSON of [`PlanRecord::new`] with the same arguments, making
/// each row only as it is written (no copy of the record is held; `lqos
/// plan` writes plan.json this way).
#[derive(Serialize)]
pub struct PlanRecordRef<'a> {
    format: u32,
    config: &'a PlanConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    inputs: Option<InputsRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allocation: Option<&'a Allocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interfaces: Option<&'a Vec<InterfacePlan>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ip_map: Option<&'a crate::ipmap::IpMap>,
}

impl<'a> PlanRecordRef<'a> {
    /// The record of `plan` made from `net`, as [`PlanRecord::new`] makes
    /// it (same checks, same errors).
    pub fn new(
        plan: &'a Plan,
        net: Option<&'a Network>,
        with_ops: bool,
    ) -> Result<PlanRecordRef<'a>, RecordError> {
        let inputs = net
            .map(|n| Rows::new(n, &plan.allocation))
            .transpose()?
            .map(InputsRef);
        let keep_ops = with_ops || inputs.is_none();
        Ok(PlanRecordRef {
            format: RECORD_FORMAT,
            config: &plan.config,
            allocation: inputs.is_none().then_some(&plan.allocation),
            ip_map: inputs.is_none().then_some(&plan.ip_map),
            inputs,
            interfaces: keep_ops.then_some(&plan.interfaces),
        })
    }
}

impl PlanRecord {
    /// The record of `plan`, made from `net` (`None`: the network is not
    /// known, so the ops are kept whatever `with_ops` says).
    pub fn new(
        plan: &Plan,
        net: Option<&Network>,
        with_ops: bool,
    ) -> Result<PlanRecord, RecordError> {
        let inputs = net
            .map(|n| PlanInputs::new(n, &plan.allocation))
            .transpose()?;
        let keep_ops = with_ops || inputs.is_none();
        Ok(PlanRecord {
            format: RECORD_FORMAT,
            config: plan.config.clone(),
            allocation: inputs.is_none().then(|| plan.allocation.clone()),
            ip_map: inputs.is_none().then(|| plan.ip_map.clone()),
            inputs,
            interfaces: keep_ops.then(|| plan.interfaces.clone()),
        })
    }

    /// A record of an old full-plan file (ops and allocation, no inputs).
    pub fn from_full_plan(plan: Plan) -> PlanRecord {
        PlanRecord {
            format: RECORD_FORMAT,
            config: plan.config,
            inputs: None,
            allocation: Some(plan.allocation),
            interfaces: Some(plan.interfaces),
            ip_map: Some(plan.ip_map),
        }
    }

    /// The allocation, without re-planning (for stable classids).
    pub fn allocation(&self) -> Option<Allocation> {
        match &self.inputs {
            Some(i) => Some(i.allocation()),
            None => self.allocation.clone(),
        }
    }

    /// The plan: the stored ops if there are any (with the allocation from
    /// the inputs), else re-planned from the inputs with the stored
    /// allocation, which gives the same ops as when it was recorded.
    pub fn replan(&self) -> Result<Plan, RecordError> {
        if self.format != RECORD_FORMAT {
            return Err(RecordError::Format { found: self.format });
        }
        match (&self.inputs, &self.interfaces) {
            (Some(inputs), None) => {
                let net = inputs.network()?;
                let alloc = inputs.allocation();
                Ok(crate::plan::plan(&net, &self.config, Some(&alloc))?)
            }
            (_, Some(ifaces)) => {
                // The IP map and the squashed nodes follow from the inputs
                // (none without them).
                let (ip_map, squashed) = match (&self.inputs, &self.ip_map) {
                    (Some(i), _) => {
                        let p =
                            crate::plan::plan(&i.network()?, &self.config, Some(&i.allocation()))?;
                        (p.ip_map, p.squashed)
                    }
                    (None, m) => (m.clone().unwrap_or_default(), Vec::new()),
                };
                Ok(Plan {
                    config: self.config.clone(),
                    interfaces: ifaces.clone(),
                    allocation: self.allocation().unwrap_or_default(),
                    ip_map,
                    squashed,
                })
            }
            (None, None) => Err(RecordError::Empty),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_record_writes_the_same_json() {
        for (circuits, seed) in [(0, 1), (1, 2), (300, 3)] {
            let (net, mut p) = net_and_plan(circuits, seed);
            for round in 0..2 {
                for with_ops in [false, true] {
                    for n in [Some(&net), None] {
                        let owned =
                            serde_json::to_string(&PlanRecord::new(&p, n, with_ops).unwrap())
                                .unwrap();
                        let borrowed =
                            serde_json::to_string(&PlanRecordRef::new(&p, n, with_ops).unwrap())
                                .unwrap();
                        assert_eq!(owned, borrowed, "{circuits} circuits, ops {with_ops}");
                    }
                }
                // Again with sqm overrides and without any device prefix.
                if round == 0 {
                    let mut net2 = net.clone();
                    let mut cs = net2.circuits().to_vec();
                    for c in &mut cs {
                        c.sqm = Some(SqmOverride::new("fq_codel", ""));
                        for d in &mut c.devices {
                            d.ipv4.clear();
                            d.ipv6.clear();
                        }
                    }
                    net2.set_circuits(cs);
                    p = crate::plan::plan(&net2, &p.config, None).unwrap();
                    let a =
                        serde_json::to_string(&PlanRecord::new(&p, Some(&net2), false).unwrap());
                    let b =
                        serde_json::to_string(&PlanRecordRef::new(&p, Some(&net2), false).unwrap());
                    assert_eq!(a.unwrap(), b.unwrap());
                }
            }
        }
        // The same errors for a network that is not the plan's.
        let (net, _) = net_and_plan(5, 1);
        let (_, other) = net_and_plan(6, 1);
        assert_eq!(
            PlanRecord::new(&other, Some(&net), false).unwrap_err(),
            PlanRecordRef::new(&other, Some(&net), false).err().unwrap()
        );
    }

    fn net_and_plan(circuits: usize, seed: u64) -> (Network, Plan) {
        let g = lqos_model::generate(&{
            let mut p = lqos_model::GenParams::with_circuits(circuits);
            p.seed = seed;
            p
        });
        let cfg = PlanConfig::bridge("ens19", "ens20", 4);
        let p = crate::plan::plan(&g.network, &cfg, None).unwrap();
        (g.network, p)
    }

    #[test]
    fn record_replans_to_the_same_plan() {
        for seed in 1..4 {
            let (net, p) = net_and_plan(400, seed);
            let rec = PlanRecord::new(&p, Some(&net), false).unwrap();
            assert!(rec.interfaces.is_none());
            let json = serde_json::to_string(&rec).unwrap();
            let back: PlanRecord = serde_json::from_str(&json).unwrap();
            assert_eq!(back, rec);
            assert_eq!(back.replan().unwrap(), p);
            assert_eq!(back.allocation().unwrap(), p.allocation);
        }
    }

    #[test]
    fn record_is_compact() {
        let (net, p) = net_and_plan(2000, 1);
        let rec = PlanRecord::new(&p, Some(&net), false).unwrap();
        let bytes = serde_json::to_vec(&rec).unwrap().len();
        // About 100 bytes per circuit, plus one row per device address
        // (the IP map and the classifier's filters follow from them).
        let prefixes = rec.inputs.as_ref().unwrap().prefixes.len();
        let budget = 100 * 2000 + 60 * prefixes;
        assert!(
            bytes <= budget,
            "{bytes} bytes for 2000 circuits and {prefixes} prefixes"
        );
        let with_ops = PlanRecord::new(&p, Some(&net), true).unwrap();
        assert_eq!(with_ops.replan().unwrap(), p);
    }

    #[test]
    fn inexact_kbit_rates_round_trip() {
        let (mut net, _) = net_and_plan(20, 1);
        let mut cs = net.circuits().to_vec();
        cs[0].download_max = Rate::from_bps(100_000_123);
        net.set_circuits(cs);
        let p = crate::plan::plan(&net, &PlanConfig::bridge("ens19", "ens20", 4), None).unwrap();
        let rec = PlanRecord::new(&p, Some(&net), false).unwrap();
        let json = serde_json::to_string(&rec).unwrap();
        assert!(json.contains("\"100000123bit\""), "{json}");
        let back: PlanRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.replan().unwrap(), p);
    }

    #[test]
    fn record_without_network_keeps_ops() {
        let (_, p) = net_and_plan(50, 1);
        let rec = PlanRecord::new(&p, None, false).unwrap();
        assert!(rec.interfaces.is_some());
        assert_eq!(rec.replan().unwrap(), p);
        let mut bad = rec.clone();
        bad.format = 7;
        assert_eq!(bad.replan(), Err(RecordError::Format { found: 7 }));
    }
}
