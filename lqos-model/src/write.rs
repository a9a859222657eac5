//! Writers for the files a LibreQoS user has: `network.json`,
//! `ShapedDevices.csv` (current 16-column format) and `lqos.conf`.
//!
//! What they write re-reads equal through the parsers of this crate.

use std::fmt::Write as _;

use crate::config::LqosConfig;
use crate::network::{Network, NodeIdx};
use crate::shaped_devices::CURRENT_HEADER;

/// `network` as `network.json` (nodes in order, rates as exact decimal
/// Mbps, tab-indented like LibreQoS's examples). A flat network is `{}`.
///
/// ```
/// use lqos_model::{generate, GenParams};
/// use lqos_model::network_json::parse_network_json;
/// use lqos_model::write::write_network_json;
/// let g = generate(&GenParams::with_circuits(0));
/// let text = write_network_json(&g.network);
/// let back = parse_network_json("network.json", &text).unwrap();
/// assert_eq!(back.node_count(), g.network.node_count());
/// ```
pub fn write_network_json(network: &Network) -> String {
    let mut out = String::with_capacity(network.node_count() * 160 + 4);
    write_nodes(network, network.roots(), 0, &mut out);
    out.push('\n');
    out
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn write_nodes(net: &Network, nodes: &[NodeIdx], indent: usize, out: &mut String) {
    if nodes.is_empty() {
        out.push_str("{}");
        return;
    }
    let pad = "\t".repeat(indent + 1);
    out.push_str("{\n");
    for (i, &idx) in nodes.iter().enumerate() {
        let n = net.node(idx);
        let _ = writeln!(out, "{pad}{}: {{", json_str(&n.name));
        let fpad = format!("{pad}\t");
        let _ = write!(
            out,
            "{fpad}\"downloadBandwidthMbps\": {},\n{fpad}\"uploadBandwidthMbps\": {}",
            n.download, n.upload
        );
        if let Some(t) = &n.node_type {
            let _ = write!(out, ",\n{fpad}\"type\": {}", json_str(t));
        }
        if let Some(id) = &n.id {
            let _ = write!(out, ",\n{fpad}\"id\": {}", json_str(id));
        }
        if n.virtual_node {
            let _ = write!(out, ",\n{fpad}\"virtual\": true");
        }
        let children = net.children(idx);
        if !children.is_empty() {
            let _ = write!(out, ",\n{fpad}\"children\": ");
            write_nodes(net, children, indent + 2, out);
        }
        let _ = write!(out, "\n{pad}}}");
        out.push_str(if i + 1 < nodes.len() { ",\n" } else { "\n" });
    }
    out.push_str(&"\t".repeat(indent));
    out.push('}');
}

/// The circuits of `network` as `ShapedDevices.csv`: the current 16-column
/// header, one row per device (single addresses written bare, ranges as
/// CIDR, lists joined by `", "`), fields quoted by the csv crate (every
/// non-numeric field is quoted, as LibreQoS writes it, so no row can start
/// with `#`). A circuit without devices is written as one row with empty
/// device fields.
pub fn write_shaped_devices(network: &Network) -> String {
    let mut w = csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::NonNumeric)
        .from_writer(Vec::with_capacity(network.circuits().len() * 200));
    let _ = w.write_record(CURRENT_HEADER);
    for c in network.circuits() {
        let sqm = match &c.sqm {
            None => String::new(),
            Some(s) if s.download == s.upload => s.download.clone(),
            Some(s) => format!("{}/{}", s.download, s.upload),
        };
        let rates = [
            c.download_min.to_string(),
            c.upload_min.to_string(),
            c.download_max.to_string(),
            c.upload_max.to_string(),
        ];
        let parent = c.parent.as_deref().unwrap_or("");
        let mut row = |dev_id: &str, dev_name: &str, mac: &str, v4: &str, v6: &str| {
            let _ = w.write_record([
                c.id.as_str(),
                c.name.as_str(),
                dev_id,
                dev_name,
                parent,
                "",
                "",
                mac,
                v4,
                v6,
                &rates[0],
                &rates[1],
                &rates[2],
                &rates[3],
                c.comment.as_str(),
                &sqm,
            ]);
        };
        if c.devices.is_empty() {
            row("", "", "", "", "");
        }
        for d in &c.devices {
            let v4 = join(d.ipv4.iter().map(|n| {
                if n.prefix_len() == 32 {
                    n.addr().to_string()
                } else {
                    n.to_string()
                }
            }));
            let v6 = join(d.ipv6.iter().map(|n| {
                if n.prefix_len() == 128 {
                    n.addr().to_string()
                } else {
                    n.to_string()
                }
            }));
            row(&d.id, &d.name, &d.mac, &v4, &v6);
        }
    }
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

fn join<T: std::fmt::Display>(items: impl Iterator<Item = T>) -> String {
    let mut s = String::new();
    for (i, x) in items.enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{x}");
    }
    s
}

/// `config` as `lqos.conf` TOML (only the sections lqos uses).
pub fn write_config(config: &LqosConfig) -> String {
    let body = toml::to_string(config).unwrap_or_default();
    format!(
        "# lqos.conf written by lqos (the subset lqos uses; LibreQoS keys may be added)\n{body}"
    )
}
