//! `lqos show`: the planned tree, indented, for a person to read; with
//! `--ip ADDR`, where one address is shaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;

use lqos_tc::allocation::Direction;
use lqos_tc::render::rate_to_tc;
use lqos_tc::tree::TcTree;
use lqos_tc::{Plan, TcHandle};

use super::apply::{applied_from, applied_plan, TargetArgs};
use super::inputs::InputArgs;
use super::inputs::PlanOptions;
use super::plan::{plan_inputs, read_plan};
use super::{Done, Outcome};
use crate::out::{note, out};

/// Arguments of `lqos show`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Input files (ignored with --plan).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Planner options (ignored with --plan).
    #[command(flatten)]
    pub options: PlanOptions,
    /// Show a saved plan.json instead of the plan last applied.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Plan the input files (with the planner options given; 16 queues
    /// unless --queues or override_available_queues say) instead of showing
    /// the plan last applied. Implied by --queues, --sqm, --strategy and
    /// --classifier, and the default when nothing was applied.
    #[arg(long, conflicts_with = "plan")]
    pub from_inputs: bool,
    /// Namespace and state directory of the plan last applied.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Only this interface [default: all].
    #[arg(long, value_name = "DEV")]
    pub interface: Option<String>,
    /// Also list every circuit.
    #[arg(long)]
    pub circuits: bool,
    /// Where this address is shaped (longest-prefix match over every
    /// device's addresses): circuit, device, node path, queue, classids,
    /// rates and leaf, per direction.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["interface", "circuits"])]
    pub ip: Option<IpAddr>,
}

/// Runs `lqos show`: the plan last applied (its classids and queues are
/// what is live), else `--plan FILE`, or the input files' plan.
pub fn run(args: Args) -> Outcome {
    let applied = if args.plan.is_some() || args.from_inputs || args.options.given() {
        None
    } else {
        applied_plan(&args.target)?
    };
    let plan = match (&args.plan, applied) {
        (Some(p), _) => read_plan(p)?,
        (None, Some(saved)) => {
            note!(
                "lqos: showing {} (--from-inputs: the input files' plan instead)",
                applied_from(&args.target, &saved)
            );
            saved.plan
        }
        (None, None) => plan_inputs(&args.inputs, &args.options, None)?,
    };
    if let Some(addr) = args.ip {
        out!("{}", render_ip(&plan, addr))?;
        return Ok(Done::Ok);
    }
    if let Some(dev) = &args.interface {
        if plan.interface(dev).is_none() {
            anyhow::bail!("the plan has no interface {dev:?}");
        }
    }
    out!(
        "{}",
        render_show(&plan, args.interface.as_deref(), args.circuits)
    )?;
    Ok(Done::Ok)
}

/// Untrusted names print escaped on one line.
fn esc(s: &str) -> String {
    s.escape_debug().to_string()
}

fn rates(t: &TcTree, id: TcHandle) -> String {
    match t.classes.get(&id) {
        Some(c) => format!(
            "rate {} ceil {}",
            rate_to_tc(c.htb.rate),
            rate_to_tc(c.htb.ceil)
        ),
        None => "(no class)".to_string(),
    }
}

/// The text `lqos show --ip ADDR` prints.
pub fn render_ip(plan: &Plan, addr: IpAddr) -> String {
    let Some(d) = plan.explain_ip(addr) else {
        return format!(
            "{addr}: not shaped: goes to the default class (:2 of the HTB of whatever TX queue it leaves on); no device in the plan has this address\n"
        );
    };
    let e = &d.entry;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{addr}: circuit \"{}\" (\"{}\"), device \"{}\" (\"{}\"), matched {}",
        esc(&e.circuit_id),
        esc(&e.circuit_name),
        esc(&e.device_id),
        esc(&e.device_name),
        e.net
    );
    let path: Vec<String> = d.node_path.iter().map(|n| esc(n)).collect();
    let _ = writeln!(out, "  node path: {}", path.join(" > "));
    for (what, s) in [("download", &d.download), ("upload", &d.upload)] {
        let rates = match (s.rate, s.ceil) {
            (Some(r), Some(c)) => format!("rate {} ceil {}", rate_to_tc(r), rate_to_tc(c)),
            _ => "(class not in the plan)".to_string(),
        };
        let leaf = match &s.leaf {
            Some(q) => {
                let mut k = String::new();
                lqos_tc::render::write_kind(&mut k, &q.kind);
                format!("leaf {} {k}", q.handle)
            }
            None => "no leaf qdisc".to_string(),
        };
        let _ = writeln!(
            out,
            "  {what}: {} tx queue {} class {} {rates}, {leaf}",
            s.steer.dev, s.steer.queue, s.steer.classid
        );
    }
    let _ = writeln!(
        out,
        "  classifier: {}",
        match plan.config.classifier {
            lqos_model::config::Classifier::Tc =>
                format!("tc (flower filter handle {})", e.filter_handle),
            lqos_model::config::Classifier::None =>
                "none (an external classifier must map it; see ip_map.csv)".to_string(),
        }
    );
    out
}

/// The text `lqos show` prints.
pub fn render_show(plan: &Plan, only: Option<&str>, circuits: bool) -> String {
    let a = &plan.allocation;
    let mut kids: BTreeMap<Option<u32>, Vec<u32>> = BTreeMap::new();
    for (i, n) in a.nodes.iter().enumerate() {
        kids.entry(n.parent).or_default().push(i as u32);
    }
    let mut node_circuits: Vec<Vec<u32>> = vec![Vec::new(); a.nodes.len()];
    for (i, c) in a.circuits.iter().enumerate() {
        if let Some(v) = node_circuits.get_mut(c.parent as usize) {
            v.push(i as u32);
        }
    }
    // Circuits in each subtree.
    let mut subtree = vec![0usize; a.nodes.len()];
    for i in (0..a.nodes.len()).rev() {
        subtree[i] += node_circuits[i].len();
        if let Some(p) = a.nodes[i].parent {
            let s = subtree[i];
            subtree[p as usize] += s;
        }
    }
    let mut out = String::new();
    for ip in &plan.interfaces {
        if only.is_some_and(|d| d != ip.dev) {
            continue;
        }
        let t = ip.tree();
        let leaves = t.qdisc_by_parent();
        let dirs: &[Direction] = match ip.direction {
            Direction::Both => &[Direction::Download, Direction::Upload],
            d => std::slice::from_ref(match d {
                Direction::Download => &Direction::Download,
                _ => &Direction::Upload,
            }),
        };
        for &dir in dirs {
            let _ = writeln!(out, "{} ({dir:?})", ip.dev);
            for q in 0..a.queues {
                let maj = plan.major(dir, q);
                let _ = writeln!(
                    out,
                    "  tx queue {q} {maj:x}:1 {}: {} classes",
                    rates(&t, TcHandle::new(maj, 1)),
                    t.class_count_in(maj)
                );
                let mut stack: Vec<(u32, usize)> = kids
                    .get(&None)
                    .map(|v| {
                        v.iter()
                            .rev()
                            .filter(|&&n| a.nodes[n as usize].queue == q)
                            .map(|&n| (n, 2))
                            .collect()
                    })
                    .unwrap_or_default();
                while let Some((n, depth)) = stack.pop() {
                    let node = &a.nodes[n as usize];
                    let id = TcHandle::new(maj, node.minor);
                    let _ = writeln!(
                        out,
                        "{:indent$}{} {id} {}, circuits {} (subtree {})",
                        "",
                        esc(&node.name),
                        rates(&t, id),
                        node_circuits[n as usize].len(),
                        subtree[n as usize],
                        indent = depth * 2
                    );
                    if circuits {
                        for &ci in &node_circuits[n as usize] {
                            let c = &a.circuits[ci as usize];
                            let cid = TcHandle::new(maj, c.minor);
                            let leaf = leaves
                                .get(&cid)
                                .map(|q| format!(", leaf {} {}", q.handle, q.kind.name()))
                                .unwrap_or_default();
                            let _ = writeln!(
                                out,
                                "{:indent$}circuit {} \"{}\" {cid} {}{leaf}",
                                "",
                                esc(&c.id),
                                esc(&c.name),
                                rates(&t, cid),
                                indent = depth * 2 + 2
                            );
                        }
                    }
                    if let Some(v) = kids.get(&Some(n)) {
                        stack.extend(v.iter().rev().map(|&k| (k, depth + 1)));
                    }
                }
            }
        }
    }
    out
}
