//! `lqos stats`: one snapshot of per-circuit statistics (two polls an
//! interval apart, for rates), as a table or JSON. Also the selection,
//! sorting and formatting `lqos top` shares.

use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::live::NetlinkLive;
use lqos_apply::stats::tcp::{RttStats, TcpDataPath, TcpStats};
use lqos_apply::stats::{CircuitStats, Dir, DirStats, NodeStats, Stats, StatsPoll, Unclassified};
use serde::Serialize;

use super::apply::{applied_plan, TargetArgs};
use super::{Done, Outcome};
use crate::out::{out, outln};

/// What to sort circuits by (highest first).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Download rate (then upload).
    #[default]
    Rate,
    /// Drops per second (total drops without an interval).
    Drops,
    /// The worst cake tin delay.
    Delay,
    /// The worst TCP round trip (p95 of any direction and side).
    Rtt,
    /// TCP retransmits per second (total retransmits without an interval).
    Retransmits,
}

impl SortKey {
    /// The next key (for `lqos top`'s key).
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Rate => SortKey::Drops,
            SortKey::Drops => SortKey::Delay,
            SortKey::Delay => SortKey::Rtt,
            SortKey::Rtt => SortKey::Retransmits,
            SortKey::Retransmits => SortKey::Rate,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Rate => "rate",
            SortKey::Drops => "drops",
            SortKey::Delay => "delay",
            SortKey::Rtt => "rtt",
            SortKey::Retransmits => "retransmits",
        }
    }
}

/// Arguments of `lqos stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory (the plan is the last one applied).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print JSON (every counter, cake's tins, fq_codel's statistics, TCP
    /// round trips with their histograms).
    #[arg(long)]
    pub json: bool,
    /// Only this circuit (by Circuit ID).
    #[arg(long, value_name = "ID")]
    pub circuit: Option<String>,
    /// Only the circuits below this node (site or AP), and the node itself.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Only the first N circuits after sorting.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Sort circuits by this (highest first).
    #[arg(long, value_enum, default_value_t = SortKey::Rate)]
    pub sort: SortKey,
    /// Seconds between the two polls the rates come from (0: one poll,
    /// counters only).
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
}

/// `unclassified (default classes, addresses no circuit has): down 1.2/999.0
/// (0%), up ..., drops/s 0.0`: traffic no circuit's class took.
pub fn unclassified_line(u: &Unclassified) -> String {
    format!(
        "unclassified (the default classes: addresses no circuit has): down {}, up {}, {:.1} drops/s",
        rate_of_ceil(&u.download),
        rate_of_ceil(&u.upload),
        u.download.drop_rate + u.upload.drop_rate
    )
}

/// Which circuits to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Circuit ID, exact.
    pub circuit: Option<String>,
    /// A node name: circuits below it.
    pub node: Option<String>,
    /// Text in the ID, name or parent (case-insensitive; `lqos top`'s `/`).
    pub text: Option<String>,
}

/// The names of `node` and every node below it.
fn subtree(stats: &Stats, node: &str) -> std::collections::HashSet<String> {
    let mut set = std::collections::HashSet::new();
    set.insert(node.to_string());
    // Nodes come parents first.
    for n in &stats.nodes {
        if n.parent.as_ref().is_some_and(|p| set.contains(p)) {
            set.insert(n.name.clone());
        }
    }
    set
}

/// The sort value of a circuit.
fn key(c: &CircuitStats, k: SortKey, have_rates: bool) -> f64 {
    match k {
        SortKey::Rate => c.download.rate_bps + c.upload.rate_bps * 1e-9,
        SortKey::Drops if have_rates => c.download.drop_rate + c.upload.drop_rate,
        SortKey::Drops => (c.download.drops + c.upload.drops) as f64,
        SortKey::Delay => f64::from(
            c.download
                .worst_delay_us()
                .max(c.upload.worst_delay_us())
                .unwrap_or(0),
        ),
        SortKey::Rtt => c
            .tcp
            .as_deref()
            .and_then(TcpStats::worst_p95_ms)
            .unwrap_or(0.0),
        SortKey::Retransmits => c.tcp.as_deref().map_or(0.0, |t| {
            if have_rates {
                t.retransmit_rate()
            } else {
                (t.download.retransmits + t.upload.retransmits) as f64
            }
        }),
    }
}

/// The selected circuits, sorted (highest first, ties by ID), at most `top`.
pub fn select<'a>(
    stats: &'a Stats,
    f: &Filter,
    sort: SortKey,
    top: Option<usize>,
) -> Vec<&'a CircuitStats> {
    let under = f.node.as_deref().map(|n| subtree(stats, n));
    let text = f.text.as_deref().map(str::to_lowercase);
    let mut v: Vec<&CircuitStats> = stats
        .circuits
        .iter()
        .filter(|c| f.circuit.as_deref().is_none_or(|id| c.id == id))
        .filter(|c| under.as_ref().is_none_or(|s| s.contains(&c.parent)))
        .filter(|c| {
            text.as_deref().is_none_or(|t| {
                [c.id.as_str(), c.name.as_str(), c.parent.as_str()]
                    .iter()
                    .any(|s| s.to_lowercase().contains(t))
            })
        })
        .collect();
    let rates = stats.interval_secs.is_some();
    // Ties (no drops, no cake delay, no TCP at all) go busiest first, then
    // by ID.
    v.sort_by(|a, b| {
        key(b, sort, rates)
            .total_cmp(&key(a, sort, rates))
            .then_with(|| key(b, SortKey::Rate, rates).total_cmp(&key(a, SortKey::Rate, rates)))
            .then_with(|| a.id.cmp(&b.id))
    });
    if let Some(n) = top {
        v.truncate(n);
    }
    v
}

/// The nodes to show: `--node`'s subtree, else every node, busiest first.
pub fn select_nodes<'a>(stats: &'a Stats, f: &Filter) -> Vec<&'a NodeStats> {
    let under = f.node.as_deref().map(|n| subtree(stats, n));
    let text = f.text.as_deref().map(str::to_lowercase);
    let mut v: Vec<&NodeStats> = stats
        .nodes
        .iter()
        .filter(|n| under.as_ref().is_none_or(|s| s.contains(&n.name)))
        .filter(|n| {
            text.as_deref()
                .is_none_or(|t| n.name.to_lowercase().contains(t))
        })
        .collect();
    v.sort_by(|a, b| {
        b.download
            .utilisation()
            .total_cmp(&a.download.utilisation())
            .then_with(|| a.name.cmp(&b.name))
    });
    v
}

/// Text from the input files, safe for a terminal: control characters
/// become `?`, at most `width` characters.
pub fn clean(s: &str, width: usize) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(width)
        .collect()
}

/// `12.3` (Mbit/s of bits/s).
pub fn mbit(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

/// `rate/ceil (pct%)` of one direction.
pub fn rate_of_ceil(d: &DirStats) -> String {
    if d.ceil_bps == 0 {
        return mbit(d.rate_bps);
    }
    format!(
        "{}/{} ({:.0}%)",
        mbit(d.rate_bps),
        mbit(d.ceil_bps as f64),
        100.0 * d.utilisation()
    )
}

/// The p95 of side `side` (the worse direction's; the interval's, else all
/// samples'), ms.
pub fn p95_ms(t: &TcpStats, side: lqos_bpf::layout::Side) -> Option<f64> {
    Dir::BOTH
        .iter()
        .filter_map(|&d| t.dir(d).side(side).summary().map(|s| s.p95_ms))
        .max_by(f64::total_cmp)
}

/// `subscriber/internet` TCP round trip p95 in ms (`41.2/20.3`), `-` for
/// a side without samples or a circuit without TCP.
pub fn rtt(t: Option<&TcpStats>) -> String {
    use lqos_bpf::layout::Side;
    let Some(t) = t else { return "-".into() };
    let f = |side| p95_ms(t, side).map_or("-".to_string(), |v| format!("{v:.1}"));
    format!("{}/{}", f(Side::Subscriber), f(Side::Internet))
}

/// TCP retransmits per second, both directions, or `-` without TCP.
pub fn retransmits(t: Option<&TcpStats>) -> String {
    t.map_or("-".into(), |t| format!("{:.1}", t.retransmit_rate()))
}

/// `p50/p95/p99` of `r` in ms, or `-`.
fn percentiles(r: &RttStats) -> String {
    r.summary().map_or("-".into(), |s| {
        format!("{:.1}/{:.1}/{:.1}", s.p50_ms, s.p95_ms, s.p99_ms)
    })
}

/// The worst tin delay of both directions, in ms, or `-`.
pub fn delay(c: &CircuitStats) -> String {
    match c.download.worst_delay_us().max(c.upload.worst_delay_us()) {
        Some(us) => format!("{:.1}", f64::from(us) / 1e3),
        None => "-".into(),
    }
}

/// The eBPF data path whose TCP statistics `lqos stats` and `lqos top`
/// read: the one pinned for `target`'s namespace, when it has them.
pub fn tcp_source(target: &TargetArgs) -> Option<std::path::PathBuf> {
    let dir = target.state().bpf_pin_dir();
    dir.join(lqos_bpf::layout::names::TCP)
        .exists()
        .then_some(dir)
}

/// Polls twice `interval` apart (once for 0) and returns the last stats.
pub fn snapshot(
    live: &NetlinkLive,
    poll: &mut StatsPoll,
    start: Instant,
    interval: Duration,
) -> anyhow::Result<Stats> {
    let leaves = true;
    let mut s = poll.poll(live, leaves, start.elapsed())?;
    if !interval.is_zero() {
        std::thread::sleep(interval);
        s = poll.poll(live, leaves, start.elapsed())?;
    }
    Ok(s.stats)
}

/// The plan of the last successful apply (what the kernel holds).
pub fn last_plan(target: &TargetArgs) -> anyhow::Result<lqos_tc::Plan> {
    Ok(applied_plan(target)?
        .with_context(|| {
            format!(
                "no plan was applied successfully yet (state dir {}): nothing to read statistics of",
                target.state().path().display()
            )
        })?
        .plan)
}

#[derive(Serialize)]
struct JsonOut<'a> {
    interval_secs: Option<f64>,
    circuits: Vec<&'a CircuitStats>,
    nodes: Vec<&'a NodeStats>,
    unclassified: &'a Unclassified,
    /// lqos's eBPF classifier's per-CPU counters, when it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    datapath: Option<lqos_apply::datapath::Counters>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp: Option<&'a TcpDataPath>,
}

/// The eBPF classifier's counters, when the plan has it and it is
/// installed in this namespace.
fn datapath_counters(
    plan: &lqos_tc::Plan,
    target: &TargetArgs,
) -> anyhow::Result<Option<lqos_apply::datapath::Counters>> {
    let pins = target.state().bpf_pin_dir();
    if plan.config.classifier != lqos_model::config::Classifier::Bpf || !lqos_bpf::installed(&pins)
    {
        return Ok(None);
    }
    let cpus = lqos_bpf::plan::CpuPolicy::online()
        .unwrap_or_else(|_| lqos_bpf::plan::CpuPolicy::new(vec![0]));
    Ok(Some(lqos_apply::datapath::counters(&pins, plan, &cpus)?))
}

/// Runs `lqos stats`.
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos stats`", false, args.target.netns.is_some())?;
    if !(args.interval.is_finite() && args.interval >= 0.0 && args.interval <= 3600.0) {
        anyhow::bail!("--interval {}: give 0 to 3600 seconds", args.interval);
    }
    let plan = last_plan(&args.target)?;
    let live = NetlinkLive::new(args.target.netns.clone());
    let mut poll = StatsPoll::new(&plan).with_tcp(tcp_source(&args.target));
    let stats = snapshot(
        &live,
        &mut poll,
        Instant::now(),
        Duration::from_secs_f64(args.interval),
    )?;
    let filter = Filter {
        circuit: args.circuit.clone(),
        node: args.node.clone(),
        text: None,
    };
    if let Some(id) = &args.circuit {
        if !stats.circuits.iter().any(|c| c.id == id.as_str()) {
            anyhow::bail!("no circuit {id:?} in the plan");
        }
    }
    if let Some(n) = &args.node {
        if !stats.nodes.iter().any(|x| &x.name == n) {
            anyhow::bail!("no node {n:?} in the plan");
        }
    }
    let circuits = select(&stats, &filter, args.sort, args.top);
    let nodes = if args.circuit.is_some() {
        Vec::new()
    } else {
        select_nodes(&stats, &filter)
    };
    let datapath = datapath_counters(&plan, &args.target)?;
    if args.json {
        let out = JsonOut {
            interval_secs: stats.interval_secs,
            circuits,
            nodes,
            unclassified: &stats.unclassified,
            datapath,
            tcp: stats.tcp.as_ref(),
        };
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(Done::Ok);
    }
    out!(
        "{}",
        table(
            &circuits,
            &nodes,
            args.top.is_none() && args.circuit.is_none()
        )
    )?;
    if circuits.iter().any(|c| c.tcp.is_some()) {
        out!("\n{}", tcp_table(&circuits))?;
    }
    if args.circuit.is_none() && args.node.is_none() {
        outln!("\n{}", unclassified_line(&stats.unclassified))?;
        if let Some(t) = &stats.tcp {
            outln!("{}", tcp_line(t))?;
        }
        if let Some(c) = &datapath {
            outln!("{c}")?;
        }
    }
    Ok(Done::Ok)
}

/// The data path's TCP tracking in one line.
pub fn tcp_line(t: &TcpDataPath) -> String {
    format!(
        "TCP tracking: {} flows in a table of {} ({:.0}% full, {} evicted), {:.0} RTT samples/s, {} circuits measured{}",
        t.flows_tracked,
        t.flow_table_size,
        100.0 * t.flow_table_fill,
        t.flows_evicted,
        t.sample_rate,
        t.circuits,
        if t.circuits_full > 0 {
            format!(" ({} found the map full)", t.circuits_full)
        } else {
            String::new()
        }
    )
}

/// Per circuit with TCP flows and direction with samples or retransmits:
/// the round trips' p50/p95/p99 on each side, retransmits, flows.
fn tcp_table(circuits: &[&CircuitStats]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "TCP round trips, ms (subscriber side: shaper to subscriber and back; internet side: shaper to far end and back)"
    );
    let _ = writeln!(
        o,
        "{:<16} {:<8} {:>22} {:>22} {:>9} {:>16}",
        "CIRCUIT", "DATA", "SUBSCRIBER p50/95/99", "INTERNET p50/95/99", "RETX/s", "FLOWS (no TS)"
    );
    for c in circuits {
        let Some(t) = c.tcp.as_deref() else { continue };
        let mut first = true;
        for d in Dir::BOTH {
            let td = t.dir(d);
            if td.subscriber.samples == 0 && td.internet.samples == 0 && td.retransmits == 0 {
                continue;
            }
            let _ = writeln!(
                o,
                "{:<16} {:<8} {:>22} {:>22} {:>9.1} {:>16}",
                clean(&c.id, 16),
                d.name(),
                percentiles(&td.subscriber),
                percentiles(&td.internet),
                td.retransmit_rate,
                if first {
                    format!("{} ({})", t.flows, t.unmeasured_flows)
                } else {
                    String::new()
                }
            );
            first = false;
        }
        if first {
            let _ = writeln!(
                o,
                "{:<16} {:<8} {:>22} {:>22} {:>9} {:>16}",
                clean(&c.id, 16),
                "-",
                "-",
                "-",
                "-",
                format!("{} ({})", t.flows, t.unmeasured_flows)
            );
        }
    }
    o
}

/// The plain table: circuits, then (unless `nodes` is empty) nodes.
fn table(circuits: &[&CircuitStats], nodes: &[&NodeStats], all_nodes: bool) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:<20} {:<16} {:>24} {:>24} {:>8} {:>7} {:>8} {:>15} {:>7}",
        "CIRCUIT",
        "NAME",
        "PARENT",
        "DOWN Mbit/s (of ceil)",
        "UP Mbit/s (of ceil)",
        "DROPS/s",
        "ECN/s",
        "DELAY ms",
        "p95 ms sub/inet",
        "RETX/s"
    );
    for c in circuits {
        let _ = writeln!(
            o,
            "{:<16} {:<20} {:<16} {:>24} {:>24} {:>8.1} {:>7.1} {:>8} {:>15} {:>7}",
            clean(&c.id, 16),
            clean(&c.name, 20),
            clean(&c.parent, 16),
            rate_of_ceil(&c.download),
            rate_of_ceil(&c.upload),
            c.download.drop_rate + c.upload.drop_rate,
            c.download.ecn_rate + c.upload.ecn_rate,
            delay(c),
            rtt(c.tcp.as_deref()),
            retransmits(c.tcp.as_deref())
        );
    }
    if nodes.is_empty() {
        return o;
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<24} {:>24} {:>24} {:>8} {:>15} {:>7}",
        "NODE",
        "DOWN Mbit/s (of ceil)",
        "UP Mbit/s (of ceil)",
        "DROPS/s",
        "p95 ms sub/inet",
        "RETX/s"
    );
    let shown = if all_nodes {
        nodes.len()
    } else {
        nodes.len().min(20)
    };
    for n in &nodes[..shown] {
        let _ = writeln!(
            o,
            "{:<24} {:>24} {:>24} {:>8.1} {:>15} {:>7}",
            clean(&n.name, 24),
            rate_of_ceil(n.dir(Dir::Download)),
            rate_of_ceil(n.dir(Dir::Upload)),
            n.download.drop_rate + n.upload.drop_rate,
            rtt(n.tcp.as_deref()),
            retransmits(n.tcp.as_deref())
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circuit(id: &str, rate: f64, drop_rate: f64) -> CircuitStats {
        let d = {
            let mut p = DirStats::default();
            p.rate_bps = rate;
            p.drop_rate = drop_rate;
            p
        };
        {
            let mut p = CircuitStats::default();
            p.id = id.into();
            p.name = id.into();
            p.parent = "AP".into();
            p.download = d.clone();
            p.upload = DirStats::default();
            p
        }
    }

    /// Regression: `--sort drops` with no drops anywhere listed circuits
    /// by ID, hiding the busy ones; ties now go busiest first.
    #[test]
    fn sorting_by_drops_without_drops_puts_the_busiest_first() {
        let stats = {
            let mut p = Stats::default();
            p.interval_secs = Some(1.0);
            p.circuits = vec![
                circuit("a", 1e3, 0.0),
                circuit("b", 9e6, 0.0),
                circuit("c", 5e6, 0.0),
            ];
            p.nodes = Vec::new();
            p.unclassified = Unclassified::default();
            p
        };
        let ids = |k: SortKey| -> Vec<String> {
            select(&stats, &Filter::default(), k, None)
                .iter()
                .map(|c| c.id.to_string())
                .collect()
        };
        for k in [SortKey::Drops, SortKey::Delay, SortKey::Rate] {
            assert_eq!(ids(k), ["b", "c", "a"], "{k:?}");
        }
        // A circuit that drops still comes first.
        let mut stats = stats;
        stats.circuits[0].download.drop_rate = 2.0;
        let first = select(&stats, &Filter::default(), SortKey::Drops, Some(1));
        assert_eq!(first[0].id, "a");
    }

    fn tcp(p95_sub: f64, retransmit_rate: f64) -> TcpStats {
        let mut t = TcpStats::default();
        let mut summary = lqos_apply::stats::tcp::RttSummary::default();
        summary.samples = 10;
        summary.p50_ms = p95_sub / 2.0;
        summary.p95_ms = p95_sub;
        summary.p99_ms = p95_sub * 1.5;
        summary.mean_ms = p95_sub / 2.0;
        t.download.subscriber.samples = 10;
        t.download.subscriber.recent = Some(summary);
        t.download.retransmit_rate = retransmit_rate;
        t.flows = 3;
        t.unmeasured_flows = 1;
        t
    }

    #[test]
    fn circuits_sort_by_round_trip_and_retransmits_and_show_both_sides() {
        let mut stats = Stats::default();
        stats.interval_secs = Some(1.0);
        stats.circuits = vec![
            circuit("a", 9e6, 0.0),
            circuit("b", 1e3, 0.0),
            circuit("c", 5e6, 0.0),
        ];
        stats.circuits[1].tcp = Some(std::sync::Arc::new(tcp(80.0, 0.5)));
        stats.circuits[2].tcp = Some(std::sync::Arc::new(tcp(20.0, 7.0)));
        let ids = |k: SortKey| -> Vec<String> {
            select(&stats, &Filter::default(), k, None)
                .iter()
                .map(|c| c.id.to_string())
                .collect()
        };
        assert_eq!(ids(SortKey::Rtt), ["b", "c", "a"]);
        assert_eq!(ids(SortKey::Retransmits), ["c", "b", "a"]);
        assert_eq!(rtt(stats.circuits[1].tcp.as_deref()), "80.0/-");
        assert_eq!(rtt(None), "-");
        let sel = select(&stats, &Filter::default(), SortKey::Rtt, None);
        let t = tcp_table(&sel);
        assert!(t.contains("40.0/80.0/120.0"), "{t}");
        assert!(t.contains("3 (1)"), "{t}");
        // A circuit without TCP is not in the TCP table.
        assert!(!t.lines().any(|l| l.starts_with("a ")), "{t}");
        let main = table(&sel, &[], true);
        assert!(main.contains("p95 ms sub/inet"), "{main}");
        // The sort keys cycle through all of them.
        let mut k = SortKey::Rate;
        for _ in 0..5 {
            k = k.next();
        }
        assert_eq!(k, SortKey::Rate);
    }
}
