//! The data path on the machine's own shaped interfaces, named by
//! `LQOS_LIVE_IFACES` (the lab's virtio NICs `ens19,ens20`, where
//! `cargo xtask lab test` runs this binary): both programs attach (XDP in
//! the driver), the filter and link show up where `tc` and `ip` look, XPS
//! goes off on every TX queue, and removing leaves nothing. Skipped
//! without `LQOS_LIVE_IFACES`: never touches the host's interfaces.

mod common;

use lqos_bpf::attach::{remove_all, AttachOptions, TcStatus, XdpStatus};
use lqos_bpf::layout::{IfaceConfig, Role};
use lqos_bpf::sys::PrivateBpffs;

#[test]
fn the_live_interfaces_take_both_programs_and_give_them_back() {
    let Ok(ifaces) = std::env::var("LQOS_LIVE_IFACES") else {
        eprintln!("skipping: LQOS_LIVE_IFACES names no interfaces to attach to (the lab sets it)");
        return;
    };
    if !common::require_root("the_live_interfaces_take_both_programs_and_give_them_back") {
        return;
    }
    let names: Vec<&str> = ifaces.split(',').filter(|s| !s.is_empty()).collect();
    assert_eq!(
        names.len(),
        2,
        "LQOS_LIVE_IFACES={ifaces}: want DOWNLOAD,UPLOAD"
    );
    let bpffs = PrivateBpffs::new("live").unwrap();
    let pin = bpffs.path().join("lqos");
    let pre = lqos_bpf::preflight::preflight(&pin, None, &names).unwrap();
    eprintln!("preflight: {pre:?}");
    let mut dp = lqos_bpf::loader::DataPath::load(&pin).unwrap();
    let queues = pre.tx_queues[0].1 as u16;
    let ifs: Vec<lqos_bpf::attach::Interface> = names
        .iter()
        .zip([Role::Subscriber, Role::Internet])
        .map(|(n, role)| lqos_bpf::attach::Interface {
            name: n.to_string(),
            config: IfaceConfig::bridge(role, queues),
        })
        .collect();
    let opts = {
        let mut p = AttachOptions::default();
        p.cpus = lqos_bpf::sys::online_cpus().unwrap();
        p
    };
    let report = dp.attach(&ifs, &opts).unwrap();
    for r in &report {
        eprintln!("{}: {:?}", r.name, r);
        assert_eq!(r.tc, TcStatus::Attached);
        assert!(
            matches!(r.xdp, XdpStatus::Native | XdpStatus::Generic(_)),
            "{}: {:?}",
            r.name,
            r.xdp
        );
        assert_eq!(u32::from(queues), r.xps_off);
        assert!(lqos_bpf::xps::xps_enabled_here(&r.name).unwrap().is_empty());
        let filters = common::sh("tc", &["filter", "show", "dev", &r.name, "egress"]);
        assert!(
            filters.contains("lqos_tc") && filters.contains("pref 900"),
            "{filters}"
        );
        let link = common::sh("ip", &["link", "show", "dev", &r.name]);
        assert!(link.contains("prog/xdp"), "{link}");
    }
    // Attaching again replaces both in place.
    let mut dp2 = lqos_bpf::loader::DataPath::load(&pin).unwrap();
    for r in dp2.attach(&ifs, &opts).unwrap() {
        assert_eq!((r.tc, r.xdp), (TcStatus::Replaced, XdpStatus::Replaced));
    }
    let removed = remove_all(&pin).unwrap();
    assert_eq!(removed.len(), 2, "{removed:?}");
    for n in &names {
        let filters = common::sh("tc", &["filter", "show", "dev", n, "egress"]);
        assert!(!filters.contains("lqos_tc"), "{filters}");
        let link = common::sh("ip", &["link", "show", "dev", n]);
        assert!(!link.contains("prog/xdp"), "{link}");
    }
}
