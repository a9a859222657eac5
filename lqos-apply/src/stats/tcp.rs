//! TCP round-trip times and retransmits per circuit and node, from the
//! eBPF data path's per-circuit aggregates (`lqos_bpf::tcp::TcpMaps`): kept
//! monotonic across entries that are made anew (a circuit that moved to
//! another classid, an entry pruned and made again, 32-bit bucket counts
//! that wrap), with percentiles of each poll's interval from the
//! histograms' differences, and nodes' histograms merged from their
//! circuits' (a node's p95 is the p95 of its circuits' samples together,
//! not an average of percentiles).
//!
//! Histograms have [`RTT_BUCKETS`] buckets a factor 2^(1/4) apart from
//! 100 µs ([`lqos_bpf::layout::rtt_bucket_upper`]); a percentile is
//! interpolated geometrically inside its bucket, so it is within about 9%
//! of the exact one.

use lqos_bpf::layout::{rtt_bucket_lower, rtt_bucket_upper, RttHist, TcpCircuit, RTT_BUCKETS};
use lqos_bpf::tcp::TcpHealth;
use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;

use lqos_bpf::layout::Side;

/// Percentiles and mean of a set of RTT samples, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RttSummary {
    /// Samples.
    pub samples: u64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Mean (exact: from the samples' sum).
    pub mean_ms: f64,
}

/// The round trips of one side of one data direction. Serialized with
/// [`RttStats::all`] as `all`.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RttStats {
    /// Samples (monotonic).
    pub samples: u64,
    /// Sum of the samples, ms (monotonic).
    pub sum_ms: f64,
    /// The samples of the last interval (`None`: none, or the first poll).
    pub recent: Option<RttSummary>,
    /// The histogram of all samples: `(bucket, count)` of each non-empty
    /// bucket (monotonic; bounds: [`lqos_bpf::layout::rtt_bucket_upper`]).
    pub buckets: Vec<(u8, u64)>,
}

impl Serialize for RttStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Buckets<'a>(&'a [(u8, u64)]);
        impl Serialize for Buckets<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                histogram(self.0, s)
            }
        }
        let mut st = s.serialize_struct("RttStats", 5)?;
        st.serialize_field("samples", &self.samples)?;
        st.serialize_field("sum_ms", &self.sum_ms)?;
        st.serialize_field("recent", &self.recent)?;
        st.serialize_field("all", &self.all())?;
        st.serialize_field("buckets", &Buckets(&self.buckets))?;
        st.end()
    }
}

impl RttStats {
    /// Percentiles and mean of all samples counted (since lqos first saw
    /// the circuit's entry), from the histogram.
    pub fn all(&self) -> Option<RttSummary> {
        let pairs = self.buckets.iter().map(|&(k, n)| (usize::from(k), n));
        summary(pairs, self.samples, (self.sum_ms * 1e6) as u64)
    }

    /// The summary to show: the interval's, else all samples'.
    pub fn summary(&self) -> Option<RttSummary> {
        self.recent.or_else(|| self.all())
    }

    /// Cumulative counts at each bucket bound (`le` of a Prometheus
    /// histogram): `(bucket index, samples up to its upper bound)`.
    pub fn cumulative(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let mut sum = 0;
        let mut it = self.buckets.iter().peekable();
        (0..RTT_BUCKETS).map(move |k| {
            while let Some(&&(b, n)) = it.peek() {
                if usize::from(b) > k {
                    break;
                }
                sum += n;
                it.next();
            }
            (k, sum)
        })
    }
}

/// Each non-empty bucket as `{from_ms, to_ms, count}`.
fn histogram<S: Serializer>(b: &[(u8, u64)], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Bucket {
        /// Lower bound, ms.
        from_ms: f64,
        /// Upper bound, ms (`null`: none).
        to_ms: Option<f64>,
        count: u64,
    }
    let mut seq = s.serialize_seq(Some(b.len()))?;
    for &(k, count) in b {
        let k = usize::from(k);
        let to = rtt_bucket_upper(k);
        seq.serialize_element(&Bucket {
            from_ms: rtt_bucket_lower(k) * 1e3,
            to_ms: to.is_finite().then_some(to * 1e3),
            count,
        })?;
    }
    seq.end()
}

/// One data direction of a circuit's or node's TCP flows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TcpDir {
    /// Round trips from the shaper to the subscriber and back (the last
    /// mile and the shaper's own queue).
    pub subscriber: RttStats,
    /// Round trips from the shaper to the far end and back.
    pub internet: RttStats,
    /// Segments sent again this way (monotonic).
    pub retransmits: u64,
    /// Retransmits per second over the last interval.
    pub retransmit_rate: f64,
}

impl TcpDir {
    /// The side `side`.
    pub fn side(&self, side: Side) -> &RttStats {
        match side {
            Side::Subscriber => &self.subscriber,
            Side::Internet => &self.internet,
        }
    }
}

/// A circuit's or node's TCP statistics, by the direction the flows'
/// data goes (a flow's way with more bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TcpStats {
    /// Flows carrying data towards the subscribers.
    pub download: TcpDir,
    /// Flows carrying data towards the internet.
    pub upload: TcpDir,
    /// TCP flows seen (monotonic).
    pub flows: u64,
    /// Of those, flows without TCP timestamps: not measured (monotonic).
    pub unmeasured_flows: u64,
}

impl TcpStats {
    /// The direction `d`.
    pub fn dir(&self, d: super::Dir) -> &TcpDir {
        match d {
            super::Dir::Download => &self.download,
            super::Dir::Upload => &self.upload,
        }
    }

    /// The worst p95 of any direction and side (the interval's, else all
    /// samples'), ms.
    pub fn worst_p95_ms(&self) -> Option<f64> {
        [&self.download, &self.upload]
            .iter()
            .flat_map(|d| [&d.subscriber, &d.internet])
            .filter_map(|r| r.summary().map(|s| s.p95_ms))
            .max_by(f64::total_cmp)
    }

    /// Retransmits per second, both directions.
    pub fn retransmit_rate(&self) -> f64 {
        self.download.retransmit_rate + self.upload.retransmit_rate
    }
}

/// The eBPF data path's TCP tracking: its flow table and circuit map.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TcpDataPath {
    /// Entries of the flow table.
    pub flow_table_size: u32,
    /// Flows in it (estimated: entered, not closed, at most its size).
    pub flows_tracked: u64,
    /// Its fill, 0 to 1.
    pub flow_table_fill: f64,
    /// Flows entered (monotonic, since the data path was loaded).
    pub flows_entered: u64,
    /// Flows taken out on a RST or FINs both ways.
    pub flows_closed: u64,
    /// Flows the LRU evicted for new ones (estimated).
    pub flows_evicted: u64,
    /// Flows that could not be entered.
    pub flows_failed: u64,
    /// RTT samples taken.
    pub samples: u64,
    /// Samples per second over the last interval.
    pub sample_rate: f64,
    /// Circuits with TCP statistics in the kernel now.
    pub circuits: u32,
    /// Capacity of the circuits' map.
    pub circuit_capacity: u32,
    /// Circuits that found it full (their TCP statistics are missing).
    pub circuits_full: u64,
}

impl TcpDataPath {
    pub(super) fn of(h: &TcpHealth, sample_rate: f64) -> TcpDataPath {
        TcpDataPath {
            flow_table_size: h.flow_table_size,
            flows_tracked: h.flows_tracked(),
            flow_table_fill: h.flow_fill(),
            flows_entered: h.flows_new,
            flows_closed: h.flows_closed,
            flows_evicted: h.evictions(),
            flows_failed: h.flows_failed,
            samples: h.samples,
            sample_rate,
            circuits: h.circuits,
            circuit_capacity: h.circuit_capacity,
            circuits_full: h.circuits_full,
        }
    }
}

/// Dense counts of one histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hist {
    count: u64,
    sum_ns: u64,
    buckets: [u64; RTT_BUCKETS],
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            count: 0,
            sum_ns: 0,
            buckets: [0; RTT_BUCKETS],
        }
    }
}

impl Hist {
    fn add(&mut self, o: &Hist) {
        self.count += o.count;
        self.sum_ns = self.sum_ns.wrapping_add(o.sum_ns);
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
    }

    fn of_kernel(h: &RttHist) -> Hist {
        let mut out = Hist {
            count: h.count,
            sum_ns: h.sum_ns,
            ..Hist::default()
        };
        for (a, b) in out.buckets.iter_mut().zip(&h.buckets) {
            *a = u64::from(*b);
        }
        out
    }

    /// The `q` quantile (0..1), seconds (see [`quantile`]).
    #[cfg(test)]
    fn quantile(&self, q: f64) -> Option<f64> {
        let nonzero = self.buckets.iter().enumerate().map(|(k, n)| (k, *n));
        quantile(nonzero, q)
    }

    fn summary(&self) -> Option<RttSummary> {
        let pairs = self.buckets.iter().enumerate().map(|(k, n)| (k, *n));
        summary(pairs, self.count, self.sum_ns)
    }

    fn stats(&self, recent: Option<&Hist>) -> RttStats {
        let buckets: Vec<(u8, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k as u8, *n))
            .collect();
        RttStats {
            samples: self.count,
            sum_ms: self.sum_ns as f64 / 1e6,
            recent: recent.and_then(Hist::summary),
            buckets,
        }
    }
}

/// The value at rank `rank` (of samples counted per bucket) that falls
/// in bucket `k` holding `n` samples with `below` samples in lower
/// buckets, seconds: geometric interpolation inside the bucket (linear in
/// the first, the lower bound in the last).
fn in_bucket(k: usize, n: u64, below: u64, rank: f64) -> f64 {
    let f = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
    let (lo, hi) = (rtt_bucket_lower(k), rtt_bucket_upper(k));
    // Buckets are a factor 2^(1/4) wide: lo * 2^(f/4) inside one.
    if k == 0 {
        hi * f
    } else if hi.is_infinite() {
        lo
    } else {
        lo * (f / 4.0).exp2()
    }
}

/// The quantiles `qs` (each 0..1, ascending) of the samples counted per
/// bucket (`(bucket, count)` in bucket order), seconds, in one pass (see
/// [`in_bucket`]). `None`: no samples.
fn quantiles<const N: usize>(
    buckets: impl Iterator<Item = (usize, u64)> + Clone,
    qs: [f64; N],
) -> Option<[f64; N]> {
    let total: u64 = buckets.clone().map(|(_, n)| n).sum();
    if total == 0 {
        return None;
    }
    let ranks = qs.map(|q| (q * total as f64).max(f64::MIN_POSITIVE));
    let mut out = [rtt_bucket_lower(RTT_BUCKETS - 1); N];
    let mut next = 0;
    let mut below = 0u64;
    for (k, n) in buckets {
        if n == 0 {
            continue;
        }
        while next < N && (below + n) as f64 >= ranks[next] {
            out[next] = in_bucket(k, n, below, ranks[next]);
            next += 1;
        }
        if next == N {
            break;
        }
        below += n;
    }
    Some(out)
}

/// The `q` quantile (0..1) of the samples counted per bucket, seconds
/// (see [`quantiles`]).
#[cfg(test)]
fn quantile(buckets: impl Iterator<Item = (usize, u64)> + Clone, q: f64) -> Option<f64> {
    quantiles(buckets, [q]).map(|[v]| v)
}

/// Percentiles and mean of `count` samples summing to `sum_ns`, counted
/// per bucket in `buckets`.
fn summary(
    buckets: impl Iterator<Item = (usize, u64)> + Clone,
    count: u64,
    sum_ns: u64,
) -> Option<RttSummary> {
    if count == 0 {
        return None;
    }
    let [p50, p95, p99] = quantiles(buckets, [0.5, 0.95, 0.99]).unwrap_or([0.0; 3]);
    Some(RttSummary {
        samples: count,
        p50_ms: p50 * 1e3,
        p95_ms: p95 * 1e3,
        p99_ms: p99 * 1e3,
        mean_ms: sum_ns as f64 / count as f64 / 1e6,
    })
}

/// Dense TCP counts of a circuit or node: totals or one interval's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Totals {
    /// `[data direction][side]`.
    rtt: [[Hist; 2]; 2],
    retransmits: [u64; 2],
    flows: u64,
    unmeasured: u64,
}

impl Totals {
    fn of_kernel(c: &TcpCircuit) -> Totals {
        let h = |d: usize, s: usize| Hist::of_kernel(&c.rtt[d][s]);
        Totals {
            rtt: [[h(0, 0), h(0, 1)], [h(1, 0), h(1, 1)]],
            retransmits: c.retransmits,
            flows: c.flows,
            unmeasured: c.unmeasured,
        }
    }

    pub(super) fn add(&mut self, o: &Totals) {
        for (a, b) in self.rtt.iter_mut().flatten().zip(o.rtt.iter().flatten()) {
            a.add(b);
        }
        for (a, b) in self.retransmits.iter_mut().zip(o.retransmits) {
            *a += b;
        }
        self.flows += o.flows;
        self.unmeasured += o.unmeasured;
    }

    /// The output of these totals with the interval `recent` (its
    /// percentiles and rates over `dt` seconds).
    pub(super) fn stats(&self, recent: Option<&Totals>, dt: Option<f64>) -> TcpStats {
        let rate = |x: u64| dt.map_or(0.0, |d| x as f64 / d);
        let dir = |d: usize| TcpDir {
            subscriber: self.rtt[d][0].stats(recent.map(|r| &r.rtt[d][0])),
            internet: self.rtt[d][1].stats(recent.map(|r| &r.rtt[d][1])),
            retransmits: self.retransmits[d],
            retransmit_rate: recent.map_or(0.0, |r| rate(r.retransmits[d])),
        };
        TcpStats {
            download: dir(0),
            upload: dir(1),
            flows: self.flows,
            unmeasured_flows: self.unmeasured,
        }
    }
}

/// One histogram's growth in one interval: count, sum and the buckets
/// that grew.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SparseHist {
    count: u64,
    sum_ns: u64,
    buckets: Vec<(u8, u64)>,
}

impl SparseHist {
    fn summary(&self) -> Option<RttSummary> {
        let pairs = self.buckets.iter().map(|&(k, n)| (usize::from(k), n));
        summary(pairs, self.count, self.sum_ns)
    }
}

/// What a circuit's entry added in one interval (sparse; one value is
/// reused from circuit to circuit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Delta {
    /// `[data direction][side]`.
    rtt: [[SparseHist; 2]; 2],
    retransmits: [u64; 2],
    flows: u64,
    unmeasured: u64,
}

impl Delta {
    /// Samples bucket `k` of histogram `[d][s]` gained.
    #[cfg(test)]
    fn bucket(&self, d: usize, s: usize, k: usize) -> u64 {
        let b = &self.rtt[d][s].buckets;
        b.iter()
            .find(|(i, _)| usize::from(*i) == k)
            .map_or(0, |x| x.1)
    }
}

impl Totals {
    /// Adds an interval's growth.
    pub(super) fn add_delta(&mut self, o: &Delta) {
        for (a, b) in self.rtt.iter_mut().flatten().zip(o.rtt.iter().flatten()) {
            a.count += b.count;
            a.sum_ns = a.sum_ns.wrapping_add(b.sum_ns);
            for &(k, n) in &b.buckets {
                a.buckets[usize::from(k)] += n;
            }
        }
        for (a, b) in self.retransmits.iter_mut().zip(o.retransmits) {
            *a += b;
        }
        self.flows += o.flows;
        self.unmeasured += o.unmeasured;
    }
}

/// A circuit's kernel entry as last read, and what entries before it
/// counted, so totals stay monotonic.
#[derive(Debug, Clone, Default)]
pub(super) struct TcpAcc {
    /// The entry `last` is of (`None`: no entry now).
    key: Option<lqos_bpf::layout::TcpKey>,
    /// Its values at the last poll (zero with no entry).
    last: TcpCircuit,
    /// What earlier entries counted, and 2^32 per wrap of a bucket.
    base: Option<Box<Totals>>,
    /// The last output, when it had no interval's samples (or rates): the
    /// next poll without new ones has the same and shares it.
    idle: Option<std::sync::Arc<TcpStats>>,
}

/// Whether `now` cannot follow `last` in one entry (a counter went down:
/// the entry was made anew).
fn restarted(last: &TcpCircuit, now: &TcpCircuit) -> bool {
    let hists = last
        .rtt
        .iter()
        .flatten()
        .zip(now.rtt.iter().flatten())
        .any(|(a, b)| b.count < a.count || b.sum_ns < a.sum_ns);
    hists
        || now.flows < last.flows
        || now.unmeasured < last.unmeasured
        || now.retransmits[0] < last.retransmits[0]
        || now.retransmits[1] < last.retransmits[1]
}

impl TcpAcc {
    /// Whether it has an entry in the kernel now.
    pub(super) fn present(&self) -> bool {
        self.key.is_some()
    }

    /// Whether it has counted anything.
    pub(super) fn seen(&self) -> bool {
        self.key.is_some() || self.base.is_some()
    }

    /// The output of this poll: `changed` (what [`TcpAcc::update`] said,
    /// or `true` when the entry is gone), the interval's `recent`.
    pub(super) fn output(
        &mut self,
        changed: bool,
        recent: Option<&Delta>,
        dt: Option<f64>,
    ) -> std::sync::Arc<TcpStats> {
        if !changed {
            if let Some(out) = &self.idle {
                return out.clone();
            }
        }
        let out = std::sync::Arc::new(self.stats(recent.filter(|_| changed), dt));
        self.idle = (!changed || recent.is_none()).then(|| out.clone());
        out
    }

    /// The entry is gone: what it counted joins the base.
    pub(super) fn retire(&mut self) {
        if self.key.take().is_some() {
            self.idle = None;
            let last = Totals::of_kernel(&self.last);
            self.base.get_or_insert_with(Default::default).add(&last);
            self.last = TcpCircuit::default();
        }
    }

    /// Takes entry `key`'s values `now`; returns whether they added
    /// anything, and then what in `delta` (left as it was otherwise).
    pub(super) fn update(
        &mut self,
        key: lqos_bpf::layout::TcpKey,
        now: &TcpCircuit,
        delta: &mut Delta,
    ) -> bool {
        if self.key == Some(key) && self.last == *now {
            return false;
        }
        if self.key != Some(key) || restarted(&self.last, now) {
            self.retire();
        }
        self.idle = None;
        let last = &mut self.last;
        let mut any = false;
        for (d, s) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let (a, b) = (&mut last.rtt[d][s], &now.rtt[d][s]);
            let out = &mut delta.rtt[d][s];
            out.buckets.clear();
            out.count = b.count - a.count;
            out.sum_ns = b.sum_ns - a.sum_ns;
            any |= out.count > 0;
            // (Every bucket compared: the kernel adds to the count before
            // the bucket, so a read between the two sees a bucket grow in
            // the next poll with no change of count.)
            for (k, (x, &y)) in a.buckets.iter_mut().zip(&b.buckets).enumerate() {
                if *x == y {
                    continue;
                }
                out.buckets.push((k as u8, u64::from(y.wrapping_sub(*x))));
                if y < *x {
                    // The 32-bit count wrapped.
                    self.base.get_or_insert_with(Default::default).rtt[d][s].buckets[k] += 1 << 32;
                }
                *x = y;
            }
            any |= !out.buckets.is_empty();
            a.count = b.count;
            a.sum_ns = b.sum_ns;
        }
        for i in 0..2 {
            delta.retransmits[i] = now.retransmits[i] - last.retransmits[i];
        }
        delta.flows = now.flows - last.flows;
        delta.unmeasured = now.unmeasured - last.unmeasured;
        any |= delta.retransmits != [0, 0] || delta.flows > 0 || delta.unmeasured > 0;
        last.retransmits = now.retransmits;
        last.flows = now.flows;
        last.unmeasured = now.unmeasured;
        self.key = Some(key);
        any
    }

    /// Everything counted: the base and the current entry.
    #[cfg(test)]
    pub(super) fn totals(&self) -> Totals {
        let mut t = Totals::of_kernel(&self.last);
        if let Some(b) = &self.base {
            t.add(b);
        }
        t
    }

    /// The output of everything counted, with the interval `recent` (its
    /// percentiles and rates over `dt` seconds). Built from the kernel's
    /// last values and the base directly (no dense copy).
    pub(super) fn stats(&self, recent: Option<&Delta>, dt: Option<f64>) -> TcpStats {
        let rate = |x: u64| dt.map_or(0.0, |d| x as f64 / d);
        let base = self.base.as_deref();
        let side = |d: usize, s: usize| {
            let h = &self.last.rtt[d][s];
            let b = base.map(|b| &b.rtt[d][s]);
            let mut buckets = Vec::new();
            match b {
                // The common case: the kernel's counts alone.
                None if h.count > 0 => {
                    let n = h.buckets.iter().filter(|&&n| n > 0).count();
                    buckets.reserve_exact(n);
                    for (k, &n) in h.buckets.iter().enumerate() {
                        if n > 0 {
                            buckets.push((k as u8, u64::from(n)));
                        }
                    }
                }
                None => {}
                Some(b) => {
                    for k in 0..RTT_BUCKETS {
                        let n = u64::from(h.buckets[k]) + b.buckets[k];
                        if n > 0 {
                            buckets.push((k as u8, n));
                        }
                    }
                }
            }
            let count = h.count + b.map_or(0, |b| b.count);
            let sum_ns = h.sum_ns.wrapping_add(b.map_or(0, |b| b.sum_ns));
            RttStats {
                samples: count,
                sum_ms: sum_ns as f64 / 1e6,
                recent: recent.and_then(|r| r.rtt[d][s].summary()),
                buckets,
            }
        };
        let dir = |d: usize| TcpDir {
            subscriber: side(d, 0),
            internet: side(d, 1),
            retransmits: self.last.retransmits[d] + base.map_or(0, |b| b.retransmits[d]),
            retransmit_rate: recent.map_or(0.0, |r| rate(r.retransmits[d])),
        };
        TcpStats {
            download: dir(0),
            upload: dir(1),
            flows: self.last.flows + base.map_or(0, |b| b.flows),
            unmeasured_flows: self.last.unmeasured + base.map_or(0, |b| b.unmeasured),
        }
    }
}

/// Buckets of the Prometheus histograms: every fourth bound (octaves,
/// 100 µs to 6.55 s), then `+Inf`.
pub const EXPOSED_BUCKETS: [(usize, &str); 18] = [
    (0, "0.0001"),
    (4, "0.0002"),
    (8, "0.0004"),
    (12, "0.0008"),
    (16, "0.0016"),
    (20, "0.0032"),
    (24, "0.0064"),
    (28, "0.0128"),
    (32, "0.0256"),
    (36, "0.0512"),
    (40, "0.1024"),
    (44, "0.2048"),
    (48, "0.4096"),
    (52, "0.8192"),
    (56, "1.6384"),
    (60, "3.2768"),
    (64, "6.5536"),
    (RTT_BUCKETS - 1, "+Inf"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(samples: &[(usize, u64)]) -> Hist {
        let mut h = Hist::default();
        for &(k, n) in samples {
            h.buckets[k] += n;
            h.count += n;
        }
        h
    }

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        // 100 samples in bucket 35 (40 ms is in it: 33.6 to 40.0 ms).
        let h = hist(&[(35, 100)]);
        let p50 = h.quantile(0.5).unwrap();
        assert!(
            p50 > rtt_bucket_lower(35) && p50 < rtt_bucket_upper(35),
            "{p50}"
        );
        // 90 fast, 10 slow: p50 among the fast, p95 among the slow.
        let h = hist(&[(10, 90), (40, 10)]);
        assert!(h.quantile(0.5).unwrap() < rtt_bucket_upper(10));
        assert!(h.quantile(0.95).unwrap() > rtt_bucket_lower(40));
        assert_eq!(Hist::default().quantile(0.5), None);
        // The last bucket has no upper bound: its lower one.
        let h = hist(&[(RTT_BUCKETS - 1, 3)]);
        assert_eq!(h.quantile(0.99), Some(rtt_bucket_lower(RTT_BUCKETS - 1)));
    }

    fn kernel(count: u64, bucket: usize, n: u32) -> TcpCircuit {
        let mut c = TcpCircuit::default();
        c.rtt[0][0].count = count;
        c.rtt[0][0].sum_ns = count * 1000;
        c.rtt[0][0].buckets[bucket] = n;
        c.flows = 1;
        c
    }

    #[test]
    fn totals_stay_monotonic_across_new_entries_and_wraps() {
        let k1 = lqos_bpf::layout::TcpKey { classid: 1, tag: 1 };
        let k2 = lqos_bpf::layout::TcpKey { classid: 2, tag: 1 };
        let mut a = TcpAcc::default();
        let mut d = Delta::default();
        assert!(a.update(k1, &kernel(10, 5, 10), &mut d));
        assert_eq!(d.rtt[0][0].count, 10);
        assert!(a.update(k1, &kernel(15, 5, 15), &mut d));
        assert_eq!((d.rtt[0][0].count, d.bucket(0, 0, 5), d.flows), (5, 5, 0));
        // Nothing new.
        assert!(!a.update(k1, &kernel(15, 5, 15), &mut d));
        // The circuit moved to another classid: a new entry, counted whole.
        a.update(k2, &kernel(3, 5, 3), &mut d);
        assert_eq!(d.rtt[0][0].count, 3);
        assert_eq!(a.totals().rtt[0][0].count, 18);
        assert_eq!(a.totals().flows, 2);
        // The same entry made anew (counters went down).
        a.update(k2, &kernel(1, 5, 1), &mut d);
        assert_eq!(d.rtt[0][0].count, 1);
        assert_eq!(a.totals().rtt[0][0].buckets[5], 19);
        // A 32-bit bucket wraps: the difference is right, the total too.
        let mut x = kernel(100, 6, u32::MAX - 1);
        a.update(k2, &x, &mut d);
        x.rtt[0][0].count += 5;
        x.rtt[0][0].buckets[6] = 3;
        a.update(k2, &x, &mut d);
        assert_eq!(d.bucket(0, 0, 6), 5);
        assert_eq!(a.totals().rtt[0][0].buckets[6], u64::from(u32::MAX) + 4);
        // The output is that of the totals.
        assert_eq!(a.stats(None, None), a.totals().stats(None, None));
        // Gone from the map: what it counted stays.
        let before = a.totals();
        a.retire();
        assert_eq!(a.totals(), before);
    }

    #[test]
    fn cumulative_counts_for_the_exposition() {
        let s = hist(&[(0, 1), (3, 2), (68, 4)]).stats(None);
        let c: Vec<(usize, u64)> = s.cumulative().collect();
        assert_eq!(c[0], (0, 1));
        assert_eq!(c[2], (2, 1));
        assert_eq!(c[3], (3, 3));
        assert_eq!(c[68], (68, 7));
        assert_eq!(
            serde_json::to_value(&s).unwrap()["buckets"][1],
            serde_json::json!({"from_ms": rtt_bucket_lower(3) * 1e3, "to_ms": rtt_bucket_upper(3) * 1e3, "count": 2})
        );
        assert!(serde_json::to_value(&s).unwrap()["buckets"][2]["to_ms"].is_null());
    }
}
