//! The IP map: every device address or prefix of a plan -> its circuit and
//! where its traffic is shaped (interface, TX queue, classid) in each
//! direction. It is what an external classifier (LibreQoS's XDP program)
//! needs, what [`Plan::explain_ip`](crate::Plan::explain_ip) answers from,
//! and what the `tc` classifier's
//! filters are built from.
//!
//! ```
//! use lqos_model::{Circuit, Device, Network, Rate};
//! use lqos_tc::{plan, PlanConfig};
//! let mut net = Network::new();
//! net.add_circuit(Circuit { id: "c1".into(), name: "Ann".into(), parent: None,
//!     download_min: Rate::from_mbps(2), upload_min: Rate::from_mbps(1),
//!     download_max: Rate::from_mbps(50), upload_max: Rate::from_mbps(10),
//!     comment: Default::default(), sqm: None,
//!     devices: vec![Device { id: "d1".into(), name: "cpe".into(), mac: Default::default(),
//!         ipv4: vec!["100.64.1.0/24".parse().unwrap(), "100.64.1.7/32".parse().unwrap()],
//!         ipv6: vec![], line: 0 }] });
//! let p = plan(&net, &PlanConfig::bridge("ens19", "ens20", 4), None).unwrap();
//! let hit = p.ip_map.lookup("100.64.1.7".parse().unwrap()).unwrap();
//! assert_eq!((hit.circuit_id.as_str(), hit.net.prefix_len()), ("c1", 32)); // longest prefix
//! assert_eq!(hit.download.dev, "ens19");
//! assert_eq!(hit.download.classid.major(), hit.download.queue as u16 + 1); // HTB of the queue
//! assert!(p.ip_map.lookup("100.64.2.1".parse().unwrap()).is_none());
//! ```

use core::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::handle::TcHandle;
use crate::ops::Qdisc;
use lqos_model::{Rate, SmolStr};

/// Where one direction of a circuit's traffic is shaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steer {
    /// Interface.
    pub dev: SmolStr,
    /// 0-based TX queue (the CPU index LibreQoS's XDP maps to).
    pub queue: u32,
    /// The circuit's HTB class on that queue.
    pub classid: TcHandle,
}

/// One address or prefix of one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpMapEntry {
    /// The address or prefix (host bits cleared).
    pub net: IpNet,
    /// Index of the circuit in the plan's `allocation.circuits`.
    pub circuit: u32,
    /// Circuit ID (untrusted CSV text).
    pub circuit_id: SmolStr,
    /// Circuit name (untrusted CSV text).
    pub circuit_name: SmolStr,
    /// Device ID (untrusted CSV text).
    pub device_id: SmolStr,
    /// Device name (untrusted CSV text).
    pub device_name: SmolStr,
    /// Download side.
    pub download: Steer,
    /// Upload side.
    pub upload: Steer,
    /// Handle of this prefix's `flower` filters (stable across reloads).
    pub filter_handle: u32,
}

/// The IP map of a plan, sorted for longest-prefix-match lookups.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<IpMapEntry>", into = "Vec<IpMapEntry>")]
pub struct IpMap {
    /// Sorted: IPv4 first, longer prefixes first, then by address.
    entries: Vec<IpMapEntry>,
    /// `(start, end)` of each run of one family and prefix length.
    groups: Vec<(usize, usize)>,
}

/// The CSV header of `ip_map.csv`.
pub const CSV_HEADER: [&str; 10] = [
    "ip",
    "prefix_len",
    "circuit_id",
    "circuit_name",
    "download_dev",
    "download_queue",
    "download_classid",
    "upload_dev",
    "upload_queue",
    "upload_classid",
];

pub(crate) fn sort_key(e: &IpMapEntry) -> (bool, std::cmp::Reverse<u8>, IpAddr) {
    (
        e.net.network().is_ipv6(),
        std::cmp::Reverse(e.net.prefix_len()),
        e.net.network(),
    )
}

impl From<Vec<IpMapEntry>> for IpMap {
    fn from(v: Vec<IpMapEntry>) -> IpMap {
        IpMap::new(v)
    }
}

impl From<IpMap> for Vec<IpMapEntry> {
    fn from(m: IpMap) -> Vec<IpMapEntry> {
        m.entries
    }
}

impl IpMap {
    /// Builds the map (host bits are cleared; for a prefix listed twice the
    /// first entry given wins lookups).
    pub fn new(mut entries: Vec<IpMapEntry>) -> IpMap {
        for e in &mut entries {
            e.net = e.net.trunc();
        }
        // Sort small keys, then move each entry once (moving the entries
        // themselves through a sort costs more than the comparisons). The
        // index in the key keeps duplicates in input order, as a stable
        // sort by `sort_key` would.
        let mut keys: Vec<(bool, u8, u128, u32)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let (v6, rev_len, addr) = sort_key(e);
                let addr = match addr {
                    IpAddr::V4(a) => u128::from(u32::from(a)),
                    IpAddr::V6(a) => u128::from(a),
                };
                (v6, rev_len.0, addr, i as u32)
            })
            .collect();
        keys.sort_unstable_by(|a, b| (a.0, b.1, a.2, a.3).cmp(&(b.0, a.1, b.2, b.3)));
        // Permute in place (position k takes entry keys[k].3), cycle by
        // cycle: no second vector of entries.
        let mut done = vec![false; entries.len()];
        for start in 0..entries.len() {
            let mut cur = start;
            while !done[cur] {
                done[cur] = true;
                let next = keys[cur].3 as usize;
                if next == start {
                    break;
                }
                entries.swap(cur, next);
                cur = next;
            }
        }
        let mut groups = Vec::new();
        let mut start = 0;
        for i in 1..=entries.len() {
            let split = i == entries.len() || {
                let (a, b) = (&entries[i - 1].net, &entries[i].net);
                a.network().is_ipv6() != b.network().is_ipv6() || a.prefix_len() != b.prefix_len()
            };
            if split && i > start {
                groups.push((start, i));
                start = i;
            }
        }
        IpMap { entries, groups }
    }

    /// The entries, to change in place without moving any prefix.
    pub(crate) fn entries_mut(&mut self) -> &mut [IpMapEntry] {
        &mut self.entries
    }

    /// All entries (IPv4 first, longer prefixes first, then by address).
    pub fn entries(&self) -> &[IpMapEntry] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no device has an address.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry with the longest prefix containing `addr` (`None`: the
    /// address is not shaped; its traffic goes to the default class).
    /// Costs one binary search per distinct prefix length.
    pub fn lookup(&self, addr: IpAddr) -> Option<&IpMapEntry> {
        // IPv4-mapped IPv6 addresses are not IPv4 traffic; no conversion.
        for &(s, e) in &self.groups {
            let g = &self.entries[s..e];
            let first = &g[0].net;
            if first.network().is_ipv6() != addr.is_ipv6() {
                continue;
            }
            let Ok(probe) = IpNet::new(addr, first.prefix_len()) else {
                continue;
            };
            let net = probe.network();
            if let Ok(i) = g.binary_search_by(|x| x.net.network().cmp(&net)) {
                // The first of equal entries (duplicates keep input order).
                let i = g[..i].partition_point(|x| x.net.network() < net).min(i);
                return Some(&g[i]);
            }
        }
        None
    }

    /// `ip_map.csv`: [`CSV_HEADER`] and one row per entry; CSV text is
    /// quoted as the csv crate quotes it, so no name can add a row or a
    /// column.
    pub fn to_csv(&self) -> String {
        let mut out = Vec::with_capacity(self.entries.len() * 72 + 128);
        self.write_csv(&mut out);
        // Only UTF-8 text (names from `&str`) and ASCII is written.
        String::from_utf8(out).unwrap_or_default()
    }

    /// [`IpMap::to_csv`], written to `w` in chunks of about 64 KiB (one
    /// reused buffer, no allocation per row or field).
    pub fn write_csv_to<W: std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        let mut b = Vec::with_capacity(64 * 1024 + 512);
        self.csv_chunks(
            64 * 1024,
            &mut |b: &mut Vec<u8>| {
                let r = w.write_all(b);
                b.clear();
                r
            },
            &mut b,
        )?;
        w.write_all(&b)
    }

    /// [`IpMap::to_csv`], appended to `out` (one buffer, no allocation per
    /// row or field).
    pub fn write_csv(&self, out: &mut Vec<u8>) {
        let _ = self.csv_chunks(usize::MAX, &mut |_| Ok::<(), ()>(()), out);
    }

    /// Writes the CSV into `out`, handing it to `flush` (which empties it)
    /// whenever it holds `chunk` bytes or more.
    fn csv_chunks<E>(
        &self,
        chunk: usize,
        flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
        out: &mut Vec<u8>,
    ) -> Result<(), E> {
        use crate::text::{push_handle, push_ip, push_u64, CsvFields};
        let q = CsvFields::new();
        for (i, h) in CSV_HEADER.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            q.push(out, h.as_bytes());
        }
        out.push(b'\n');
        for e in &self.entries {
            push_ip(out, e.net.network());
            out.push(b',');
            push_u64(out, u64::from(e.net.prefix_len()));
            out.push(b',');
            q.push(out, e.circuit_id.as_bytes());
            out.push(b',');
            q.push(out, e.circuit_name.as_bytes());
            for s in [&e.download, &e.upload] {
                out.push(b',');
                q.push(out, s.dev.as_bytes());
                out.push(b',');
                push_u64(out, u64::from(s.queue));
                out.push(b',');
                push_handle(out, s.classid);
            }
            out.push(b'\n');
            if out.len() >= chunk {
                flush(out)?;
            }
        }
        Ok(())
    }
}

/// One direction of an address's circuit, as planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SteerDetails {
    /// Interface, queue and classid.
    pub steer: Steer,
    /// The class's guaranteed rate (`None`: not in the plan's ops).
    pub rate: Option<Rate>,
    /// The class's ceiling.
    pub ceil: Option<Rate>,
    /// The leaf qdisc on the class (`None`: no leaf, `sqm none`).
    pub leaf: Option<Qdisc>,
}

/// Everything a plan says about a shaped address
/// ([`Plan::explain_ip`](crate::Plan::explain_ip)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct IpDetails {
    /// The matching entry (longest prefix).
    pub entry: IpMapEntry,
    /// Node names from the top-level node down to the circuit's parent.
    pub node_path: Vec<String>,
    /// Download side.
    pub download: SteerDetails,
    /// Upload side.
    pub upload: SteerDetails,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(net: &str, id: &str) -> IpMapEntry {
        let s = |q| Steer {
            dev: "ens19".into(),
            queue: q,
            classid: TcHandle::new(q as u16 + 1, 3),
        };
        IpMapEntry {
            net: net.parse().unwrap(),
            circuit: 0,
            circuit_id: id.into(),
            circuit_name: format!("name,\"{id}\"\n").into(),
            device_id: SmolStr::default(),
            device_name: SmolStr::default(),
            download: s(0),
            upload: s(1),
            filter_handle: 1,
        }
    }

    #[test]
    fn longest_prefix_wins_and_families_stay_apart() {
        let m = IpMap::new(vec![
            entry("10.0.0.0/8", "wide"),
            entry("10.1.0.0/16", "mid"),
            entry("10.1.2.3/32", "host"),
            entry("2001:db8::/32", "v6"),
            entry("::/0", "all6"),
        ]);
        let id = |a: &str| m.lookup(a.parse().unwrap()).map(|e| e.circuit_id.as_str());
        assert_eq!(id("10.1.2.3"), Some("host"));
        assert_eq!(id("10.1.2.4"), Some("mid"));
        assert_eq!(id("10.200.0.1"), Some("wide"));
        assert_eq!(id("11.0.0.1"), None);
        assert_eq!(id("2001:db8::5"), Some("v6"));
        assert_eq!(id("2002::1"), Some("all6"));
    }

    #[test]
    fn csv_quotes_untrusted_text() {
        let m = IpMap::new(vec![entry("10.0.0.1/32", "a,b")]);
        let csv = m.to_csv();
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), CSV_HEADER);
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 1);
        assert_eq!(&rows[0][2], "a,b");
        assert_eq!(&rows[0][3], "name,\"a,b\"\n");
        assert_eq!(&rows[0][6], "1:3");
    }

    #[test]
    fn serde_roundtrip_keeps_lookups() {
        let m = IpMap::new(vec![entry("10.0.0.0/8", "w"), entry("10.0.0.1/32", "h")]);
        let back: IpMap = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert_eq!(
            back.lookup("10.0.0.1".parse().unwrap()).unwrap().circuit_id,
            "h"
        );
    }
}
