//! Run as an unprivileged user (nobody, when the tests run as root), the
//! commands that change qdiscs say first that they need root or
//! CAP_NET_ADMIN, before any error about the state directory, a network
//! namespace or the kernel's EPERM.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use common::{code, lqos, lqos_bin, text};

/// Runs `lqos ARGS` in `dir` as nobody (uid 65534) when this test runs as
/// root, else as this user.
fn unprivileged(dir: &std::path::Path, args: &[&str]) -> Output {
    let mut c = Command::new(lqos_bin());
    c.args(args).current_dir(dir);
    if nix::unistd::geteuid().is_root() {
        c.uid(65534).gid(65534);
    }
    c.output().expect("run lqos")
}

/// Regression: an unprivileged `lqos apply` first said `state dir is owned
/// by uid 0 ... use a directory only this user can write`, then, with such
/// a directory, `ip netns add lqos-probe-...` failed.
#[test]
fn unprivileged_users_are_told_first_that_qdiscs_need_root() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        code(&lqos(d, &["gen", "--circuits", "20", "--out", "."])),
        0
    );
    for f in ["network.json", "ShapedDevices.csv", "lqos.conf"] {
        std::fs::set_permissions(d.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // A state directory this user does not own (root's, when run as root).
    let state = d.join("state");
    std::fs::create_dir(&state).unwrap();
    let state = state.to_str().unwrap();
    for (args, what) in [
        (&["apply", "--state-dir", state][..], "`lqos apply` changes"),
        (
            &["apply", "--state-dir", state, "--netns", "x"],
            "`lqos apply` changes",
        ),
        (&["watch", "--state-dir", state], "`lqos watch` changes"),
        (&["bench"], "`lqos bench` changes"),
        (
            &["verify", "--netns", "x"],
            "`lqos verify` enters a network namespace",
        ),
    ] {
        let o = unprivileged(d, args);
        let (out, err) = text(&o);
        assert_eq!(code(&o), 2, "{args:?}: {out}{err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("lqos: error: {what}")) && first.contains("needs root"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("state dir") && !err.contains("ip netns"),
            "{args:?}: {err}"
        );
    }
    // What reads only runs as any user.
    let o = unprivileged(d, &["check", "--offline"]);
    assert_eq!(code(&o), 0, "{:?}", text(&o));
}
