//! `lqos stats`: one snapshot of per-circuit statistics (two polls an
//! interval apart, for rates), as a table or JSON. Also the selection,
//! sorting and formatting `lqos top` shares.

use std::time::{Duration, Instant};

use anyhow::Context;
use lqos_apply::stats::{CircuitStats, Dir, DirStats, NodeStats, Stats, StatsPoll, Unclassified};
use lqos_apply::NetlinkLive;
use serde::Serialize;

use super::apply::{applied_plan, state_path, TargetArgs};
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
}

impl SortKey {
    /// The next key (for `lqos top`'s key).
    pub fn next(self) -> SortKey {
        match self {
            SortKey::Rate => SortKey::Drops,
            SortKey::Drops => SortKey::Delay,
            SortKey::Delay => SortKey::Rate,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Rate => "rate",
            SortKey::Drops => "drops",
            SortKey::Delay => "delay",
        }
    }
}

/// Arguments of `lqos stats`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Namespace and state directory (the plan is the last one applied).
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print JSON (every counter, cake's tins, fq_codel's statistics).
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
    // Ties (no drops, no cake delay at all) go busiest first, then by ID.
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

/// The worst tin delay of both directions, in ms, or `-`.
pub fn delay(c: &CircuitStats) -> String {
    match c.download.worst_delay_us().max(c.upload.worst_delay_us()) {
        Some(us) => format!("{:.1}", f64::from(us) / 1e3),
        None => "-".into(),
    }
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
                state_path(target).display()
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
}

/// Runs `lqos stats`.
pub fn run(args: Args) -> Outcome {
    super::privilege::require("`lqos stats`", false, args.target.netns.is_some())?;
    if !(args.interval.is_finite() && args.interval >= 0.0 && args.interval <= 3600.0) {
        anyhow::bail!("--interval {}: give 0 to 3600 seconds", args.interval);
    }
    let plan = last_plan(&args.target)?;
    let live = NetlinkLive::new(args.target.netns.clone());
    let mut poll = StatsPoll::new(&plan);
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
    if args.json {
        let out = JsonOut {
            interval_secs: stats.interval_secs,
            circuits,
            nodes,
            unclassified: &stats.unclassified,
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
    if args.circuit.is_none() && args.node.is_none() {
        outln!("\n{}", unclassified_line(&stats.unclassified))?;
    }
    Ok(Done::Ok)
}

/// The plain table: circuits, then (unless `nodes` is empty) nodes.
fn table(circuits: &[&CircuitStats], nodes: &[&NodeStats], all_nodes: bool) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<16} {:<20} {:<16} {:>24} {:>24} {:>8} {:>7} {:>8}",
        "CIRCUIT",
        "NAME",
        "PARENT",
        "DOWN Mbit/s (of ceil)",
        "UP Mbit/s (of ceil)",
        "DROPS/s",
        "ECN/s",
        "DELAY ms"
    );
    for c in circuits {
        let _ = writeln!(
            o,
            "{:<16} {:<20} {:<16} {:>24} {:>24} {:>8.1} {:>7.1} {:>8}",
            clean(&c.id, 16),
            clean(&c.name, 20),
            clean(&c.parent, 16),
            rate_of_ceil(&c.download),
            rate_of_ceil(&c.upload),
            c.download.drop_rate + c.upload.drop_rate,
            c.download.ecn_rate + c.upload.ecn_rate,
            delay(c)
        );
    }
    if nodes.is_empty() {
        return o;
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<24} {:>24} {:>24} {:>8}",
        "NODE", "DOWN Mbit/s (of ceil)", "UP Mbit/s (of ceil)", "DROPS/s"
    );
    let shown = if all_nodes {
        nodes.len()
    } else {
        nodes.len().min(20)
    };
    for n in &nodes[..shown] {
        let _ = writeln!(
            o,
            "{:<24} {:>24} {:>24} {:>8.1}",
            clean(&n.name, 24),
            rate_of_ceil(n.dir(Dir::Download)),
            rate_of_ceil(n.dir(Dir::Upload)),
            n.download.drop_rate + n.upload.drop_rate
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circuit(id: &str, rate: f64, drop_rate: f64) -> CircuitStats {
        let d = DirStats {
            rate_bps: rate,
            drop_rate,
            ..DirStats::default()
        };
        CircuitStats {
            id: id.into(),
            name: id.into(),
            parent: "AP".into(),
            download: d.clone(),
            upload: DirStats::default(),
            tcp: None,
        }
    }

    /// Regression: `--sort drops` with no drops anywhere listed circuits
    /// by ID, hiding the busy ones; ties now go busiest first.
    #[test]
    fn sorting_by_drops_without_drops_puts_the_busiest_first() {
        let stats = Stats {
            interval_secs: Some(1.0),
            circuits: vec![
                circuit("a", 1e3, 0.0),
                circuit("b", 9e6, 0.0),
                circuit("c", 5e6, 0.0),
            ],
            nodes: Vec::new(),
            unclassified: Unclassified::default(),
            tcp: None,
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
}
