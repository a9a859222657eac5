//! Black-box tests of the IP map and the classifier options: `lqos plan`
//! writes `ip_map.csv`, `lqos show --ip`, `--classifier` and lqos.conf's
//! `[lqos] classifier`.

use std::path::Path;
use std::process::{Command, Output};

const NETWORK: &str = r#"{
  "Site_1": {"downloadBandwidthMbps": 1000, "uploadBandwidthMbps": 500,
    "children": {"AP_A": {"downloadBandwidthMbps": 500, "uploadBandwidthMbps": 100}}},
  "Site_2": {"downloadBandwidthMbps": 200, "uploadBandwidthMbps": 200}
}"#;

const HEADER: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n";

const CONF: &str = "[bridge]\nto_internet = \"ens20\"\nto_network = \"ens19\"\n[queues]\ndefault_sqm = \"cake diffserv4\"\noverride_available_queues = 2\n";

/// Circuit names with a comma, a quote and a newline: untrusted CSV text.
const DEVICES: &str = "\
c1,\"Main St, 5 \"\"A\"\"\",d1,Router,AP_A,,\"100.64.0.1, 100.64.8.0/24\",2001:db8:1::/48,2.5,1,10.5,5.25,
c2,\"two\nlines\",d2,Router,AP_A,,100.64.0.2,,25,10,600,50,
c3,Farm,d3,Router,Site_2,,100.64.0.3,,100,10,100,20,
";

fn lqos(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lqos"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run lqos")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn setup(conf: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("network.json"), NETWORK).unwrap();
    std::fs::write(
        dir.path().join("ShapedDevices.csv"),
        format!("{HEADER}{DEVICES}"),
    )
    .unwrap();
    std::fs::write(dir.path().join("lqos.conf"), conf).unwrap();
    dir
}

#[test]
fn plan_writes_ip_map_csv_with_the_issue_columns() {
    let dir = setup(CONF);
    ok(&lqos(dir.path(), &["plan", "--out", "out"]));
    let text = std::fs::read_to_string(dir.path().join("out/ip_map.csv")).unwrap();
    let mut r = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "ip",
            "prefix_len",
            "circuit_id",
            "circuit_name",
            "download_dev",
            "download_queue",
            "download_classid",
            "upload_dev",
            "upload_queue",
            "upload_classid"
        ]
    );
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 5, "{text}");
    let row = |ip: &str| rows.iter().find(|r| &r[0] == ip).unwrap().clone();
    let c1 = row("100.64.8.0");
    assert_eq!(&c1[1], "24");
    assert_eq!(&c1[2], "c1");
    assert_eq!(&c1[3], "Main St, 5 \"A\"");
    assert_eq!((&c1[4], &c1[7]), ("ens19", "ens20"));
    assert_eq!(&row("100.64.0.2")[3], "two\nlines");
    assert_eq!(&row("2001:db8:1::")[1], "48");
    // The classid is the circuit's class in tc_ens19.txt, on that queue's HTB.
    let q: u16 = c1[5].parse().unwrap();
    let classid = &c1[6];
    assert!(classid.starts_with(&format!("{:x}:", q + 1)), "{classid}");
    let ens19 = std::fs::read_to_string(dir.path().join("out/tc_ens19.txt")).unwrap();
    assert!(ens19.contains(&format!(
        "classid {classid} htb rate 2500kbit ceil 10500kbit"
    )));
    // Default classifier none: no filters in the tc files. plan.json (a
    // compact plan record) keeps every address with its filter handle, and
    // re-plans to the same IP map.
    assert!(!ens19.contains("filter"));
    let json = std::fs::read_to_string(dir.path().join("out/plan.json")).unwrap();
    assert!(
        json.contains("\"prefixes\"") && json.contains("\"100.64.8.0/24\""),
        "{json}"
    );
    let out = ok(&lqos(
        dir.path(),
        &["show", "--plan", "out/plan.json", "--ip", "100.64.8.1"],
    ));
    assert!(out.contains(&format!("class {classid} ")), "{out}");
}

#[test]
fn classifier_from_flag_and_from_lqos_conf() {
    let dir = setup(CONF);
    let out = ok(&lqos(
        dir.path(),
        &["plan", "--classifier", "tc", "--out", "a"],
    ));
    assert!(out.contains("classifier tc"), "{out}");
    let ens19 = std::fs::read_to_string(dir.path().join("a/tc_ens19.txt")).unwrap();
    let ens20 = std::fs::read_to_string(dir.path().join("a/tc_ens20.txt")).unwrap();
    assert!(ens19.contains("qdisc replace dev ens19 clsact\n"));
    assert_eq!(ens19.matches(" flower dst_ip ").count(), 5);
    assert_eq!(ens20.matches(" flower src_ip ").count(), 5);
    // The text parses back (tc -b syntax lqos reads too).
    lqos_tc::parse::parse_batch(&ens19).unwrap();

    let dir = setup(&format!("{CONF}[lqos]\nclassifier = \"tc\"\n"));
    ok(&lqos(dir.path(), &["plan", "--out", "b"]));
    let ens19 = std::fs::read_to_string(dir.path().join("b/tc_ens19.txt")).unwrap();
    assert!(ens19.contains(" flower dst_ip 100.64.0.1/32 action skbedit queue_mapping "));
    // The flag wins over lqos.conf.
    ok(&lqos(
        dir.path(),
        &["plan", "--classifier", "none", "--out", "c"],
    ));
    let ens19 = std::fs::read_to_string(dir.path().join("c/tc_ens19.txt")).unwrap();
    assert!(!ens19.contains("filter"));
    // A bad value names the section and key.
    let dir = setup(&format!("{CONF}[lqos]\nclassifier = \"xdp\"\n"));
    let out = lqos(dir.path(), &["plan", "--out", "d"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[lqos] classifier") && err.contains("xdp"),
        "{err}"
    );
}

#[test]
fn show_ip_answers_longest_prefix_and_unknown() {
    let dir = setup(CONF);
    let out = ok(&lqos(dir.path(), &["show", "--ip", "100.64.8.77"]));
    assert!(out.contains("circuit \"c1\""), "{out}");
    assert!(out.contains("matched 100.64.8.0/24"), "{out}");
    assert!(out.contains("node path: Site_1 > AP_A"), "{out}");
    assert!(out.contains("download: ens19 tx queue "), "{out}");
    assert!(out.contains("rate 2500kbit ceil 10500kbit, leaf "), "{out}");
    assert!(out.contains("upload: ens20 tx queue "), "{out}");
    assert!(out.contains("cake diffserv4"), "{out}");
    // Untrusted names print escaped on one line.
    let out = ok(&lqos(dir.path(), &["show", "--ip", "100.64.0.2"]));
    assert!(out.contains("(\"two\\nlines\")"), "{out}");
    let out = ok(&lqos(dir.path(), &["show", "--ip", "2001:db8:1::9"]));
    assert!(out.contains("matched 2001:db8:1::/48"), "{out}");
    let out = ok(&lqos(dir.path(), &["show", "--ip", "192.0.2.1"]));
    assert!(
        out.contains("192.0.2.1: not shaped: goes to the default class"),
        "{out}"
    );
    // From a saved plan too.
    ok(&lqos(dir.path(), &["plan", "--out", "p"]));
    let out = ok(&lqos(
        dir.path(),
        &["show", "--plan", "p/plan.json", "--ip", "100.64.0.3"],
    ));
    assert!(
        out.contains("circuit \"c3\"") && out.contains("node path: Site_2"),
        "{out}"
    );
}
