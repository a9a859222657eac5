//! Black-box tests of `lqos plan`, `lqos show` and `lqos diff`.

mod common;

use common::{legacy_header, lqos, ok};

const NETWORK: &str = r#"{
  "Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 500,
    "children": {"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100}}},
  "Site_2": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 200}
}"#;

const CONF: &str = "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n[queues]\ndefault_sqm = \"cake diffserv4\"\noverride_available_queues = 2\n";

fn setup(devices: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("network.json"), NETWORK).unwrap();
    std::fs::write(
        dir.path().join("ShapedDevices.csv"),
        format!("{}\n{devices}", legacy_header()),
    )
    .unwrap();
    std::fs::write(dir.path().join("lqos.conf"), CONF).unwrap();
    dir
}

const DEVICES: &str = "\
c1,\"Main St, 5\",d1,Router,AP_A,,100.64.0.1,,2.5,1,10.5,5.25,
c2,Shop,d2,Router,AP_A,,100.64.0.2,,25,10,600,50,
c3,Farm,d3,Router,Site_2,,100.64.0.3,,100,10,100,20,
";

#[test]
fn plan_writes_files_and_counts() {
    let dir = setup(DEVICES);
    let out = ok(&lqos(dir.path(), &["plan", "--out", "out"]));
    assert!(out.contains("ens19 (Download): "), "{out}");
    assert!(out.contains("classes per queue: 6 4"), "{out}");
    let d = dir.path().join("out");
    let ens19 = std::fs::read_to_string(d.join("tc_ens19.txt")).unwrap();
    let ens20 = std::fs::read_to_string(d.join("tc_ens20.txt")).unwrap();
    let combined = std::fs::read_to_string(d.join("linux_tc.txt")).unwrap();
    assert!(ens19.starts_with("qdisc replace dev ens19 root handle 7fff: mq\n"));
    assert!(
        ens19.contains(" htb rate 2500kbit ceil 10500kbit prio 3 quantum 1522\n"),
        "{ens19}"
    );
    assert!(
        ens20.contains(" htb rate 1mbit ceil 5250kbit prio 3 quantum 1522\n"),
        "{ens20}"
    );
    assert!(!ens19.contains("ens20") && !ens20.contains("ens19"));
    assert_eq!(
        combined.lines().count(),
        ens19.lines().count() + ens20.lines().count()
    );
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("plan.json")).unwrap()).unwrap();
    // plan.json is the compact record: inputs and allocation, no ops.
    assert_eq!(plan["format"], 2);
    assert_eq!(plan["inputs"]["circuits"].as_array().unwrap().len(), 3);
    assert!(plan.get("interfaces").is_none());
    // --with-ops keeps the ops; both re-read to the same plan (lqos show).
    ok(&lqos(dir.path(), &["plan", "--out", "o3", "--with-ops"]));
    let with_ops: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("o3/plan.json")).unwrap())
            .unwrap();
    assert_eq!(with_ops["interfaces"].as_array().unwrap().len(), 2);
    let a = ok(&lqos(dir.path(), &["show", "--plan", "out/plan.json"]));
    let b = ok(&lqos(dir.path(), &["show", "--plan", "o3/plan.json"]));
    assert_eq!(a, b);
    // --queues, --sqm, --strategy, --root-delete override lqos.conf.
    let out = ok(&lqos(
        dir.path(),
        &[
            "plan",
            "--out",
            "o2",
            "--queues",
            "3",
            "--sqm",
            "fq_codel",
            "--strategy",
            "round-robin",
            "--root-delete",
        ],
    ));
    assert!(out.contains("3 queue(s)"), "{out}");
    let ens19 = std::fs::read_to_string(dir.path().join("o2/tc_ens19.txt")).unwrap();
    assert!(ens19.starts_with("qdisc del dev ens19 root\n"));
    assert!(ens19.contains("fq_codel") && !ens19.contains("cake"));
}

#[test]
fn plan_errors_are_clear() {
    let dir = setup("c1,A,d1,R,AP_A,,100.64.0.1,,1,1,10,10,\n");
    let out = lqos(dir.path(), &["plan", "--out", "out", "--sqm", "sfq"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sqm \"sfq\""));
    let out = lqos(
        dir.path(),
        &["plan", "--out", "out", "--network", "missing.json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.json"));
    // Invalid inputs (a zero rate) are refused before planning.
    let dir = setup("c1,A,d1,R,AP_A,,100.64.0.1,,0,1,10,10,\n");
    let out = lqos(dir.path(), &["plan", "--out", "out"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("download min 0 is zero"));
}

#[test]
fn a_circuit_whose_parent_node_is_not_in_network_json_is_planned_unshaped_with_a_warning() {
    let dir = setup(
        "c1,A,d1,R,AP_A,,100.64.0.1,,1,1,10,10,\nc2,B,d2,R,Nowhere,,100.64.0.2,,1,1,10,10,\n",
    );
    let warning = "warning: ShapedDevices.csv:3: circuit \"c2\": parent node \"Nowhere\" does not exist in network.json; the circuit is not shaped";
    let out = lqos(dir.path(), &["plan", "--out", "out"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(warning));
    let ip_map = std::fs::read_to_string(dir.path().join("out/ip_map.csv")).unwrap();
    assert!(
        ip_map.contains("100.64.0.1") && !ip_map.contains("100.64.0.2"),
        "{ip_map}"
    );
    let out = lqos(dir.path(), &["check"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1 circuits, 1 devices (1 more not shaped: parent node not in network.json)"),
        "{text}"
    );
    assert!(text.contains(warning), "{text}");
}

#[test]
fn show_prints_the_tree() {
    let dir = setup(DEVICES);
    let out = ok(&lqos(
        dir.path(),
        &["show", "--circuits", "--interface", "ens19"],
    ));
    assert!(out.starts_with("ens19 (Download)\n"), "{out}");
    // Queues are numbered from 0, as the kernel's tx-N and ip_map.csv
    // number them (regression: `show` counted from 1, `show --ip` and
    // ip_map.csv from 0).
    assert!(
        out.contains("  tx queue 0 1:1 rate 1gbit ceil 1gbit: 6 classes"),
        "{out}"
    );
    assert!(
        out.contains("    Site_1 1:3 rate 999mbit ceil 1gbit, circuits 0 (subtree 2)"),
        "{out}"
    );
    assert!(
        out.contains("      AP_A 1:4 rate 499mbit ceil 500mbit, circuits 2 (subtree 2)"),
        "{out}"
    );
    assert!(
        out.contains("circuit c1 \"Main St, 5\" 1:5 rate 2500kbit ceil 10500kbit, leaf "),
        "{out}"
    );
    assert!(!out.contains("ens20"));
    // From a saved plan.
    ok(&lqos(dir.path(), &["plan", "--out", "out"]));
    let saved = ok(&lqos(
        dir.path(),
        &[
            "show",
            "--plan",
            "out/plan.json",
            "--circuits",
            "--interface",
            "ens19",
        ],
    ));
    assert_eq!(saved, out);
    assert!(!lqos(dir.path(), &["show", "--interface", "eth9"])
        .status
        .success());
}

#[test]
fn diff_of_plans_and_inputs() {
    let dir = setup(DEVICES);
    ok(&lqos(dir.path(), &["plan", "--out", "old"]));
    // c1 faster, c2 gone, c4 new.
    let devices = "\
c1,\"Main St, 5\",d1,Router,AP_A,,100.64.0.1,,2.5,1,20,5.25,
c3,Farm,d3,Router,Site_2,,100.64.0.3,,100,10,100,20,
c4,New,d4,Router,Site_2,,100.64.0.4,,1,1,10,10,
";
    std::fs::write(
        dir.path().join("ShapedDevices.csv"),
        format!("{}\n{devices}", legacy_header()),
    )
    .unwrap();
    ok(&lqos(
        dir.path(),
        &["plan", "--out", "new", "--previous", "old/plan.json"],
    ));
    let out = ok(&lqos(
        dir.path(),
        &["diff", "old/plan.json", "new/plan.json"],
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.contains(&"class change dev ens19 parent 1:4 classid 1:5 htb rate 2500kbit ceil 20mbit prio 3 quantum 1522"), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("class del dev ens19 parent 1:4 classid 1:6")),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("class add dev ens20 parent 2:3 classid 2:")),
        "{out}"
    );
    // ens19: c1 change; c2 leaf+class removed; c4 class+leaf added. Same on ens20 except c1 (upload unchanged).
    assert_eq!(*lines.last().unwrap(), "4 added, 1 changed, 4 removed");
    // Same diff straight from the inputs (keeping OLD's classids).
    let from_inputs = ok(&lqos(dir.path(), &["diff", "old/plan.json"]));
    assert_eq!(from_inputs, out);
    // Old side from inputs too.
    std::fs::write(
        dir.path().join("old.csv"),
        format!("{}\n{DEVICES}", legacy_header()),
    )
    .unwrap();
    let both = ok(&lqos(
        dir.path(),
        &[
            "diff",
            "--old-network",
            "network.json",
            "--old-devices",
            "old.csv",
            "--summary",
        ],
    ));
    assert_eq!(both, "4 added, 1 changed, 4 removed\n");
    // No change: empty diff.
    let same = ok(&lqos(
        dir.path(),
        &["diff", "new/plan.json", "new/plan.json"],
    ));
    assert_eq!(same, "0 added, 0 changed, 0 removed\n");
}

#[test]
fn streamed_outputs_equal_the_in_memory_renderers() {
    // Large enough that every file is written in several 64 KiB chunks,
    // on two threads.
    let dir = tempfile::tempdir().unwrap();
    ok(&lqos(
        dir.path(),
        &["gen", "--circuits", "1500", "--sites", "6", "--out", "."],
    ));
    ok(&lqos(
        dir.path(),
        &["plan", "--out", "out", "--root-delete"],
    ));
    let d = dir.path().join("out");
    let plan = lqos_apply::inputs::read_plan(&d.join("plan.json")).unwrap();
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    for ip in &plan.interfaces {
        let text = read(&format!("tc_{}.txt", ip.dev));
        assert!(text.len() > 3 * 64 * 1024, "{} bytes", text.len());
        assert_eq!(text, lqos_tc::render::render_interface(ip, true));
    }
    assert_eq!(
        read("linux_tc.txt"),
        lqos_tc::render::render_combined(&plan, true)
    );
    let csv = read("ip_map.csv");
    assert!(csv.len() > 64 * 1024);
    assert_eq!(csv, plan.ip_map.to_csv());
    assert_eq!(csv.lines().count(), plan.ip_map.len() + 1);
}

#[test]
fn unwritable_outputs_name_the_file() {
    let dir = setup(DEVICES);
    for name in ["plan.json", "tc_ens19.txt", "ip_map.csv"] {
        let out = format!("out-{name}");
        // A directory where the file should go cannot be created as a file.
        std::fs::create_dir_all(dir.path().join(&out).join(name)).unwrap();
        let o = lqos(dir.path(), &["plan", "--out", &out]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("cannot write") && err.contains(&format!("{out}/{name}")),
            "{err}"
        );
    }
}

/// Regression: `show` counted queues from 1 (`queue 3 3:1`) where `show
/// --ip` and `ip_map.csv` count from 0 (`tx queue 2`). One numbering
/// everywhere: the kernel's TX queue `tx-N`, from 0 (its HTB is N+1:).
#[test]
fn every_view_numbers_a_circuits_queue_the_same() {
    let dir = setup(DEVICES);
    let d = dir.path();
    ok(&lqos(d, &["plan", "--out", "out"]));
    let map = std::fs::read_to_string(d.join("out/ip_map.csv")).unwrap();
    let col = csv::Reader::from_reader(map.as_bytes())
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "download_queue")
        .unwrap();
    for (id, addr) in [("c1", "100.64.0.1"), ("c3", "100.64.0.3")] {
        let row = csv::Reader::from_reader(map.as_bytes())
            .records()
            .map(|r| r.unwrap())
            .find(|r| r.iter().any(|f| f == id))
            .unwrap();
        let q: u32 = row[col].parse().unwrap();
        let ip = ok(&lqos(d, &["show", "--ip", addr]));
        assert!(
            ip.contains(&format!("download: ens19 tx queue {q} class {}:", q + 1)),
            "{id}: queue {q}: {ip}"
        );
        // Under which `tx queue N` block `show --circuits` lists it.
        let tree = ok(&lqos(d, &["show", "--circuits", "--interface", "ens19"]));
        let mut block = None;
        for l in tree.lines() {
            if let Some(rest) = l.strip_prefix("  tx queue ") {
                block = rest.split(' ').next().and_then(|n| n.parse::<u32>().ok());
            }
            if l.trim_start().starts_with(&format!("circuit {id} ")) {
                assert_eq!(block, Some(q), "{id}: {tree}");
            }
        }
    }
}
