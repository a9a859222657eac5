//! Edits of a few addresses without touching the rest: [`Indexed`] keeps
//! the placed entries with a sorted index of their prefixes, so an edit's
//! placement (exact map, fast map or trie) and its ordered diff cost
//! O(changes x log n) instead of a pass over every entry. Pure.
//!
//! ```
//! use lqos_bpf::index::Indexed;
//! use lqos_bpf::layout::CircuitValue;
//! use lqos_bpf::model::Entries;
//! let v = |c| CircuitValue { circuit: c, ..Default::default() };
//! let mut idx = Indexed::new(Entries::default());
//! let d = idx.edit(&[("100.64.0.7/32".parse().unwrap(), Some(v(1)))]);
//! assert_eq!(d.writes.len(), 1);
//! idx.apply(&d);
//! let d = idx.edit(&[("100.64.0.7/32".parse().unwrap(), None)]);
//! assert_eq!(d.removes.len(), 1);
//! ```

use std::collections::BTreeSet;

use hashbrown::HashMap;
use ipnet::IpNet;

use crate::layout::{CircuitValue, FastLens};
use crate::model::{Entries, MapDiff, MapKey};

/// Placed entries with a sorted index of their prefixes.
#[derive(Debug, Clone, Default)]
pub struct Indexed {
    entries: Entries,
    /// Every prefix (not hosts) as (address, length in IPv6 bits), built
    /// on the first edit that needs it (a cold load never does).
    prefixes: std::sync::OnceLock<BTreeSet<(u128, u8)>>,
    lens: FastLens,
}

fn last(a: u128, len: u8) -> u128 {
    a | u128::MAX.checked_shr(u32::from(len)).unwrap_or(0)
}

fn mask(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - u32::from(len)))
    }
}

fn parts(k: &MapKey) -> Option<(u128, u8)> {
    match k {
        MapKey::Host(_) => None,
        _ => {
            let (len, a) = k.lpm();
            Some((u128::from_be_bytes(a), len as u8))
        }
    }
}

impl Indexed {
    /// Indexes `entries` (placed as the maps hold them).
    pub fn new(entries: Entries) -> Indexed {
        let lens = entries.fast_lens();
        Indexed::with_lens(entries, lens)
    }

    /// Indexes `entries` whose fast lengths are `lens` (as
    /// [`Entries::fast_lens`] gives them: the diff that wrote them has
    /// them in [`MapDiff::fast_after`]).
    pub(crate) fn with_lens(entries: Entries, lens: FastLens) -> Indexed {
        Indexed {
            entries,
            prefixes: std::sync::OnceLock::new(),
            lens,
        }
    }

    /// The prefix index (built on first use).
    fn prefixes(&self) -> &BTreeSet<(u128, u8)> {
        self.prefixes
            .get_or_init(|| self.entries.iter().filter_map(|(k, _)| parts(k)).collect())
    }

    /// The entries.
    pub fn entries(&self) -> &Entries {
        &self.entries
    }

    /// Records that `d` was applied to the maps.
    pub fn apply(&mut self, d: &MapDiff) {
        for (k, v) in &d.writes {
            self.entries.insert(*k, *v);
            if let (Some(p), Some(set)) = (parts(k), self.prefixes.get_mut()) {
                set.insert(p);
            }
        }
        for k in &d.removes {
            self.entries.remove(k);
            if let Some((a, len)) = parts(k) {
                let addr = a.to_be_bytes();
                let other = match k {
                    MapKey::Fast { .. } => MapKey::Net {
                        prefix_len: len,
                        addr,
                    },
                    _ => MapKey::Fast {
                        prefix_len: len,
                        addr,
                    },
                };
                if self.entries.get(&other).is_none() {
                    if let Some(set) = self.prefixes.get_mut() {
                        set.remove(&(a, len));
                    }
                }
            }
        }
        self.lens = d.fast_after;
    }

    /// The ordered diff that sets each listed address or prefix to its
    /// value (`None`: removes it; listed twice: the last one counts), keeping the placement rule of
    /// [`Entries::place`] with the fast lengths in force: a new prefix of
    /// a fast length goes to the fast map unless another prefix lies
    /// inside it, and a fast prefix that gets one inside it moves to the
    /// trie (written there before it leaves the fast map).
    pub fn edit(&self, changes: &[(IpNet, Option<CircuitValue>)]) -> MapDiff {
        let mut e = Edit {
            base: self,
            pending: HashMap::new(),
            added: BTreeSet::new(),
            removed: BTreeSet::new(),
        };
        // A prefix listed twice takes its last value; removals go first,
        // so additions see the final neighbourhood.
        let mut last_of: HashMap<MapKey, Option<CircuitValue>> =
            HashMap::with_capacity(changes.len());
        for (net, v) in changes {
            last_of.insert(MapKey::from_net(*net), *v);
        }
        let mut order: Vec<(MapKey, Option<CircuitValue>)> = last_of.into_iter().collect();
        order.sort_unstable_by_key(|(k, v)| (v.is_some(), *k));
        for (key, v) in order {
            match (key, v) {
                (MapKey::Host(_), v) => e.set(key, v),
                (_, None) => e.remove_prefix(&key),
                (_, Some(v)) => e.add_prefix(&key, v),
            }
        }
        let mut writes: Vec<(MapKey, CircuitValue)> = Vec::new();
        let mut removes: Vec<MapKey> = Vec::new();
        for (k, v) in e.pending {
            match v {
                Some(v) if self.entries.get(&k) != Some(&v) => writes.push((k, v)),
                None if self.entries.get(&k).is_some() => removes.push(k),
                _ => {}
            }
        }
        writes.sort_unstable_by_key(|(k, _)| {
            (std::cmp::Reverse(k.prefix_len()), k.lpm().1, k.map_name())
        });
        removes.sort_unstable_by_key(|k| (k.prefix_len(), k.lpm().1, k.map_name()));
        MapDiff {
            fast_before: self.lens,
            writes,
            removes,
            fast_after: self.lens,
        }
    }
}

/// One edit in progress: pending slot values over the base.
struct Edit<'a> {
    base: &'a Indexed,
    pending: HashMap<MapKey, Option<CircuitValue>>,
    added: BTreeSet<(u128, u8)>,
    removed: BTreeSet<(u128, u8)>,
}

impl Edit<'_> {
    fn get(&self, k: &MapKey) -> Option<CircuitValue> {
        match self.pending.get(k) {
            Some(v) => *v,
            None => self.base.entries.get(k).copied(),
        }
    }

    fn set(&mut self, k: MapKey, v: Option<CircuitValue>) {
        self.pending.insert(k, v);
    }

    fn keys(len: u8, addr: [u8; 16]) -> (MapKey, MapKey) {
        (
            MapKey::Net {
                prefix_len: len,
                addr,
            },
            MapKey::Fast {
                prefix_len: len,
                addr,
            },
        )
    }

    fn remove_prefix(&mut self, key: &MapKey) {
        let (len, addr) = key.lpm();
        let (net, fast) = Self::keys(len as u8, addr);
        for k in [net, fast] {
            if self.get(&k).is_some() {
                self.set(k, None);
            }
        }
        let p = (u128::from_be_bytes(addr), len as u8);
        self.added.remove(&p);
        self.removed.insert(p);
    }

    /// True when a prefix other than `p` lies inside `p`.
    fn nested(&self, p: (u128, u8)) -> bool {
        let range = (p.0, p.1 + 1)..=(last(p.0, p.1), u8::MAX);
        let in_base = self
            .base
            .prefixes()
            .range(range.clone())
            .any(|x| !self.removed.contains(x));
        in_base || self.added.range(range).next().is_some()
    }

    fn add_prefix(&mut self, key: &MapKey, v: CircuitValue) {
        let (len, addr) = key.lpm();
        let len = len as u8;
        let a = u128::from_be_bytes(addr);
        let v4 = key.is_ipv4();
        let lens = if v4 {
            self.base.lens.v4
        } else {
            self.base.lens.v6
        };
        let (net, fast) = Self::keys(len, addr);
        let to_fast = lens.contains(&len) && !self.nested((a, len));
        let (want, other) = if to_fast { (fast, net) } else { (net, fast) };
        self.set(want, Some(v));
        if self.get(&other).is_some() {
            self.set(other, None);
        }
        self.removed.remove(&(a, len));
        self.added.insert((a, len));
        // A fast prefix around this one now has a prefix inside it.
        for &l in lens.iter().filter(|&&l| l > 0 && l < len) {
            let (pnet, pfast) = Self::keys(l, mask(a, l).to_be_bytes());
            if let Some(pv) = self.get(&pfast) {
                self.set(pnet, Some(pv));
                self.set(pfast, None);
            }
        }
    }
}
