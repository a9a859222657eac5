//! The IP map: every device address/prefix with its circuit, classids and
//! stable filter handle.

use ipnet::IpNet;
use lqos_model::{Circuit, SmolStr};

use super::{Allocation, CircuitSlot, FilterSlot};
use crate::handle::TcHandle;
use crate::ipmap::{IpMap, IpMapEntry, Steer};
use hashbrown::{HashMap, HashSet};

/// Filter slots sorted by prefix, one per prefix (the allocation's
/// canonical form).
pub(crate) fn filter_slots(it: impl Iterator<Item = (IpNet, u32)>) -> Vec<FilterSlot> {
    let mut v: Vec<FilterSlot> = it
        .map(|(net, handle)| FilterSlot {
            net: net.trunc(),
            handle,
        })
        .collect();
    v.sort_by_key(|f| f.net);
    v.dedup_by_key(|f| f.net);
    v
}

/// Appends the IP map entries of circuit `ci` (in `slot`) to `out`: one per
/// device address/prefix, devices in order, IPv4 then IPv6, filter handle
/// 0 (assigned afterwards). Shared by the planner and the incremental
/// re-plan, so both build identical entries.
#[allow(clippy::too_many_arguments)]
pub(crate) fn push_circuit_entries(
    out: &mut Vec<IpMapEntry>,
    ci: usize,
    c: &Circuit,
    slot: &CircuitSlot,
    per_dir: u32,
    stick: bool,
    dev_d: &SmolStr,
    dev_u: &SmolStr,
) {
    let qd = slot.queue;
    let qu = if stick {
        per_dir + slot.queue
    } else {
        slot.queue
    };
    let steer = |dev: &SmolStr, queue: u32| Steer {
        dev: dev.clone(),
        queue,
        classid: TcHandle::new(queue as u16 + 1, slot.minor),
    };
    for d in &c.devices {
        let nets = d.ipv4.iter().map(|n| IpNet::V4(*n));
        for net in nets.chain(d.ipv6.iter().map(|n| IpNet::V6(*n))) {
            out.push(IpMapEntry {
                net: net.trunc(),
                circuit: ci as u32,
                circuit_id: c.id.clone(),
                circuit_name: c.name.clone(),
                device_id: d.id.clone(),
                device_name: d.name.clone(),
                download: steer(dev_d, qd),
                upload: steer(dev_u, qu),
                filter_handle: 0,
            });
        }
    }
}

/// The IP map: one entry per device address/prefix, each prefix with the
/// filter handle it had in `previous` (or the lowest free one).
pub(super) fn ip_map(
    circuits: &[Circuit],
    slots: &[CircuitSlot],
    previous: Option<&Allocation>,
    per_dir: u32,
    stick: bool,
    dev_d: &str,
    dev_u: &str,
) -> IpMap {
    let count: usize = circuits
        .iter()
        .flat_map(|c| &c.devices)
        .map(|d| d.ipv4.len() + d.ipv6.len())
        .sum();
    let mut entries = Vec::with_capacity(count);
    let (dev_d, dev_u) = (SmolStr::from(dev_d), SmolStr::from(dev_u));
    for (ci, (c, slot)) in circuits.iter().zip(slots).enumerate() {
        push_circuit_entries(&mut entries, ci, c, slot, per_dir, stick, &dev_d, &dev_u);
    }
    // Handles: survivors keep theirs; one handle per distinct prefix.
    let mut assigned: HashMap<IpNet, u32> = HashMap::default();
    let mut used: HashSet<u32> = HashSet::default();
    if let Some(p) = previous {
        let wanted: HashSet<IpNet> = entries.iter().map(|e| e.net).collect();
        for s in &p.filters {
            if s.handle != 0
                && wanted.contains(&s.net)
                && !assigned.contains_key(&s.net)
                && used.insert(s.handle)
            {
                assigned.insert(s.net, s.handle);
            }
        }
    }
    let mut next = 1u32;
    for e in &mut entries {
        e.filter_handle = *assigned.entry(e.net).or_insert_with(|| {
            while used.contains(&next) {
                next += 1;
            }
            used.insert(next);
            next
        });
    }
    IpMap::new(entries)
}
