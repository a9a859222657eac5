//! Black-box tests of `lqos check` and `lqos gen`: the built binary on
//! files in a temp dir.

mod common;

use common::{legacy_header, lqos, sample, text};

#[test]
fn gen_then_check_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let o = lqos(
        dir.path(),
        &["gen", "--circuits", "300", "--seed", "5", "--out", "net"],
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let (out, _) = text(&o);
    assert!(out.contains("300 circuits"), "{out}");
    for f in ["network.json", "ShapedDevices.csv", "lqos.conf"] {
        assert!(dir.path().join("net").join(f).is_file(), "{f} missing");
    }
    // Defaults: the three files in the current directory (looking up
    // ens19/ens20 is for the machine that shapes: --offline).
    let o = lqos(&dir.path().join("net"), &["check", "--strict", "--offline"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("network.json: 88 nodes, depth 3"), "{out}");
    assert!(out.contains("ShapedDevices.csv: 300 circuits"), "{out}");
    assert!(out.contains("config: lqos.conf"), "{out}");
    assert!(out.ends_with("0 error(s), 0 warning(s)\n"), "{out}");
}

#[test]
fn gen_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    for out in ["a", "b"] {
        let o = lqos(
            dir.path(),
            &["gen", "--circuits", "50", "--seed", "9", "--out", out],
        );
        assert!(o.status.success());
    }
    for f in ["network.json", "ShapedDevices.csv", "lqos.conf"] {
        let a = std::fs::read(dir.path().join("a").join(f)).unwrap();
        let b = std::fs::read(dir.path().join("b").join(f)).unwrap();
        assert_eq!(a, b, "{f} differs");
    }
}

#[test]
fn broken_csv_exits_2_and_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("network.json"), "{}").unwrap();
    std::fs::write(
        dir.path().join("ShapedDevices.csv"),
        format!(
            "{}\n1,a,d1,R,,,10.0.0.1,,1,1,2,2,\n10001,b,d2,R,,,10.0.0.2,,0,1,2,2,\n",
            legacy_header()
        ),
    )
    .unwrap();
    let o = lqos(dir.path(), &["check"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}\n{err}");
    assert!(
        out.contains("error: ShapedDevices.csv:3: circuit \"10001\": download min 0 is zero"),
        "{out}"
    );
    assert!(err.contains("no lqos.conf"), "{err}");
}

#[test]
fn warnings_exit_0_or_1_with_strict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.json"), "{}").unwrap();
    std::fs::write(
        dir.path().join("d.csv"),
        format!(
            "{}\n1,a,d1,R,,not-a-mac,10.0.0.1,,1,1,2,2,\n",
            legacy_header()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n",
    )
    .unwrap();
    let args = [
        "check",
        "--network",
        "n.json",
        "--devices",
        "d.csv",
        "--config",
        "c.toml",
    ];
    let o = lqos(dir.path(), &args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("warning: d.csv:2: circuit \"1\": MAC \"not-a-mac\""),
        "{out}"
    );
    assert!(err.is_empty(), "{err}");
    let mut strict = args.to_vec();
    strict.push("--strict");
    assert_eq!(lqos(dir.path(), &strict).status.code(), Some(1));
}

#[test]
fn missing_files_exit_2_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let o = lqos(dir.path(), &["check"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("cannot read network file network.json"),
        "{err}"
    );

    std::fs::write(dir.path().join("network.json"), "{}").unwrap();
    std::fs::write(dir.path().join("ShapedDevices.csv"), legacy_header()).unwrap();
    let o = lqos(dir.path(), &["check", "--config", "nope.conf"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("cannot read config file nope.conf"), "{err}");
}

#[test]
fn libreqos_example_files_check_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        sample("network.example.json"),
        dir.path().join("network.json"),
    )
    .unwrap();
    std::fs::copy(
        sample("ShapedDevices.example.csv"),
        dir.path().join("ShapedDevices.csv"),
    )
    .unwrap();
    let o = lqos(dir.path(), &["check"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("network.json: 11 nodes, depth 5"), "{out}");
    assert!(
        out.contains("ShapedDevices.csv: 10 circuits, 10 devices"),
        "{out}"
    );
    assert!(out.contains("0 error(s), 3 warning(s)"), "{out}");
}

#[test]
fn gen_does_not_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ShapedDevices.csv"), "mine").unwrap();
    let o = lqos(dir.path(), &["gen", "--circuits", "10"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("ShapedDevices.csv already exists; not overwriting it"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ShapedDevices.csv")).unwrap(),
        "mine"
    );
    let o = lqos(dir.path(), &["gen", "--circuits", "10", "--force"]);
    assert!(o.status.success());
    assert_ne!(
        std::fs::read_to_string(dir.path().join("ShapedDevices.csv")).unwrap(),
        "mine"
    );
}

/// Regression: on `lqos gen`'s own network every circuit's minimum was
/// squashed and `lqos check` said nothing. Generated networks now fit (the
/// planner squashes nothing), and `--oversubscribed` ones are reported
/// node by node: what was asked, what fits, how many circuits.
#[test]
fn squashed_minimums_are_reported_and_gen_networks_fit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (out, extra) in [("fit", None), ("over", Some("--oversubscribed"))] {
        let mut args = vec!["gen", "--circuits", "3000", "--out", out];
        args.extend(extra);
        assert!(lqos(d, &args).status.success());
    }
    let o = lqos(&d.join("fit"), &["check", "--strict", "--offline"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.ends_with("0 error(s), 0 warning(s)\n"), "{out}");

    let o = lqos(&d.join("over"), &["check", "--strict", "--offline"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("warning: ShapedDevices.csv: node \"AP_"))
        .collect();
    assert!(lines.len() > 10, "{out}");
    assert!(
        lines.iter().all(|l| l.contains(" circuit(s) add up to ")
            && l.contains("(down / up), more than the ")
            && l.ends_with("it guarantees: each gets 1 Mbps")),
        "{out}"
    );
    assert!(
        out.ends_with(&format!("0 error(s), {} warning(s)\n", lines.len())),
        "{out}"
    );
    // `lqos plan` says so too.
    let o = lqos(&d.join("over"), &["plan", "--out", "p"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains(&format!("minimums squashed in {} node(s)", lines.len())),
        "{out}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("warning: node \"AP_"))
            .count(),
        lines.len(),
        "{err}"
    );
}

/// `lqos check` looks up the interfaces lqos.conf names and names the key
/// of one that does not exist here.
#[test]
fn check_warns_of_configured_interfaces_that_do_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(lqos(d, &["gen", "--circuits", "20", "--out", "."])
        .status
        .success());
    let conf = std::fs::read_to_string(d.join("lqos.conf")).unwrap();
    std::fs::write(
        d.join("lqos.conf"),
        conf.replace("to_network = \"ens19\"", "to_network = \"ens99\"")
            .replace("to_internet = \"ens20\"", "to_internet = \"lo\""),
    )
    .unwrap();
    let o = lqos(d, &["check", "--strict"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains(
            "warning: lqos.conf: [bridge] to_network = \"ens99\": no such interface on this machine"
        ),
        "{out}"
    );
    assert!(!out.contains("\"lo\""), "lo exists: {out}");
    assert!(out.ends_with("0 error(s), 1 warning(s)\n"), "{out}");
    let o = lqos(d, &["check", "--strict", "--offline"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
}
