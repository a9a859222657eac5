//! The maps' contents as plain values: the entries a plan wants, the
//! entries the kernel holds, and the ordered difference between them.
//! Pure: no I/O here.
//!
//! ```
//! use lqos_bpf::model::{diff, Entries, MapKey};
//! use lqos_bpf::layout::{CircuitValue, Steer};
//! let v = |c| CircuitValue { circuit: c, ..Default::default() };
//! let mut old = Entries::default();
//! old.insert(MapKey::from_net("100.64.0.7/32".parse().unwrap()), v(1));
//! let mut new = old.clone();
//! new.insert(MapKey::from_net("100.64.0.0/29".parse().unwrap()), v(2));
//! new.remove(&MapKey::from_net("100.64.0.7/32".parse().unwrap()));
//! let d = diff(&old, &new);
//! // The covering /29 is written before the /32 it replaces is removed.
//! assert_eq!((d.writes.len(), d.removes.len()), (1, 1));
//! let mut applied = old.clone();
//! d.apply_to(&mut applied);
//! assert_eq!(applied, new);
//! ```

use std::fmt;
use std::net::IpAddr;

use hashbrown::HashMap;
use ipnet::IpNet;

use crate::error::{BpfError, Result};
use crate::layout::{
    addr_bytes, addr_from_bytes, names, CircuitValue, FastLens, Steer, MAX_FAST, MAX_HOSTS,
    MAX_NETS,
};

/// A prefix length goes to the fast map when at least this many prefixes
/// have it (each fast length costs one hash lookup per packet that is not
/// a host's).
pub const FAST_MIN: usize = 16;
/// Fast lengths per family (two, so the lengths before and after any
/// update fit the programs' four slots together).
pub const FAST_PER_FAMILY: usize = 2;

/// A key of the maps: a single address goes to the exact-match hash, a
/// shorter prefix to the LPM trie, or (placed there by
/// [`Entries::place`]) to the fast map of common prefix lengths. Keyed as
/// IPv6; IPv4 as `::ffff:a.b.c.d` with prefix length + 96.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MapKey {
    /// `/32` or `/128`: `lqos1_hosts`.
    Host([u8; 16]),
    /// A shorter prefix: `lqos1_nets`. `prefix_len` counts IPv6 bits
    /// (0..=127); host bits of `addr` are zero.
    Net {
        /// Prefix length in IPv6 bits.
        prefix_len: u8,
        /// The prefix's first address.
        addr: [u8; 16],
    },
    /// A prefix of a common length with no other prefix inside it:
    /// `lqos1_fast` (same fields as `Net`).
    Fast {
        /// Prefix length in IPv6 bits.
        prefix_len: u8,
        /// The prefix's first address.
        addr: [u8; 16],
    },
}

impl MapKey {
    /// The key of an address or prefix (host bits cleared).
    pub fn from_net(net: IpNet) -> MapKey {
        MapKey::placed(&net, false)
    }

    /// The key of `net` (host bits cleared) where placing puts it: a host
    /// in the exact-match map, a prefix in the fast map when `fast`, else
    /// in the LPM trie.
    fn placed(net: &IpNet, fast: bool) -> MapKey {
        let (len, a) = lpm_of(net);
        let addr = a.to_be_bytes();
        match len {
            128 => MapKey::Host(addr),
            prefix_len if fast => MapKey::Fast { prefix_len, addr },
            prefix_len => MapKey::Net { prefix_len, addr },
        }
    }

    /// From an LPM key as the trie holds it (`None`: length over 128).
    pub fn from_lpm(prefix_len: u32, addr: [u8; 16]) -> Option<MapKey> {
        match prefix_len {
            128 => Some(MapKey::Host(addr)),
            0..=127 => Some(MapKey::Net {
                prefix_len: prefix_len as u8,
                addr,
            }),
            _ => None,
        }
    }

    /// The address or prefix (IPv4 for `::ffff:0:0/96` and longer).
    pub fn net(&self) -> IpNet {
        let (len, addr) = self.lpm();
        match addr_from_bytes(addr) {
            IpAddr::V4(a) if len >= 96 => IpNet::new(IpAddr::V4(a), (len - 96) as u8),
            _ => IpNet::new(IpAddr::V6(addr.into()), len as u8),
        }
        .unwrap_or_else(|_| IpNet::new(IpAddr::V6(addr.into()), 128).unwrap_or_default())
    }

    /// `(prefix length in IPv6 bits, address)`.
    pub fn lpm(&self) -> (u32, [u8; 16]) {
        match *self {
            MapKey::Host(a) => (128, a),
            MapKey::Net { prefix_len, addr } | MapKey::Fast { prefix_len, addr } => {
                (u32::from(prefix_len), addr)
            }
        }
    }

    /// The map's place among a diff's writes of one prefix length.
    fn map_rank(&self) -> u8 {
        match self {
            MapKey::Host(_) => 0,
            MapKey::Fast { .. } => 1,
            MapKey::Net { .. } => 2,
        }
    }

    /// The same prefix as a [`MapKey::Net`] (a host stays a host).
    pub fn logical(&self) -> MapKey {
        match *self {
            MapKey::Fast { prefix_len, addr } => MapKey::Net { prefix_len, addr },
            k => k,
        }
    }

    /// True for an IPv4 address or prefix (`::ffff:0:0/96` and inside).
    pub fn is_ipv4(&self) -> bool {
        let (len, a) = self.lpm();
        v4_mapped(len as u8, u128::from_be_bytes(a))
    }

    /// Prefix length in IPv6 bits (128 for a host).
    pub fn prefix_len(&self) -> u32 {
        self.lpm().0
    }

    /// The map this key lives in.
    pub fn map_name(&self) -> &'static str {
        match self {
            MapKey::Host(_) => names::HOSTS,
            MapKey::Net { .. } => names::NETS,
            MapKey::Fast { .. } => names::FAST,
        }
    }

    /// Capacity of that map.
    pub fn capacity(&self) -> u32 {
        match self {
            MapKey::Host(_) => MAX_HOSTS,
            MapKey::Net { .. } => MAX_NETS,
            MapKey::Fast { .. } => MAX_FAST,
        }
    }

    /// True when `addr` (as [`addr_bytes`]) is inside this key.
    pub fn contains(&self, addr: &[u8; 16]) -> bool {
        let (len, net) = self.lpm();
        let a = u128::from_be_bytes(*addr);
        let n = u128::from_be_bytes(net);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        a & mask == n
    }
}

/// `(prefix length in IPv6 bits, first address)` of a prefix whose host
/// bits are clear, on integers: a key built from it leaves in one store (a
/// key built byte by byte, then hashed, stalls each insert into a large
/// set on the set's pending writes).
fn lpm_of(net: &IpNet) -> (u8, u128) {
    match net {
        IpNet::V4(n) => (
            n.prefix_len() + 96,
            0xffff_0000_0000 | u128::from(u32::from(n.network())),
        ),
        IpNet::V6(n) => (n.prefix_len(), u128::from(n.network())),
    }
}

/// Whether `(len, a)` is an IPv4 address or prefix (`::ffff:0:0/96` and
/// inside): [`MapKey::is_ipv4`]'s rule.
fn v4_mapped(len: u8, a: u128) -> bool {
    len >= 96 && a >> 32 == 0xffff
}

// Hashed as two words (the address, then the map and length) rather than
// field by field: hashing is most of the cost of building a large set.
impl std::hash::Hash for MapKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (map, len, addr) = match *self {
            MapKey::Host(a) => (0u16, 128u16, a),
            MapKey::Net { prefix_len, addr } => (1, u16::from(prefix_len), addr),
            MapKey::Fast { prefix_len, addr } => (2, u16::from(prefix_len), addr),
        };
        state.write_u128(u128::from_ne_bytes(addr));
        state.write_u16(map << 8 | len);
    }
}

impl fmt::Display for MapKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.net())
    }
}

/// A set of map entries: what a plan wants, or what the kernel holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    map: HashMap<MapKey, CircuitValue>,
}

impl Entries {
    /// An empty set with room for `n` entries.
    pub fn with_capacity(n: usize) -> Entries {
        Entries {
            map: HashMap::with_capacity(n),
        }
    }

    /// Sets `key` (returns the value it replaced).
    pub fn insert(&mut self, key: MapKey, value: CircuitValue) -> Option<CircuitValue> {
        self.map.insert(key, value)
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &MapKey) -> Option<CircuitValue> {
        self.map.remove(key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &MapKey) -> Option<&CircuitValue> {
        self.map.get(key)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&MapKey, &CircuitValue)> {
        self.map.iter()
    }

    /// `(hosts, prefixes)`.
    pub fn counts(&self) -> (usize, usize) {
        let hosts = self
            .map
            .keys()
            .filter(|k| matches!(k, MapKey::Host(_)))
            .count();
        (hosts, self.map.len() - hosts)
    }

    /// Prefixes in the fast map.
    pub fn fast_count(&self) -> usize {
        self.map
            .keys()
            .filter(|k| matches!(k, MapKey::Fast { .. }))
            .count()
    }

    /// The fast map's prefix lengths per family (from its entries).
    pub fn fast_lens(&self) -> FastLens {
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for k in self.map.keys() {
            if let MapKey::Fast { prefix_len, .. } = k {
                let v = if k.is_ipv4() { &mut v4 } else { &mut v6 };
                if !v.contains(prefix_len) {
                    v.push(*prefix_len);
                }
            }
        }
        FastLens::new(&v4, &v6)
    }

    /// Decides where each prefix lives: the [`FAST_PER_FAMILY`] most
    /// common prefix lengths of each family (with at least [`FAST_MIN`]
    /// prefixes) go to the fast map, except a prefix with another prefix
    /// inside it (the programs take the first fast hit as the longest
    /// match); every other prefix goes to the LPM trie. Hosts stay. The
    /// programs' decision for any address is the same either way.
    pub fn place(&mut self) {
        // Every prefix as (address, length), sorted: a prefix's nested
        // prefixes come right after it.
        let mut p: Vec<(u128, u8, bool)> = self
            .map
            .keys()
            .filter(|k| !matches!(k, MapKey::Host(_)))
            .map(|k| {
                let (len, a) = k.lpm();
                (u128::from_be_bytes(a), len as u8, k.is_ipv4())
            })
            .collect();
        p.sort_unstable();
        // Mid-update a prefix can sit in both maps: count it once.
        p.dedup_by_key(|e| (e.0, e.1));
        let fast = fast_placement(&p);
        let mut moves = Vec::new();
        for (&(a, len, _), fast) in p.iter().zip(fast) {
            let addr = a.to_be_bytes();
            let net = MapKey::Net {
                prefix_len: len,
                addr,
            };
            let fst = MapKey::Fast {
                prefix_len: len,
                addr,
            };
            let (from, to) = if fast { (net, fst) } else { (fst, net) };
            if self.map.contains_key(&from) {
                moves.push((from, to));
            }
        }
        for (from, to) in moves {
            if let Some(v) = self.map.remove(&from) {
                self.map.insert(to, v);
            }
        }
    }

    /// What the programs decide for address `addr`: the exact entry, else
    /// the longest prefix containing it (a linear scan: for tests and
    /// checks, not the data path).
    pub fn lookup(&self, addr: IpAddr) -> Option<(&MapKey, &CircuitValue)> {
        let a = addr_bytes(addr);
        if let Some((k, v)) = self.map.get_key_value(&MapKey::Host(a)) {
            return Some((k, v));
        }
        self.map
            .iter()
            .filter(|(k, _)| k.contains(&a))
            .max_by_key(|(k, _)| k.prefix_len())
    }

    /// What the programs decide for `addr`, step by step as they do it:
    /// the exact entry, then the fast lengths longest first (exact match
    /// of the masked address), then the longest prefix of the LPM trie's
    /// entries. Equals [`Entries::lookup`] once [`Entries::place`] ran.
    pub fn program_lookup(&self, addr: IpAddr) -> Option<&CircuitValue> {
        let a = addr_bytes(addr);
        if let Some(v) = self.map.get(&MapKey::Host(a)) {
            return Some(v);
        }
        let lens = self.fast_lens();
        let lens = if addr.is_ipv4() { lens.v4 } else { lens.v6 };
        for len in lens.into_iter().take_while(|l| *l > 0) {
            let mask = u128::MAX << (128 - u32::from(len));
            let net = (u128::from_be_bytes(a) & mask).to_be_bytes();
            if let Some(v) = self.map.get(&MapKey::Fast {
                prefix_len: len,
                addr: net,
            }) {
                return Some(v);
            }
        }
        self.map
            .iter()
            .filter(|(k, _)| matches!(k, MapKey::Net { .. }) && k.contains(&a))
            .max_by_key(|(k, _)| k.prefix_len())
            .map(|(_, v)| v)
    }

    /// The entries of a plan's IP map, placed ([`Entries::place`]): each
    /// address or prefix with its circuit's class, queue and
    /// (`cpu_of_queue`) CPU in both directions.
    /// A prefix listed twice keeps its first entry, as
    /// [`lqos_tc::ipmap::IpMap::lookup`] does. Queues and classids that do not fit
    /// the maps' 16-bit fields are refused with the circuit named.
    pub fn from_ip_map(
        ip_map: &lqos_tc::ipmap::IpMap,
        cpu_of_queue: impl Fn(u32) -> u16,
    ) -> Result<Entries> {
        let list = ip_map.entries();
        // Placed before anything is inserted (as `place` would move them):
        // every prefix as (address, length, IPv4, index in the list),
        // sorted, so the first entry of a prefix listed twice leads its run.
        let mut p: Vec<(u128, u8, bool, u32)> = list
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match lpm_of(&e.net) {
                (128, _) => None,
                (len, a) => Some((a, len, v4_mapped(len, a), i as u32)),
            })
            .collect();
        p.sort_unstable();
        let mut unique: Vec<(u128, u8, bool)> = p.iter().map(|e| (e.0, e.1, e.2)).collect();
        unique.dedup_by_key(|e| (e.0, e.1));
        let fast = fast_placement(&unique);
        let mut in_fast = vec![false; list.len()];
        let mut u = 0;
        for e in &p {
            while (unique[u].0, unique[u].1) != (e.0, e.1) {
                u += 1;
            }
            in_fast[e.3 as usize] = fast[u];
        }
        let mut out = Entries::with_capacity(list.len());
        for (e, fast) in list.iter().zip(in_fast) {
            let key = MapKey::placed(&e.net, fast);
            // A prefix listed twice keeps its first entry.
            if let hashbrown::hash_map::Entry::Vacant(slot) = out.map.entry(key) {
                slot.insert(value_of(e, &cpu_of_queue)?);
            }
        }
        Ok(out)
    }
}

/// Which prefixes go to the fast map ([`Entries::place`]'s rule): `p` is
/// every prefix as (address, length, IPv4), sorted by address then length
/// and without duplicates; true for those that go there.
fn fast_placement(p: &[(u128, u8, bool)]) -> Vec<bool> {
    let last = |a: u128, len: u8| a | u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
    let nested: Vec<bool> = (0..p.len())
        .map(|i| p.get(i + 1).is_some_and(|n| n.0 <= last(p[i].0, p[i].1)))
        .collect();
    let mut count: HashMap<(bool, u8), usize> = HashMap::new();
    for (i, &(_, len, v4)) in p.iter().enumerate() {
        if !nested[i] {
            *count.entry((v4, len)).or_default() += 1;
        }
    }
    let top = |fam: bool| -> Vec<u8> {
        let mut v: Vec<(usize, u8)> = count
            .iter()
            .filter(|((f, _), n)| *f == fam && **n >= FAST_MIN)
            .map(|((_, len), n)| (*n, *len))
            .collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.into_iter()
            .take(FAST_PER_FAMILY)
            .map(|(_, len)| len)
            .collect()
    };
    let (fast4, fast6) = (top(true), top(false));
    p.iter()
        .zip(nested)
        .map(|(&(_, len, v4), nested)| {
            let lens = if v4 { &fast4 } else { &fast6 };
            !nested && lens.contains(&len)
        })
        .collect()
}

/// The map value of one IP map entry: both directions' classid, queue and
/// (`cpu_of_queue`) CPU. Queues that do not fit 16 bits are refused with
/// the circuit named.
pub fn value_of(
    e: &lqos_tc::ipmap::IpMapEntry,
    cpu_of_queue: impl Fn(u32) -> u16,
) -> Result<CircuitValue> {
    let steer = |s: &lqos_tc::ipmap::Steer| -> Result<Steer> {
        let queue = u16::try_from(s.queue).map_err(|_| BpfError::Entry {
            net: e.net,
            circuit: e.circuit_id.to_string(),
            message: format!("TX queue {} does not fit in 16 bits", s.queue),
        })?;
        Ok(Steer {
            classid: s.classid.raw(),
            queue,
            cpu: cpu_of_queue(s.queue),
        })
    };
    Ok(CircuitValue {
        down: steer(&e.download)?,
        up: steer(&e.upload)?,
        circuit: e.circuit,
        tag: crate::layout::circuit_tag(&e.circuit_id),
    })
}

/// The entry of exactly prefix `net` in `ip_map` (the first one when it is
/// listed twice, as [`lqos_tc::ipmap::IpMap::lookup`] picks), by binary search.
pub fn exact(ip_map: &lqos_tc::ipmap::IpMap, net: IpNet) -> Option<&lqos_tc::ipmap::IpMapEntry> {
    let net = net.trunc();
    // The map's order: IPv4 first, longer prefixes first, then by address.
    let key = |n: &IpNet| {
        (
            n.network().is_ipv6(),
            std::cmp::Reverse(n.prefix_len()),
            n.network(),
        )
    };
    let want = key(&net);
    let e = ip_map.entries();
    let i = e.partition_point(|x| key(&x.net) < want);
    e.get(i).filter(|x| x.net == net)
}

/// The changes that turn one [`Entries`] into another, in a safe order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapDiff {
    /// Fast lengths to enable before the writes (those of both sets).
    pub fast_before: FastLens,
    /// Entries to add or overwrite in place, longest prefixes first (a
    /// host entry is in before a new covering prefix could claim it).
    pub writes: Vec<(MapKey, CircuitValue)>,
    /// Entries to remove after every write, shortest prefixes first (an
    /// address under a more specific entry being removed never falls back
    /// to an old covering prefix that is also going).
    pub removes: Vec<MapKey>,
    /// Fast lengths after the writes, before the removals (the target's).
    pub fast_after: FastLens,
}

impl MapDiff {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.removes.is_empty()
    }

    /// Number of map operations.
    pub fn len(&self) -> usize {
        self.writes.len() + self.removes.len()
    }

    /// The removals that may go first, before anything else of this diff
    /// and before the tree the values point into changes: removals of
    /// prefixes that no write of the diff overlaps (contains, or lies
    /// inside) and that lie inside no other removal that must wait. Each
    /// takes its addresses straight to their final state (no circuit, or a
    /// covering entry that keeps its value), so a tree load that deletes
    /// a circuit's class after these never has a packet steered into the
    /// missing class, and no address is ever steered into a class that is
    /// yet to be created. The rest of the diff is computed again
    /// afterwards (`diff(applied, desired)`). The fast lengths stay those
    /// of both sets (`fast_before`).
    pub fn early_removals(&self) -> MapDiff {
        let writes = Ranges::new(self.writes.iter().map(|(k, _)| range(k)));
        let logical: hashbrown::HashSet<MapKey> =
            self.writes.iter().map(|(k, _)| k.logical()).collect();
        // Removals that wait for the writes: a prefix moving between the
        // trie and the fast map, or one a write overlaps.
        let waits = |k: &MapKey| logical.contains(&k.logical()) || writes.overlaps(range(k));
        let late = Ranges::new(self.removes.iter().filter(|k| waits(k)).map(range));
        MapDiff {
            fast_before: self.fast_before,
            writes: Vec::new(),
            // An address under a removal that waits keeps falling to it
            // until it goes: what lies inside one waits too.
            removes: self
                .removes
                .iter()
                .filter(|k| !waits(k) && !late.contains(range(k)))
                .copied()
                .collect(),
            fast_after: self.fast_before,
        }
    }

    /// Applies the diff to a set in memory (what [`crate::maps::Maps::apply`]
    /// does to the kernel's maps).
    pub fn apply_to(&self, entries: &mut Entries) {
        for (k, v) in &self.writes {
            entries.insert(*k, *v);
        }
        for k in &self.removes {
            entries.remove(k);
        }
    }
}

/// A key's addresses as an inclusive range of the IPv6 key space.
fn range(k: &MapKey) -> (u128, u128) {
    let (len, a) = k.lpm();
    let a = u128::from_be_bytes(a);
    (a, a | u128::MAX.checked_shr(len).unwrap_or(0))
}

/// Prefix ranges (any two nested or disjoint), sorted, with the farthest
/// end reached by each one and those before it.
struct Ranges {
    sorted: Vec<(u128, u128)>,
    reach: Vec<u128>,
}

impl Ranges {
    fn new(r: impl Iterator<Item = (u128, u128)>) -> Ranges {
        let mut sorted: Vec<(u128, u128)> = r.collect();
        sorted.sort_unstable();
        let mut m = 0u128;
        let reach = sorted
            .iter()
            .enumerate()
            .map(|(i, r)| {
                m = if i == 0 { r.1 } else { m.max(r.1) };
                m
            })
            .collect();
        Ranges { sorted, reach }
    }

    /// The farthest end of the ranges starting at or before `first`.
    fn reach_from(&self, first: u128) -> Option<u128> {
        let i = self.sorted.partition_point(|r| r.0 <= first);
        i.checked_sub(1).map(|j| self.reach[j])
    }

    /// Whether one range lies inside `[first, last]` or contains `first`.
    fn overlaps(&self, (first, last): (u128, u128)) -> bool {
        let i = self.sorted.partition_point(|r| r.0 < first);
        self.sorted.get(i).is_some_and(|r| r.0 <= last)
            || self.reach_from(first).is_some_and(|e| e >= first)
    }

    /// Whether one range contains all of `[first, last]`.
    fn contains(&self, (first, last): (u128, u128)) -> bool {
        self.reach_from(first).is_some_and(|e| e >= last)
    }
}

/// The ordered changes from `current` to `desired`: the fast lengths of
/// both, then writes (new keys and changed values, overwritten in place)
/// longest prefix first, then the target's fast lengths, then removals
/// shortest prefix first. Entries of one map and prefix length are
/// disjoint and come together, in no particular order. A prefix moving
/// between the LPM trie and the fast map is written in its new place
/// before it leaves the old one.
pub fn diff(current: &Entries, desired: &Entries) -> MapDiff {
    let mut writes: Vec<(MapKey, CircuitValue)> = desired
        .map
        .iter()
        .filter(|(k, v)| current.map.get(*k) != Some(*v))
        .map(|(k, v)| (*k, *v))
        .collect();
    let mut removes: Vec<MapKey> = current
        .map
        .keys()
        .filter(|k| !desired.map.contains_key(*k))
        .copied()
        .collect();
    // A handful of distinct keys: the unstable sort partitions on them in
    // a few linear passes (a cold load's writes are grouped, not sorted).
    writes.sort_unstable_by_key(|(k, _)| (std::cmp::Reverse(k.prefix_len()), k.map_rank()));
    removes.sort_unstable_by_key(|k| (k.prefix_len(), k.map_rank()));
    let fast_after = desired.fast_lens();
    MapDiff {
        fast_before: fast_after.union(&current.fast_lens()),
        writes,
        removes,
        fast_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> MapKey {
        MapKey::from_net(s.parse().unwrap())
    }

    #[test]
    fn keys_split_hosts_from_prefixes() {
        assert!(matches!(k("100.64.0.7/32"), MapKey::Host(_)));
        assert!(matches!(k("2001:db8::1/128"), MapKey::Host(_)));
        assert_eq!(k("100.64.0.9/29").prefix_len(), 96 + 29);
        assert_eq!(k("100.64.0.9/29").net().to_string(), "100.64.0.8/29");
        assert_eq!(
            k("2001:db8:1:ff00::/56").net().to_string(),
            "2001:db8:1:ff00::/56"
        );
        assert_eq!(k("100.64.0.7/32").to_string(), "100.64.0.7/32");
    }

    #[test]
    fn lookup_prefers_the_longest_prefix() {
        let v = |c| CircuitValue {
            circuit: c,
            ..Default::default()
        };
        let mut e = Entries::default();
        e.insert(k("100.64.0.0/29"), v(1));
        e.insert(k("100.64.0.3/32"), v(2));
        e.insert(k("100.64.0.0/24"), v(3));
        let c = |a: &str| e.lookup(a.parse().unwrap()).map(|(_, v)| v.circuit);
        assert_eq!(c("100.64.0.3"), Some(2));
        assert_eq!(c("100.64.0.4"), Some(1));
        assert_eq!(c("100.64.0.200"), Some(3));
        assert_eq!(c("100.65.0.1"), None);
    }

    #[test]
    fn early_removals_are_those_no_write_overlaps() {
        let v = |c| CircuitValue {
            circuit: c,
            ..Default::default()
        };
        let mut a = Entries::default();
        a.insert(k("100.64.0.3/32"), v(1)); // gone, inside a new /29: late
        a.insert(k("100.64.2.9/32"), v(2)); // gone, nothing near: early
        a.insert(k("100.64.3.0/24"), v(3)); // gone, a new /32 inside: late
        a.insert(k("100.64.4.0/24"), v(4)); // kept as it is
        a.insert(k("100.64.4.5/32"), v(5)); // gone, under the kept /24: early
        let mut b = Entries::default();
        b.insert(k("100.64.0.0/29"), v(1));
        b.insert(k("100.64.3.7/32"), v(3));
        b.insert(k("100.64.4.0/24"), v(4));
        let d = diff(&a, &b);
        let early = d.early_removals();
        assert!(early.writes.is_empty());
        let mut names: Vec<String> = early.removes.iter().map(|k| k.to_string()).collect();
        names.sort();
        assert_eq!(names, ["100.64.2.9/32", "100.64.4.5/32"]);
        assert_eq!(early.fast_after, d.fast_before);
        // Early, then the rest: the desired set.
        let mut mid = a.clone();
        early.apply_to(&mut mid);
        let rest = diff(&mid, &b);
        rest.apply_to(&mut mid);
        assert_eq!(mid, b);
    }

    #[test]
    fn diff_writes_covering_prefix_before_removing_the_host() {
        let v = |c| CircuitValue {
            circuit: c,
            ..Default::default()
        };
        let mut a = Entries::default();
        a.insert(k("100.64.0.3/32"), v(1));
        a.insert(k("100.64.1.0/24"), v(5));
        let mut b = Entries::default();
        b.insert(k("100.64.0.0/29"), v(1));
        b.insert(k("100.64.1.7/32"), v(5));
        let d = diff(&a, &b);
        assert_eq!(
            d.writes
                .iter()
                .map(|(k, _)| k.to_string())
                .collect::<Vec<_>>(),
            ["100.64.1.7/32", "100.64.0.0/29"]
        );
        assert_eq!(
            d.removes.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
            ["100.64.1.0/24", "100.64.0.3/32"]
        );
    }
}
