//! LibreQoS's allocation as its state directory records it.
//!
//! A LibreQoS box (HEAD) writes, after every full reload,
//! `STATE/shaping/queuingStructure.json` and `STATE/stats/statsByCircuit.json`:
//!
//! - `queuingStructure.json`: `{"Network": {NAME: NODE, ...},
//!   "generatedPNs": [NAME, ...], ...}`. Every NODE (the network.json node,
//!   generated parent nodes included, after LibreQoS's flattening) carries
//!   `classid` and `up_classid` (`"0x1:0x6"`: HTB major = 1-based queue,
//!   minor), `cpuNum` (0-based queue, hex), optional `children` (more
//!   NODEs) and `circuits` (`[{"circuitID", "classid", "up_classid", ...}]`).
//! - `statsByCircuit.json`: `[{"circuitID", "circuitName", "ParentNode",
//!   "classid", "up_classid", "devices": [{"ipv4s": [..], "ipv6s": [..]}]},
//!   ...]`, every circuit LibreQoS read; `classid` is empty for one that
//!   did not attach to the tree.
//!
//! Download and upload share the minor; the upload major is the download
//! major on a bridge and `major + queues` on a stick.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::handle::TcHandle;

/// Why LibreQoS's state files cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Not JSON.
    #[error("{file}: not JSON: {message}")]
    Json {
        /// The file.
        file: String,
        /// serde_json's words.
        message: String,
    },
    /// JSON, but not the shape LibreQoS writes.
    #[error("{file}: {what}")]
    Shape {
        /// The file.
        file: String,
        /// What is wrong, naming the node or circuit.
        what: String,
    },
}

/// A node (site, AP, generated parent node) of LibreQoS's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateNode {
    /// Its name (the network.json key).
    pub name: String,
    /// Index of its parent in [`LibreQosState::nodes`] (`None`: top level).
    pub parent: Option<usize>,
    /// Download class.
    pub classid: TcHandle,
    /// Upload class.
    pub up_classid: TcHandle,
    /// A generated parent node (`generatedPNs`).
    pub generated: bool,
}

/// A circuit of LibreQoS's tree.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateCircuit {
    /// Circuit ID.
    pub id: String,
    /// The node it hangs under (LibreQoS's effective parent: a generated
    /// parent node for a circuit without one).
    pub parent: String,
    /// Download class.
    pub classid: TcHandle,
    /// Upload class.
    pub up_classid: TcHandle,
}

/// LibreQoS's allocation: every node's and attached circuit's classids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LibreQosState {
    /// Nodes, parents before children.
    pub nodes: Vec<StateNode>,
    /// Circuits with a classid, in statsByCircuit.json's order.
    pub circuits: Vec<StateCircuit>,
    /// Circuit IDs statsByCircuit.json lists without a classid (LibreQoS
    /// could not attach them).
    pub unattached: Vec<String>,
    /// HTB queues per direction (the number of generated parent nodes,
    /// one per queue; else the highest download major).
    pub queues: u32,
}

/// LibreQoS's classid text: `0x1:0x6`, `1:6`, `0x1:` (hex, `0x` optional).
pub fn parse_classid(s: &str) -> Option<TcHandle> {
    let (maj, min) = s.trim().split_once(':')?;
    let hex = |p: &str| -> Option<u16> {
        let p = p.strip_prefix("0x").or(p.strip_prefix("0X")).unwrap_or(p);
        if p.is_empty() {
            return Some(0);
        }
        u16::from_str_radix(p, 16).ok()
    };
    let major = hex(maj)?;
    (major != 0).then_some(())?;
    Some(TcHandle::new(major, hex(min)?))
}

impl LibreQosState {
    /// Reads the two files' contents; `qs_file` and `stats_file` name them
    /// in errors.
    pub fn parse(
        (qs_file, queuing_structure): (&str, &str),
        (stats_file, stats_by_circuit): (&str, &str),
    ) -> Result<LibreQosState, StateError> {
        let json = |file: &str, text: &str| -> Result<Value, StateError> {
            serde_json::from_str(text).map_err(|e| StateError::Json {
                file: file.to_string(),
                message: e.to_string(),
            })
        };
        let shape = |file: &str, what: String| StateError::Shape {
            file: file.to_string(),
            what,
        };
        let qs = json(qs_file, queuing_structure)?;
        let network = qs
            .get("Network")
            .and_then(Value::as_object)
            .ok_or_else(|| shape(qs_file, "no \"Network\" object".into()))?;
        let generated: Vec<&str> = qs
            .get("generatedPNs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut st = LibreQosState::default();
        let mut stack: Vec<(Option<usize>, &serde_json::Map<String, Value>)> =
            vec![(None, network)];
        while let Some((parent, level)) = stack.pop() {
            for (name, node) in level {
                let Some(obj) = node.as_object() else {
                    continue;
                };
                let class = |key: &str| {
                    obj.get(key)
                        .and_then(Value::as_str)
                        .and_then(parse_classid)
                        .ok_or_else(|| {
                            shape(
                                qs_file,
                                format!("node {name:?}: no valid {key:?} (is it the state of a full reload?)"),
                            )
                        })
                };
                st.nodes.push(StateNode {
                    name: name.clone(),
                    parent,
                    classid: class("classid")?,
                    up_classid: class("up_classid")?,
                    generated: generated.contains(&name.as_str()),
                });
                let me = st.nodes.len() - 1;
                if let Some(children) = obj.get("children").and_then(Value::as_object) {
                    stack.push((Some(me), children));
                }
            }
        }
        // Parents before children, whatever the stack order did.
        st.nodes = order_parents_first(std::mem::take(&mut st.nodes));

        let stats = json(stats_file, stats_by_circuit)?;
        let list = stats
            .as_array()
            .ok_or_else(|| shape(stats_file, "not a list of circuits".into()))?;
        let names: HashMap<&str, ()> = st.nodes.iter().map(|n| (n.name.as_str(), ())).collect();
        let text = |v: &Value, key: &str| -> String {
            match v.get(key) {
                Some(Value::String(s)) => s.trim().to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            }
        };
        for c in list {
            let id = text(c, "circuitID");
            if id.is_empty() {
                return Err(shape(stats_file, "a circuit without \"circuitID\"".into()));
            }
            let (down, up) = (text(c, "classid"), text(c, "up_classid"));
            if down.is_empty() {
                st.unattached.push(id);
                continue;
            }
            let parse = |s: &str, key: &str| {
                parse_classid(s).ok_or_else(|| {
                    shape(
                        stats_file,
                        format!("circuit {id:?}: {key} {s:?} is not a classid"),
                    )
                })
            };
            let parent = text(c, "ParentNode");
            if !names.contains_key(parent.as_str()) {
                return Err(shape(
                    stats_file,
                    format!("circuit {id:?}: parent node {parent:?} is not in {qs_file}"),
                ));
            }
            st.circuits.push(StateCircuit {
                classid: parse(&down, "classid")?,
                up_classid: parse(if up.is_empty() { &down } else { &up }, "up_classid")?,
                id,
                parent,
            });
        }
        let max_major = st
            .nodes
            .iter()
            .map(|n| n.classid.major())
            .max()
            .unwrap_or(0);
        st.queues = if generated.is_empty() {
            u32::from(max_major)
        } else {
            generated.len() as u32
        };
        Ok(st)
    }

    /// Node index by name.
    pub fn node_index(&self) -> HashMap<&str, usize> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect()
    }

    /// The upload majors' offset: 0 on a bridge, the queue count on a
    /// stick (upload majors follow the download ones).
    pub fn up_offset(&self) -> u16 {
        self.nodes
            .first()
            .map(|n| n.up_classid.major().wrapping_sub(n.classid.major()))
            .unwrap_or(0)
    }

    /// Every classid (download, upload) -> what it is: `node NAME` or
    /// `circuit ID`.
    pub fn labels(&self) -> BTreeMap<TcHandle, String> {
        let mut m = BTreeMap::new();
        for n in &self.nodes {
            m.insert(n.classid, format!("node {}", n.name));
            m.insert(n.up_classid, format!("node {}", n.name));
        }
        for c in &self.circuits {
            m.insert(c.classid, format!("circuit {}", c.id));
            m.insert(c.up_classid, format!("circuit {}", c.id));
        }
        m
    }
}

/// Reorders `nodes` so every parent comes before its children (indices
/// rewritten).
fn order_parents_first(nodes: Vec<StateNode>) -> Vec<StateNode> {
    let mut kids: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match n.parent {
            Some(p) => kids[p].push(i),
            None => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(nodes.len());
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(kids[i].iter().rev());
    }
    let mut new_index = vec![0usize; nodes.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    order
        .into_iter()
        .map(|old| {
            let mut n = nodes[old].clone();
            n.parent = n.parent.map(|p| new_index[p]);
            n
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape LibreQoS 455bc13b's `refreshShapers` writes (trimmed).
    const QS: &str = r#"{"Network": {
        "Generated_PN_1": {"downloadBandwidthMbps": 1000, "classid": "0x1:0x3", "up_classid": "0x1:0x3", "cpuNum": "0x0"},
        "Site_1": {"downloadBandwidthMbps": 1000, "children": {
            "AP_A": {"classid": "0x2:0x5", "up_classid": "0x2:0x5", "cpuNum": "0x1",
                     "circuits": [{"circuitID": "7", "classid": "0x2:0xc"}]}},
            "classid": "0x2:0x3", "up_classid": "0x2:0x3", "cpuNum": "0x1"}},
      "generatedPNs": ["Generated_PN_1", "Generated_PN_2"]}"#;
    const STATS: &str = r#"[
        {"circuitID": "7", "ParentNode": "AP_A", "classid": "0x2:0xc", "up_classid": "0x2:0xc"},
        {"circuitID": "8", "ParentNode": "Generated_PN_1", "classid": "0x1:0x4", "up_classid": "0x1:0x4"},
        {"circuitID": "9", "ParentNode": "AP_Z", "classid": ""}]"#;

    #[test]
    fn reads_nodes_circuits_and_queue_count() {
        let st = LibreQosState::parse(("qs.json", QS), ("stats.json", STATS)).unwrap();
        let names: Vec<&str> = st.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["Generated_PN_1", "Site_1", "AP_A"]);
        assert_eq!(st.nodes[2].parent, Some(1));
        assert_eq!(st.nodes[2].classid, TcHandle::new(2, 5));
        assert!(st.nodes[0].generated && !st.nodes[1].generated);
        assert_eq!(st.circuits.len(), 2);
        assert_eq!(st.circuits[1].parent, "Generated_PN_1");
        assert_eq!(st.unattached, ["9"]);
        assert_eq!(st.queues, 2);
        assert_eq!(st.up_offset(), 0);
    }

    #[test]
    fn errors_name_the_file_and_the_node() {
        let bad = QS.replace("\"0x2:0x5\", \"up", "\"x\", \"up");
        let e = LibreQosState::parse(("qs.json", &bad), ("stats.json", STATS)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "qs.json: node \"AP_A\": no valid \"classid\" (is it the state of a full reload?)"
        );
        let e = LibreQosState::parse(("qs.json", QS), ("stats.json", "{}")).unwrap_err();
        assert_eq!(e.to_string(), "stats.json: not a list of circuits");
    }

    #[test]
    fn classid_text() {
        assert_eq!(parse_classid("0x1:0x6"), Some(TcHandle::new(1, 6)));
        assert_eq!(parse_classid("1a:f"), Some(TcHandle::new(0x1a, 0xf)));
        assert_eq!(parse_classid("0x3:"), Some(TcHandle::new(3, 0)));
        assert_eq!(parse_classid("0x62"), None);
        assert_eq!(parse_classid("0:5"), None);
    }
}
