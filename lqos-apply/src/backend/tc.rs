//! The `tc -b` backend: spawns `tc [-n NETNS] [-force] -b -` and streams
//! the ops' text on its stdin.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use lqos_tc::TcOp;
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use serde::Serialize;

use super::{
    as_sent, root_delete_found_nothing, tc_message_errno, Backend, IfaceOps, IfaceReport,
    LoadReport, Progress, RootDelete,
};
use crate::error::{ApplyError, IoAction, Stopped};
use crate::timing::{zombie_cpu, CpuScope, Stopwatch, Timing};
use lqos_tc::render::render_line;

/// How the tc backend groups interfaces into `tc -b` processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TcMode {
    /// One process for all interfaces, ops interleaved round-robin across
    /// interfaces (like LibreQoS's single `linux_tc.txt`).
    Combined,
    /// One process per interface, one after another.
    Serial,
    /// One process per interface, all at once.
    Parallel,
}

/// `tc -b` loader.
#[derive(Debug, Clone)]
pub struct TcBatch {
    /// Run inside this network namespace (`tc -n`).
    pub netns: Option<String>,
    /// Process layout.
    pub mode: TcMode,
    /// `tc -force`: keep going after a failed line (LibreQoS runs
    /// `tc -f -b`). Every failure is still reported.
    pub force: bool,
    /// The `tc` binary.
    pub tc: PathBuf,
}

impl TcBatch {
    /// A loader in `mode`, without `-force`, using `tc` from `PATH`.
    pub fn new(netns: Option<String>, mode: TcMode) -> TcBatch {
        TcBatch {
            netns,
            mode,
            force: false,
            tc: PathBuf::from("tc"),
        }
    }
}

/// Op `index` of a stream as sent (a line's op; lines are built in range).
fn at<'a>(s: &'a IfaceOps<'_>, index: usize) -> Cow<'a, TcOp> {
    s.op(index).expect("batch line within its stream")
}

/// One line of a batch: which interface and which op of its stream.
#[derive(Debug, Clone, Copy)]
struct Line {
    iface: usize,
    op: usize,
}

/// What one `tc -b` process did.
struct BatchRun {
    timing: Timing,
    /// (index into the lines given, tc's error text).
    failures: Vec<(usize, String)>,
    /// Lines processed (all lines sent with -force or on success; up to
    /// and including the failing one otherwise).
    processed: usize,
    /// The load was cancelled: lines `processed..` were not sent, or (when
    /// tc had to be killed) `unsure` of them were sent with their outcome
    /// unknown.
    cancelled: Option<Unsure>,
    /// Spawn / wait problem.
    fatal: Option<ApplyError>,
}

/// Lines sent to a killed tc past the ones it certainly ran.
type Unsure = usize;

/// The pipe to tc holds this much (`F_SETPIPE_SZ`; the default is 64 KiB):
/// what tc still has to run after a cancelled load closes its input stays
/// small (about 200 lines), so it ends within a fraction of a second.
const TC_PIPE_BYTES: i32 = 16 << 10;
/// What tc's own stdio buffer may hold on top of the pipe (it reads a pipe
/// 4 KiB at a time; with margin).
const TC_STDIO_BYTES: usize = 32 << 10;
/// The writer's buffer in front of the pipe.
const TC_WRITE_BUFFER: usize = 1 << 16;
/// How long a cancelled tc may take to run the lines it holds before it is
/// killed.
const TC_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// What the writer thread did.
#[derive(Default)]
struct Written {
    /// Lines handed to tc (whole: a line is written in one piece).
    lines: usize,
    /// Byte offset in tc's input after each line.
    ends: Vec<usize>,
    /// Stopped on request.
    cancelled: bool,
}

impl TcBatch {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.tc);
        if let Some(ns) = &self.netns {
            c.arg("-n").arg(ns);
        }
        if self.force {
            c.arg("-force");
        }
        c.arg("-b").arg("-");
        c
    }

    /// Runs one tc process over `lines`. `exclusive_child`: no other child
    /// of ours runs meanwhile, so RUSAGE_CHILDREN is exact.
    fn run_batch(
        &self,
        ifaces: &[IfaceOps<'_>],
        streams: &[IfaceOps<'_>],
        lines: &[Line],
        exclusive_child: bool,
        progress: &dyn Progress,
    ) -> BatchRun {
        let sw = Stopwatch::start(CpuScope::Children);
        let fail = |e: ApplyError| BatchRun {
            timing: sw.stop(),
            failures: vec![],
            processed: 0,
            cancelled: None,
            fatal: Some(e),
        };
        let mut child = match self
            .command()
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return fail(ApplyError::io(IoAction::SpawnTc, Some(&self.tc), e)),
        };
        let stdin = child.stdin.take().expect("piped stdin");
        let _ = nix::fcntl::fcntl(&stdin, nix::fcntl::FcntlArg::F_SETPIPE_SZ(TC_PIPE_BYTES));
        let pipe_bytes = nix::fcntl::fcntl(&stdin, nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .map_or(1 << 16, |n| n as usize);
        let mut stderr = child.stderr.take().expect("piped stderr");
        let mut err_text = String::new();
        let pid = child.id();
        let (exited, tc_exited) = std::sync::mpsc::channel::<()>();
        let (written, killed) = std::thread::scope(|s| {
            let writer = s.spawn(move || {
                let mut out = Written::default();
                let mut w = BufWriter::with_capacity(TC_WRITE_BUFFER, stdin);
                let mut pending = 0usize;
                let mut last_dev = usize::MAX;
                let mut offset = 0;
                for l in lines {
                    if progress.cancelled() {
                        out.cancelled = true;
                        break;
                    }
                    let dev = &ifaces[l.iface].dev;
                    if l.iface != last_dev && pending > 0 {
                        progress.advance(&ifaces[last_dev].dev, pending);
                        pending = 0;
                    }
                    last_dev = l.iface;
                    let mut text = render_line(dev, &at(&streams[l.iface], l.op));
                    text.push('\n');
                    // One write per line: the buffer holds whole lines.
                    if w.write_all(text.as_bytes()).is_err() {
                        // tc stopped reading (it exits at the first error,
                        // or was killed).
                        out.cancelled = progress.cancelled();
                        return out;
                    }
                    offset += text.len();
                    out.ends.push(offset);
                    out.lines += 1;
                    pending += 1;
                    if pending >= 256 {
                        progress.advance(dev, pending);
                        pending = 0;
                    }
                }
                if !out.cancelled {
                    let _ = w.flush();
                    if pending > 0 && last_dev != usize::MAX {
                        progress.advance(&ifaces[last_dev].dev, pending);
                    }
                    return out; // Dropping the writer closes stdin: tc sees EOF.
                }
                // Cancelled: the lines still buffered here are never sent;
                // tc runs what it holds, then sees EOF.
                let (stdin, unsent) = w.into_parts();
                drop(stdin);
                let unsent = unsent.map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
                out.lines -= unsent;
                out.ends.truncate(out.lines);
                out
            });
            // Kills tc when a cancelled load's tc does not end within its
            // grace time (also when the writer is blocked on a full pipe).
            let watcher = s.spawn(move || {
                use std::sync::mpsc::RecvTimeoutError::Timeout;
                loop {
                    match tc_exited.recv_timeout(std::time::Duration::from_millis(20)) {
                        Err(Timeout) if progress.cancelled() => break,
                        Err(Timeout) => continue,
                        _ => return false,
                    }
                }
                if tc_exited.recv_timeout(TC_GRACE) != Err(Timeout) {
                    return false;
                }
                // Not reaped yet (the caller waits after this scope): the
                // pid is still tc's.
                let _ = nix::sys::signal::kill(
                    Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                true
            });
            let _ = stderr.read_to_string(&mut err_text);
            let _ = exited.send(());
            (
                writer.join().unwrap_or_default(),
                watcher.join().unwrap_or(false),
            )
        });
        // Per-child CPU time: wait without reaping, read /proc, then reap.
        let mut cpu = None;
        if !exclusive_child
            && waitid(
                Id::Pid(Pid::from_raw(pid as i32)),
                WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
            )
            .is_ok()
        {
            cpu = zombie_cpu(pid);
        }
        let status = match child.wait() {
            Ok(s) => s,
            Err(e) => return fail(ApplyError::io(IoAction::WaitTc, None, e)),
        };
        let mut timing = sw.stop();
        if let Some((user, sys)) = cpu {
            timing.user = user;
            timing.sys = sys;
        }
        let failures = parse_tc_errors(&err_text);
        let sent = if written.cancelled {
            written.lines
        } else {
            lines.len()
        };
        // A killed tc ran at least the lines before what its pipe, its
        // buffer and the writer's could still hold.
        let certain = if killed {
            let total = written.ends.last().copied().unwrap_or(0);
            let window = TC_WRITE_BUFFER + pipe_bytes + TC_STDIO_BYTES;
            written.ends.partition_point(|&e| e + window <= total)
        } else {
            sent
        };
        let processed = if self.force || failures.is_empty() {
            certain
        } else {
            (failures[0].0 + 1).min(certain)
        };
        let cancelled = (written.cancelled || killed).then_some(sent - certain);
        let fatal = if !status.success() && failures.is_empty() && !killed {
            Some(ApplyError::Command {
                cmd: format!("{:?}", self.command()),
                message: format!("{status}: {}", err_text.trim()),
            })
        } else {
            None
        };
        BatchRun {
            timing,
            failures,
            processed,
            cancelled,
            fatal,
        }
    }

    /// Loads `lines` (all from one process layout), restarting after a
    /// benign root-delete failure. Fills `reports`. Returns the timing of
    /// all processes together.
    fn load_lines(
        &self,
        ifaces: &[IfaceOps<'_>],
        streams: &[IfaceOps<'_>],
        lines: &[Line],
        exclusive_child: bool,
        progress: &dyn Progress,
        reports: &mut [IfaceReport],
    ) -> Timing {
        let mut total = Timing::default();
        let mut start = 0;
        while start < lines.len() {
            let slice = &lines[start..];
            let run = self.run_batch(ifaces, streams, slice, exclusive_child, progress);
            total = total + run.timing;
            if let Some(e) = run.fatal {
                let cause = Some(std::sync::Arc::new(e));
                for r in reports.iter_mut() {
                    if r.error.is_none() && r.ops_applied < r.ops_total {
                        r.error = Some(ApplyError::Incomplete {
                            dev: r.dev.clone(),
                            sent: r.ops_applied,
                            total: r.ops_total,
                            reason: Stopped::TcFailed,
                            cause: cause.clone(),
                        });
                    }
                }
                return total;
            }
            let mut failed = vec![false; slice.len()];
            let mut restart_at = None;
            for (idx, msg) in &run.failures {
                let Some(l) = slice.get(*idx) else { continue };
                let op = &*at(&streams[l.iface], l.op);
                if root_delete_found_nothing(op, None, msg) {
                    if !self.force {
                        restart_at = Some(start + idx + 1);
                    }
                    // Counts as done: there was nothing to delete.
                    continue;
                }
                failed[*idx] = true;
                let r = &mut reports[l.iface];
                if r.error.is_none() {
                    r.error = Some(ApplyError::OpFailed {
                        dev: r.dev.clone(),
                        index: l.op,
                        op: Box::new(op.clone()),
                        message: msg.clone(),
                        errno: tc_message_errno(msg),
                    });
                }
            }
            for (i, l) in slice.iter().enumerate().take(run.processed) {
                if !failed[i] {
                    reports[l.iface].ops_applied += 1;
                }
            }
            if let Some(unsure) = run.cancelled {
                let mut unsure_of = vec![0; reports.len()];
                for l in &slice[run.processed..run.processed + unsure] {
                    unsure_of[l.iface] += 1;
                }
                for (r, unsure) in reports.iter_mut().zip(unsure_of) {
                    if r.error.is_none() && r.ops_applied < r.ops_total {
                        r.error = Some(ApplyError::Incomplete {
                            dev: r.dev.clone(),
                            sent: r.ops_applied,
                            total: r.ops_total,
                            reason: Stopped::Cancelled { unsure },
                            cause: None,
                        });
                    }
                }
                break;
            }
            match restart_at {
                Some(next) => start = next,
                None => {
                    if run.processed < slice.len() {
                        let (fdev, fline) = run
                            .failures
                            .first()
                            .map(|(i, _)| (reports[slice[*i].iface].dev.clone(), start + i + 1))
                            .unwrap_or_default();
                        for r in reports.iter_mut() {
                            if r.error.is_none() && r.ops_applied < r.ops_total {
                                r.error = Some(ApplyError::Incomplete {
                                    dev: r.dev.clone(),
                                    sent: r.ops_applied,
                                    total: r.ops_total,
                                    reason: Stopped::CombinedBatch {
                                        line: fline,
                                        dev: fdev.clone(),
                                    },
                                    cause: None,
                                });
                            }
                        }
                    }
                    break;
                }
            }
        }
        total
    }

    fn separate_root_delete(&self, dev: &str) -> (Timing, Option<ApplyError>) {
        let sw = Stopwatch::start(CpuScope::Children);
        let mut c = Command::new(&self.tc);
        if let Some(ns) = &self.netns {
            c.arg("-n").arg(ns);
        }
        c.args(["qdisc", "del", "dev", dev, "root"]);
        let out = c.output();
        let t = sw.stop();
        match out {
            Err(e) => (t, Some(ApplyError::io(IoAction::SpawnRootDelete, None, e))),
            Ok(o) if o.status.success() => (t, None),
            Ok(o) => {
                let msg = String::from_utf8_lossy(&o.stderr).trim().to_string();
                if root_delete_found_nothing(&TcOp::delete_root(), None, &msg) {
                    (t, None)
                } else {
                    (
                        t,
                        Some(ApplyError::OpFailed {
                            dev: dev.to_string(),
                            index: 0,
                            op: Box::new(TcOp::delete_root()),
                            errno: tc_message_errno(&msg),
                            message: msg,
                        }),
                    )
                }
            }
        }
    }
}

/// Parses `tc -b`'s stderr: each `Command failed FILE:N` closes a group of
/// message lines. Returns (0-based line index, message) per failure.
/// Warnings (`Warning: ...`) are kept only if there is nothing else.
pub(crate) fn parse_tc_errors(stderr: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut group: Vec<&str> = Vec::new();
    for line in BufReader::new(stderr.as_bytes())
        .lines()
        .map_while(Result::ok)
        .collect::<Vec<_>>()
        .iter()
    {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("Command failed ") {
            let n = rest
                .rsplit(':')
                .next()
                .and_then(|n| n.trim().parse::<usize>().ok());
            let errors: Vec<&str> = group
                .iter()
                .copied()
                .filter(|l| !l.starts_with("Warning"))
                .collect();
            let chosen = if errors.is_empty() { &group } else { &errors };
            let msg = chosen
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(n) = n {
                out.push((
                    n.saturating_sub(1),
                    if msg.is_empty() { "failed".into() } else { msg },
                ));
            }
            group.clear();
        } else {
            group.push(line);
        }
    }
    out
}

/// The line order of a combined batch, the same as
/// [`lqos_tc::render::render_combined`]: the in-batch root deletes, each
/// interface's setup ops, then the interfaces' entity groups (a class op and
/// the ops after it up to the next class op) round-robin.
fn combined_order(streams: &[IfaceOps<'_>]) -> Vec<Line> {
    let skips: Vec<usize> = streams.iter().map(|s| usize::from(s.delete_root)).collect();
    let mut lines = Vec::with_capacity(streams.iter().map(|s| s.len()).sum());
    lines.extend(
        (0..streams.len())
            .filter(|&i| skips[i] == 1)
            .map(|iface| Line { iface, op: 0 }),
    );
    let mut cursors = Vec::with_capacity(streams.len());
    for (iface, s) in streams.iter().enumerate() {
        let skip = skips[iface];
        let setup_end = (skip + s.setup_len).min(s.len());
        lines.extend((skip..setup_end).map(|op| Line { iface, op }));
        cursors.push(setup_end);
    }
    loop {
        let mut progressed = false;
        for (iface, (s, cur)) in streams.iter().zip(cursors.iter_mut()).enumerate() {
            if *cur >= s.len() {
                continue;
            }
            progressed = true;
            let mut end = *cur + 1;
            while end < s.len() && !matches!(*at(s, end), TcOp::AddClass(_)) {
                end += 1;
            }
            lines.extend((*cur..end).map(|op| Line { iface, op }));
            *cur = end;
        }
        if !progressed {
            break;
        }
    }
    lines
}

fn new_reports(ifaces: &[IfaceOps<'_>], streams: &[IfaceOps<'_>]) -> Vec<IfaceReport> {
    ifaces
        .iter()
        .zip(streams)
        .map(|(i, s)| IfaceReport {
            dev: i.dev.clone(),
            ops_total: s.len(),
            ops_applied: 0,
            timing: None,
            root_delete: None,
            error: None,
        })
        .collect()
}

impl Backend for TcBatch {
    fn describe(&self) -> String {
        let mode = match self.mode {
            TcMode::Combined => "combined",
            TcMode::Serial => "serial",
            TcMode::Parallel => "parallel",
        };
        format!("tc -b {mode}{}", if self.force { " -force" } else { "" })
    }

    fn load(
        &self,
        ifaces: &[IfaceOps<'_>],
        root_delete: RootDelete,
        progress: &dyn Progress,
    ) -> LoadReport {
        let sw = Stopwatch::start(CpuScope::Children);
        let streams: Vec<IfaceOps<'_>> = ifaces.iter().map(|i| as_sent(i, root_delete)).collect();
        let mut reports = new_reports(ifaces, &streams);
        let one_iface = |i: usize, rep: &mut IfaceReport, exclusive: bool| {
            if root_delete == RootDelete::Separate {
                let (t, e) = self.separate_root_delete(&ifaces[i].dev);
                rep.root_delete = Some(t);
                if e.is_some() {
                    rep.error = e;
                    return;
                }
            }
            let lines: Vec<Line> = (0..streams[i].len())
                .map(|op| Line { iface: i, op })
                .collect();
            // Report slots are indexed by interface; give load_lines a view
            // where only this interface's slot is live.
            let mut slots: Vec<IfaceReport> = new_reports(ifaces, &streams);
            let t = self.load_lines(ifaces, &streams, &lines, exclusive, progress, &mut slots);
            let mine = slots.swap_remove(i);
            rep.ops_applied = mine.ops_applied;
            rep.error = mine.error;
            rep.timing = Some(t);
        };
        match self.mode {
            TcMode::Combined => {
                if root_delete == RootDelete::Separate {
                    for (i, rep) in reports.iter_mut().enumerate() {
                        let (t, e) = self.separate_root_delete(&ifaces[i].dev);
                        rep.root_delete = Some(t);
                        rep.error = e;
                    }
                }
                if reports.iter().all(|r| r.error.is_none()) {
                    let lines = combined_order(&streams);
                    self.load_lines(ifaces, &streams, &lines, true, progress, &mut reports);
                }
            }
            TcMode::Serial => {
                for (i, rep) in reports.iter_mut().enumerate() {
                    one_iface(i, rep, true);
                }
            }
            TcMode::Parallel => {
                std::thread::scope(|s| {
                    for (i, rep) in reports.iter_mut().enumerate() {
                        let one = &one_iface;
                        s.spawn(move || one(i, rep, false));
                    }
                });
            }
        }
        LoadReport {
            backend: self.describe(),
            interfaces: reports,
            total: sw.stop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_order_matches_render_combined() {
        let g = lqos_model::generate(&{
            let mut p = lqos_model::GenParams::with_circuits(50);
            p.seed = 7;
            p
        });
        let cfg = lqos_tc::PlanConfig::bridge("ens19", "ens20", 4);
        let plan = lqos_tc::plan(&g.network, &cfg, None).unwrap();
        let ifaces = IfaceOps::all_from_plan(&plan);
        for rd in [RootDelete::None, RootDelete::InBatch] {
            let streams: Vec<IfaceOps<'_>> = ifaces.iter().map(|i| as_sent(i, rd)).collect();
            let text: String = combined_order(&streams)
                .iter()
                .map(|l| render_line(&ifaces[l.iface].dev, &at(&streams[l.iface], l.op)) + "\n")
                .collect();
            assert_eq!(
                text,
                lqos_tc::render::render_combined(&plan, rd == RootDelete::InBatch)
            );
        }
    }

    #[test]
    fn a_tc_that_cannot_run_leaves_every_interface_incomplete_with_the_cause() {
        for mode in [TcMode::Combined, TcMode::Serial, TcMode::Parallel] {
            let mut tc = TcBatch::new(None, mode);
            tc.tc = PathBuf::from("/nonexistent/lqos-test/tc");
            let ifaces = ["ens19", "ens20"].map(|d| IfaceOps::new(d, vec![TcOp::delete_root()]));
            let rep = tc.load(&ifaces, RootDelete::None, &super::super::NoProgress);
            for r in &rep.interfaces {
                match &r.error {
                    Some(ApplyError::Incomplete {
                        sent: 0,
                        total: 1,
                        cause: Some(c),
                        ..
                    }) => assert!(matches!(**c, ApplyError::Io { .. }), "{c}"),
                    e => panic!("{mode:?}: {e:?}"),
                }
            }
            let e = rep.into_result().unwrap_err();
            let cause = std::error::Error::source(&e).expect("a source").to_string();
            assert!(cause.contains("/nonexistent/lqos-test/tc"), "{cause}");
        }
    }

    /// A tc that stops reading its input and never ends: a cancelled load
    /// kills it after its grace time, and the lines it was given are
    /// reported as of unknown outcome, none as applied.
    #[test]
    fn a_cancelled_load_kills_a_tc_that_does_not_end_and_counts_its_lines_as_unsure() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("tc");
        std::fs::write(
            &script,
            "#!/bin/sh\nhead -c 20000 >/dev/null\nexec sleep 60\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut tc = TcBatch::new(None, TcMode::Serial);
        tc.tc = script;
        let ops: Vec<TcOp> = (0..5000u16)
            .map(|i| TcOp::DeleteClass {
                parent: lqos_tc::TcHandle::new(1, 1),
                classid: lqos_tc::TcHandle::new(1, i + 3),
            })
            .collect();
        // Cancelled from outside (a signal) while the writer waits on the
        // full pipe.
        let cancel = super::super::Cancel::new();
        let t = std::time::Instant::now();
        let rep = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(200));
                cancel.cancel();
            });
            tc.load(&[IfaceOps::new("ens19", ops)], RootDelete::None, &cancel)
        });
        eprintln!("returned after {:?}", t.elapsed());
        let r = &rep.interfaces[0];
        assert_eq!(r.ops_applied, 0);
        match &r.error {
            Some(ApplyError::Incomplete {
                reason: Stopped::Cancelled { unsure },
                sent: 0,
                total: 5000,
                ..
            }) => assert!(*unsure >= 200 && *unsure < 5000, "{unsure}"),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn parses_tc_batch_errors() {
        let stderr = "Warning: sch_htb: quantum of class 10001 is big. Consider r2q change.\n\
                      Error: Cannot delete qdisc with handle of zero.\n\
                      Command failed -:1\n\
                      Error: Specified qdisc kind is unknown.\n\
                      Command failed -:6\n";
        let f = parse_tc_errors(stderr);
        assert_eq!(
            f,
            vec![
                (
                    0,
                    "Error: Cannot delete qdisc with handle of zero.".to_string()
                ),
                (5, "Error: Specified qdisc kind is unknown.".to_string())
            ]
        );
        assert_eq!(
            parse_tc_errors("RTNETLINK answers: File exists\nCommand failed -:3\n"),
            vec![(2, "RTNETLINK answers: File exists".to_string())]
        );
        assert!(parse_tc_errors("").is_empty());
    }
}
