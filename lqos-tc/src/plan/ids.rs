//! Stage 3: class minors and leaf qdisc majors.

use super::bits::Bits;
use super::hierarchy::Hierarchy;
use super::layout::{default_leaf_major, devices, htbs_per_dev};
use super::leaf::NO_LEAF;
use super::{PlanError, Previous};
use crate::config::Interfaces;
use crate::plan_config::PlanConfig;

/// A circuit's ids (stage 3), in input order.
#[derive(Clone, Copy, Default)]
pub(super) struct CircIds {
    /// Class minor (both directions).
    pub(super) minor: u16,
    /// Leaf qdisc majors (0 when the circuit has no leaf that side).
    pub(super) major_d: u16,
    pub(super) major_u: u16,
}

/// Stage 3 output: class minors and leaf majors.
pub(super) struct Ids {
    pub(super) node_minor: Vec<u16>,
    pub(super) circ: Vec<CircIds>,
}

/// Stage 3: class minors per queue (survivors of `prev` keep theirs, then
/// the lowest free ones from 3, nodes before circuits) and leaf qdisc
/// majors per device (after the HTB majors, skipping the default classes'
/// leaves, `7fff:` and `ffff:`; survivors keep theirs).
pub(super) fn ids(
    h: &Hierarchy,
    queue: &[u32],
    cfg: &PlanConfig,
    prev: &Previous,
) -> Result<Ids, PlanError> {
    let q = cfg.queues_per_direction() as usize;
    let stick = matches!(cfg.interfaces, Interfaces::OnAStick { .. });
    let n = h.ents.len();
    let mut minors: Vec<Bits> = (0..q).map(|_| Bits::new([0, 1, 2], 0xffff)).collect();
    let mut node_minor = vec![0u16; n];
    let mut circ = vec![CircIds::default(); h.circ.len()];
    if prev.alloc.is_some() {
        for (e, ent) in h.ents.iter().enumerate() {
            let qe = queue[e];
            if let Some(s) = prev.nodes.get(ent.name.as_ref()) {
                if s.queue == qe
                    && s.generated == ent.generated
                    && minors[qe as usize].take(u32::from(s.minor))
                {
                    node_minor[e] = s.minor;
                }
            }
        }
        for ((c, slot), &e) in circ.iter_mut().zip(&h.slots).zip(&h.circ_ent) {
            let qe = queue[e as usize];
            if let Some(s) = prev.circuits.get(slot.id.as_str()) {
                if s.queue == qe && minors[qe as usize].take(u32::from(s.minor)) {
                    c.minor = s.minor;
                }
            }
        }
    }
    let overflow = |qe: usize| PlanError::MinorOverflow {
        queue: qe as u32 + 1,
        major: qe as u16 + 1,
    };
    for e in 0..n {
        let qe = queue[e] as usize;
        if node_minor[e] == 0 {
            node_minor[e] = minors[qe].alloc().ok_or_else(|| overflow(qe))? as u16;
        }
    }
    for (c, &e) in circ.iter_mut().zip(&h.circ_ent) {
        let qe = queue[e as usize] as usize;
        if c.minor == 0 {
            c.minor = minors[qe].alloc().ok_or_else(|| overflow(qe))? as u16;
        }
    }

    let htbs = htbs_per_dev(cfg);
    let leaf_base = 2 * htbs + 1;
    let reserved = || {
        (0..leaf_base)
            .chain([0x7fff, 0xffff])
            .chain((1..=htbs).map(|m| u32::from(default_leaf_major(m as u16))))
    };
    let new_pool = || Bits::new(reserved(), 0xffff);
    let mut pools = [new_pool(), new_pool()];
    let up_pool = if stick { 0 } else { 1 };
    if prev.alloc.is_some() {
        for ((c, r), slot) in circ.iter_mut().zip(&h.circ).zip(&h.slots) {
            if let Some(s) = prev.circuits.get(slot.id.as_str()) {
                if let (Some(m), true) = (s.leaf_download, r.leaf_d != NO_LEAF) {
                    if pools[0].take(u32::from(m)) {
                        c.major_d = m;
                    }
                }
                if let (Some(m), true) = (s.leaf_upload, r.leaf_u != NO_LEAF) {
                    if pools[up_pool].take(u32::from(m)) {
                        c.major_u = m;
                    }
                }
            }
        }
    }
    let leaf_overflow = |pool: usize| {
        let needed = h
            .circ
            .iter()
            .map(|r| {
                usize::from(pool == 0 && r.leaf_d != NO_LEAF)
                    + usize::from(pool == up_pool && r.leaf_u != NO_LEAF)
            })
            .sum::<usize>();
        let (dev_d, dev_u) = devices(cfg);
        PlanError::LeafMajorOverflow {
            interface: if pool == 0 { dev_d } else { dev_u },
            needed,
            available: 0x10000 - leaf_base as usize - 2 - htbs as usize,
        }
    };
    for (c, r) in circ.iter_mut().zip(&h.circ) {
        if r.leaf_d != NO_LEAF && c.major_d == 0 {
            match pools[0].alloc() {
                Some(m) => c.major_d = m as u16,
                None => return Err(leaf_overflow(0)),
            }
        }
        if r.leaf_u != NO_LEAF && c.major_u == 0 {
            match pools[up_pool].alloc() {
                Some(m) => c.major_u = m as u16,
                None => return Err(leaf_overflow(up_pool)),
            }
        }
    }
    Ok(Ids { node_minor, circ })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::*;

    #[test]
    fn ids_keep_surviving_minors_and_majors_and_fill_the_lowest_free() {
        let (net, c) = (net(), cfg(2));
        let none = Previous::new(None, 2);
        let h = hierarchy(&net, &c, &none).unwrap();
        let queue = queues(&h, &c, &none);
        let fresh = ids(&h, &queue, &c, &none).unwrap();
        // Queue 0 holds Site_A, AP, PN_1 (minors 3, 4, 5), then circuits.
        assert_eq!(fresh.node_minor, [3, 4, 3, 5, 4]);
        let minors: Vec<u16> = fresh.circ.iter().map(|c| c.minor).collect();
        assert_eq!(minors, [6, 7, 5, 8]);
        // Leaf majors after 2 HTBs and 2 default leaves: from 5.
        let majors: Vec<u16> = fresh.circ.iter().map(|c| c.major_d).collect();
        assert_eq!(majors, [5, 6, 7, 8]);
        // Survivors keep their ids; a new circuit takes the lowest free
        // ones (6 and 5, which the moved survivor gave up).
        let mut alloc = plan(&net, &c, None).unwrap().allocation;
        alloc.circuits[0].minor = 40;
        alloc.circuits[0].leaf_download = Some(90);
        alloc.circuits.remove(1);
        let prev = Previous::new(Some(&alloc), 2);
        let again = ids(&h, &queue, &c, &prev).unwrap();
        assert_eq!((again.circ[0].minor, again.circ[0].major_d), (40, 90));
        assert_eq!((again.circ[1].minor, again.circ[1].major_d), (6, 5));
        assert_eq!((again.circ[3].minor, again.circ[3].major_d), (8, 8));
    }
}
