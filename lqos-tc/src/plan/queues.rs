//! Stage 2: a queue for every top-level subtree.

use super::hierarchy::{argmin, Hierarchy};
use super::Previous;
use crate::config::QueueStrategy;
use crate::plan_config::PlanConfig;

/// Stage 2: the 0-based queue of every node. Each top-level subtree lives
/// in one queue (HTB limits cannot cross HTB qdiscs): a surviving
/// top-level node (generated or not) in its previous one; new ones by the
/// queue strategy. Round robin is LibreQoS's: the top-level names sorted,
/// `Generated_PN_1..=q` among them (whether or not they are created), the
/// i-th in queue `i mod q`. Balanced pins `Generated_PN_k` to queue `k-1`
/// and puts the largest subtrees first onto the least loaded queue.
/// Children inherit.
#[allow(clippy::needless_range_loop)] // parallel per-node arrays
pub(super) fn queues(h: &Hierarchy, cfg: &PlanConfig, prev: &Previous) -> Vec<u32> {
    let q = cfg.queues_per_direction() as usize;
    let ents = &h.ents;
    let n = ents.len();
    // Subtree sizes (ents are in preorder: children after parents).
    let mut size = vec![0u64; n];
    for e in (0..n).rev() {
        size[e] += 1 + u64::from(h.circ_count[e]);
        if let Some(p) = ents[e].parent {
            size[p as usize] += size[e];
        }
    }
    let mut queue = vec![u32::MAX; n];
    let mut load = vec![0u64; q];
    let mut new_tops = Vec::new();
    for e in 0..n {
        if ents[e].parent.is_some() {
            continue;
        }
        if let Some(s) = prev
            .nodes
            .get(ents[e].name.as_ref())
            .filter(|s| (s.queue as usize) < q && s.generated == ents[e].generated)
        {
            queue[e] = s.queue;
        } else if ents[e].generated && cfg.strategy == QueueStrategy::Balanced {
            queue[e] = (e - h.first_gen) as u32;
        } else {
            new_tops.push(e);
        }
        if queue[e] != u32::MAX {
            load[queue[e] as usize] += size[e];
        }
    }
    match cfg.strategy {
        QueueStrategy::RoundRobin => {
            let generated: Vec<String> = (1..=q).map(|k| format!("Generated_PN_{k}")).collect();
            let mut names: Vec<&str> = ents
                .iter()
                .filter(|e| e.parent.is_none() && !e.generated)
                .map(|e| e.name.as_ref())
                .chain(generated.iter().map(String::as_str))
                .collect();
            names.sort_unstable();
            for e in new_tops {
                let i = names
                    .binary_search(&ents[e].name.as_ref())
                    .unwrap_or_default();
                queue[e] = (i % q) as u32;
            }
        }
        QueueStrategy::Balanced => {
            new_tops.sort_by(|&a, &b| size[b].cmp(&size[a]).then(a.cmp(&b)));
            for e in new_tops {
                let k = argmin(&load);
                queue[e] = k as u32;
                load[k] += size[e];
            }
        }
    }
    for e in 0..n {
        if let Some(p) = ents[e].parent {
            queue[e] = queue[p as usize];
        }
    }
    queue
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::*;

    #[test]
    fn queues_keep_survivors_and_spread_new_subtrees() {
        let net = net();
        let mut c = cfg(2);
        let none = Previous::new(None, 2);
        let h = hierarchy(&net, &c, &none).unwrap();
        // Round-robin over the sorted top-level names with the generated
        // ones (Generated_PN_1, _2, Site_A, Site_B); children inherit.
        assert_eq!(queues(&h, &c, &none), [0, 0, 1, 0, 1]);
        // Balanced: the larger subtree (Site_A: 2 nodes + 2 circuits) goes
        // to the less loaded queue (PN_1 holds the orphan on queue 0).
        c.strategy = QueueStrategy::Balanced;
        assert_eq!(queues(&h, &c, &none), [1, 1, 0, 0, 1]);
        // A surviving top-level node keeps its queue (Site_B keeps its
        // round-robin place, the second top-level node).
        let p = plan(&net, &cfg(2), None).unwrap();
        let mut alloc = p.allocation.clone();
        alloc.nodes[0].queue = 1;
        let prev = Previous::new(Some(&alloc), 2);
        assert_eq!(queues(&h, &cfg(2), &prev)[..3], [1, 1, 1]);
        // An allocation for another queue count is ignored.
        assert!(Previous::new(Some(&alloc), 3).alloc.is_none());
    }
}
