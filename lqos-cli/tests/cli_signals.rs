//! SIGTERM and SIGINT during long loads (the real binary, spawned, in a
//! private network namespace): `lqos apply` and `lqos watch` stop at the
//! next batch of netlink messages, save nothing that is not live, and the
//! next run converges. Skipped without root unless LQOS_REQUIRE_NETNS=1.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{assert_in_sync, class_count as classes, code, lqos, spawn, text};
use lqos_apply::netns::{require_netns, ScratchNetns};
use nix::sys::signal::Signal;

/// Circuits of the generated network: a first load of several seconds on
/// this kind of machine (pfifo leaves, 16 queues, two interfaces).
const CIRCUITS: usize = 6000;

/// Waits until the load under way has created classes on the first
/// interface (for a rebuild, which deletes both old trees first: once the
/// second interface's is gone), then sends `sig`; returns the time from the
/// signal to exit, the exit code and the output.
fn interrupt(
    ns: &ScratchNetns,
    mut child: Child,
    sig: Signal,
    rebuild: bool,
) -> (Duration, i32, String, String) {
    let end = Instant::now() + Duration::from_secs(120);
    let mut deleted = !rebuild;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            let o = child.wait_with_output().unwrap();
            panic!("ended before it could be interrupted: {s:?} {:?}", text(&o));
        }
        assert!(Instant::now() < end, "the load never started");
        if !deleted {
            deleted = classes(ns, "ens20") == Some(0);
            continue;
        }
        // The load has begun once the root and some circuit classes exist.
        if classes(ns, "ens19").is_some_and(|n| n > 200) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = sent.elapsed();
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    (took, status.code().unwrap_or(-1), out, err)
}

fn saved_plan(dir: &Path, ns: &ScratchNetns) -> Option<Vec<u8>> {
    std::fs::read(dir.join(format!("st/last-plan.netns-{}.json", ns.name()))).ok()
}

fn apply_args<'a>(ns: &'a ScratchNetns, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "apply",
        "--netns",
        ns.name(),
        "--state-dir",
        "st",
        "--sqm",
        "pfifo",
    ];
    a.extend_from_slice(extra);
    a
}

#[test]
fn apply_stops_at_the_next_batch_on_sigterm_and_ctrl_c_and_the_next_apply_converges() {
    if !require_netns("cli signals apply") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("sigapply", 16, CIRCUITS);
    let d = dir.path();

    // SIGTERM during the first load: nothing is saved, the kernel keeps
    // what was loaded.
    let child = spawn(d, &apply_args(&ns, &[]));
    let (took, code1, _, err) = interrupt(&ns, child, Signal::SIGTERM, false);
    eprintln!("lqos apply: exit {took:?} after SIGTERM");
    assert_eq!(code1, 130, "{err}");
    assert!(err.contains("interrupted: stopped after"), "{err}");
    assert!(
        took < Duration::from_secs(1),
        "{took:?} from SIGTERM to exit"
    );
    assert!(
        saved_plan(d, &ns).is_none(),
        "a cancelled first load saved a plan"
    );
    let partial = classes(&ns, "ens19").unwrap();
    assert!(partial > 200 && partial < 2 * CIRCUITS, "{partial}");

    // The next apply converges from there.
    let o = lqos(d, &apply_args(&ns, &["--verify"]));
    let (out, err) = text(&o);
    assert_eq!(code(&o), 0, "{out}\n{err}");
    eprintln!("the rest of the load:\n{out}");
    assert_in_sync(d, &ns);
    let good = saved_plan(d, &ns).expect("saved after a complete load");

    // Ctrl-C during a full rebuild: the last good plan stays.
    let child = spawn(d, &apply_args(&ns, &["--full"]));
    let (took, code2, _, err) = interrupt(&ns, child, Signal::SIGINT, true);
    eprintln!("lqos apply --full: exit {took:?} after SIGINT");
    assert_eq!(code2, 130, "{err}");
    assert!(
        took < Duration::from_secs(1),
        "{took:?} from SIGINT to exit"
    );
    assert_eq!(saved_plan(d, &ns).as_ref(), Some(&good));
    let o = lqos(d, &apply_args(&ns, &[]));
    assert_eq!(code(&o), 0, "{:?}", text(&o));
    eprintln!("the rest of the rebuild:\n{}", text(&o).0);
    assert_in_sync(d, &ns);
    assert_eq!(saved_plan(d, &ns).as_ref(), Some(&good));
    ns.tc(&["qdisc", "del", "dev", "ens19", "root"]).unwrap();
    ns.tc(&["qdisc", "del", "dev", "ens20", "root"]).unwrap();
}

#[test]
fn watch_stops_its_start_load_on_sigterm_and_the_next_start_converges() {
    if !require_netns("cli signals watch") {
        return;
    }
    let (ns, dir) = common::netns_with_generated("sigwatch", 16, CIRCUITS);
    let d = dir.path();
    let args = [
        "watch",
        "--netns",
        ns.name(),
        "--state-dir",
        "st",
        "--sqm",
        "pfifo",
        "--verify-every",
        "0",
        "--log-format",
        "json",
    ];
    let child = spawn(d, &args);
    let (took, code1, _, err) = interrupt(&ns, child, Signal::SIGTERM, false);
    eprintln!("lqos watch: exit {took:?} after SIGTERM during its start load");
    assert_eq!(code1, 0, "{err}");
    assert!(
        took < Duration::from_secs(1),
        "{took:?} from SIGTERM to exit"
    );
    assert!(err.contains("load stopped by a signal"), "{err}");
    assert!(
        saved_plan(d, &ns).is_none(),
        "a cancelled start saved a plan"
    );
    // The status says the start failed, and that the daemon stopped.
    let o = lqos(d, &["status", "--netns", ns.name(), "--state-dir", "st"]);
    let (out, _) = text(&o);
    assert!(out.contains("stopped at"), "{out}");
    assert!(out.contains("stopped on request"), "{out}");

    // The next start reads the kernel back and converges.
    let mut child = spawn(d, &args);
    let end = Instant::now() + Duration::from_secs(120);
    while saved_plan(d, &ns).is_none() {
        assert!(child.try_wait().unwrap().is_none(), "lqos watch exited");
        assert!(Instant::now() < end, "no last good plan after 120 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_in_sync(d, &ns);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    ns.tc(&["qdisc", "del", "dev", "ens19", "root"]).unwrap();
    ns.tc(&["qdisc", "del", "dev", "ens20", "root"]).unwrap();
}
