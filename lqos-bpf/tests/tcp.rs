//! TCP round trips and retransmits as the tc program measures them, on
//! crafted segment sequences (`BPF_PROG_TEST_RUN`): the handshake, data
//! and its echo, timestamps that wrap, a TSecr that matches nothing,
//! reordering against retransmission, flows without timestamps, a full
//! flow table, closing, IPv6 behind tags, circuits that share a classid.
//!
//! The test run's device is this namespace's loopback; its configuration
//! is switched between the subscriber-facing role (a packet leaving =
//! download) and the internet-facing one (leaving = upload) to send each
//! segment in its direction.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use lqos_bpf::layout::{
    circuit_tag, rtt_bucket_of, CircuitValue, IfaceConfig, Role, Side, Steer, TcpCircuit, TcpKey,
};
use lqos_bpf::loader::DataPath;
use lqos_bpf::model::MapKey;
use lqos_bpf::packet::{tcp_flags as F, Frame};
use lqos_bpf::tcp::{TcpMaps, TcpRead};
use lqos_bpf::testrun::run_tc;

const LO: u32 = 1;
const SUB: &str = "100.64.0.7";
const INET: &str = "198.51.100.1";
const SUB_PORT: u16 = 40000;
const INET_PORT: u16 = 443;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn circuit(n: u32, id: &str) -> CircuitValue {
    let s = Steer {
        classid: (1 << 16) | (0x10 + n),
        queue: 0,
        cpu: 0,
    };
    CircuitValue {
        down: s,
        up: s,
        circuit: n,
        tag: circuit_tag(id),
    }
}

struct Path {
    l: common::Loaded,
    sub: IpAddr,
    inet: IpAddr,
    key: TcpKey,
}

impl Path {
    fn new(tag: &str) -> Path {
        Path::with(common::load(tag), SUB, "100.64.0.7/32", INET)
    }

    fn with(mut l: common::Loaded, sub: &str, net: &str, inet: &str) -> Path {
        let c = circuit(1, "c1");
        l.maps
            .write(&MapKey::from_net(net.parse().unwrap()), &c)
            .unwrap();
        Path {
            l,
            sub: ip(sub),
            inet: ip(inet),
            key: c.tcp_key(),
        }
    }

    /// A segment from the far end to the subscriber (sequence `seq`,
    /// `len` bytes of data).
    fn down_seg(&self) -> Frame {
        Frame::tcp(self.inet, INET_PORT, self.sub, SUB_PORT)
    }

    fn up_seg(&self) -> Frame {
        Frame::tcp(self.sub, SUB_PORT, self.inet, INET_PORT)
    }

    fn run(&mut self, role: Role, f: Frame) {
        self.l
            .maps
            .set_iface(LO, &IfaceConfig::bridge(role, 1))
            .unwrap();
        run_tc(self.l.dp.tc(), &f.build(), LO, 1).unwrap();
    }

    /// Sends `f` leaving towards the subscriber (download).
    fn down(&mut self, f: Frame) {
        self.run(Role::Subscriber, f);
    }

    /// Sends `f` leaving towards the internet (upload).
    fn up(&mut self, f: Frame) {
        self.run(Role::Internet, f);
    }

    fn read(&self) -> TcpRead {
        TcpMaps::open(self.l.bpffs.path()).unwrap().read().unwrap()
    }

    fn stats(&self) -> TcpCircuit {
        self.read()
            .circuits
            .into_iter()
            .find(|(k, _)| *k == self.key)
            .map(|(_, v)| v)
            .unwrap_or_default()
    }
}

fn samples(c: &TcpCircuit) -> u64 {
    c.rtt.iter().flatten().map(|h| h.count).sum()
}

/// The one sample of histogram (`upload`, `side`) is between `at_least`
/// and `at_least` plus a margin for a loaded machine, and in its bucket.
fn assert_one_sample(c: &TcpCircuit, upload: bool, side: Side, at_least: Duration) {
    let h = c.hist(upload, side);
    assert_eq!(h.count, 1, "{side:?} upload={upload}: {h:?}");
    let ns = h.sum_ns;
    assert!(
        ns >= at_least.as_nanos() as u64
            && ns < (at_least + Duration::from_millis(250)).as_nanos() as u64,
        "{side:?}: {ns} ns, slept {at_least:?}"
    );
    assert_eq!(h.buckets[rtt_bucket_of(ns)], 1, "{side:?}: {ns} ns");
}

const SLEEP_A: Duration = Duration::from_millis(3);
const SLEEP_B: Duration = Duration::from_millis(6);

#[test]
fn the_handshake_times_both_sides() {
    if !common::require_root("the_handshake_times_both_sides") {
        return;
    }
    let mut p = Path::new("tcp-handshake");
    // SYN from the subscriber (SYN's option layout), SYN-ACK from the far
    // end echoing its TSval: the internet side. The subscriber's ACK
    // echoing the SYN-ACK's: the subscriber side.
    p.up(p.up_seg().flags(F::SYN).seq(1000).ts(100, 0).syn_options());
    std::thread::sleep(SLEEP_A);
    p.down(
        p.down_seg()
            .flags(F::SYN | F::ACK)
            .seq(9000)
            .ack(1001)
            .ts(5000, 100)
            .syn_options(),
    );
    std::thread::sleep(SLEEP_B);
    p.up(p.up_seg().seq(1001).ack(9001).ts(101, 5000));
    let c = p.stats();
    // No data yet: the handshake counts as download.
    assert_one_sample(&c, false, Side::Internet, SLEEP_A);
    assert_one_sample(&c, false, Side::Subscriber, SLEEP_B);
    assert_eq!(samples(&c), 2);
    assert_eq!((c.flows, c.unmeasured), (1, 0));
    assert_eq!(c.retransmits, [0, 0]);
    let h = p.read().health;
    assert_eq!((h.flows_new, h.samples, h.circuits), (1, 2, 1));
}

/// A download: data towards the subscriber, ACKs back; the samples go to
/// the download histograms; then an upload on another flow to the upload
/// ones.
#[test]
fn samples_go_to_the_direction_the_data_flows() {
    if !common::require_root("samples_go_to_the_direction_the_data_flows") {
        return;
    }
    let mut p = Path::new("tcp-direction");
    p.down(p.down_seg().seq(1).ts(10, 1).payload(1000));
    std::thread::sleep(SLEEP_A);
    p.up(p.up_seg().seq(7).ack(1001).ts(500, 10));
    std::thread::sleep(SLEEP_B);
    p.down(p.down_seg().seq(1001).ts(11, 500).payload(1000));
    let c = p.stats();
    assert_one_sample(&c, false, Side::Subscriber, SLEEP_A);
    assert_one_sample(&c, false, Side::Internet, SLEEP_B);
    // An upload from another port of the subscriber.
    let up = |p: &Path| Frame::tcp(p.sub, SUB_PORT + 1, p.inet, INET_PORT);
    let down = |p: &Path| Frame::tcp(p.inet, INET_PORT, p.sub, SUB_PORT + 1);
    p.up(up(&p).seq(1).ts(20, 1).payload(1400));
    std::thread::sleep(SLEEP_A);
    p.down(down(&p).seq(3).ack(1401).ts(90, 20));
    let c = p.stats();
    assert_one_sample(&c, true, Side::Internet, SLEEP_A);
    assert_eq!(c.hist(true, Side::Subscriber).count, 0);
    assert_eq!(c.flows, 2);
}

#[test]
fn timestamps_that_wrap_around_are_newer() {
    if !common::require_root("timestamps_that_wrap_around_are_newer") {
        return;
    }
    let mut p = Path::new("tcp-wrap");
    let mut seq = 1u32;
    let mut data = |p: &mut Path, ts: u32| {
        p.down(p.down_seg().seq(seq).ts(ts, 7).payload(100));
        seq += 100;
    };
    data(&mut p, 0xffff_fff0);
    p.up(p.up_seg().seq(1).ack(101).ts(8, 0xffff_fff0));
    assert_eq!(samples(&p.stats()), 1);
    // Past the wrap: 0x10 is newer than 0xfffffff0 and is timed.
    data(&mut p, 0x10);
    // An older TSval from before the wrap, seen late, is not.
    data(&mut p, 0xffff_fff8);
    p.up(p.up_seg().seq(1).ack(301).ts(9, 0x10));
    let c = p.stats();
    assert_eq!(c.hist(false, Side::Subscriber).count, 2);
    // The late one had an older TSval: reordering, not a retransmit.
    assert_eq!(c.retransmits, [0, 0]);
}

#[test]
fn a_tsecr_that_matches_nothing_takes_no_sample() {
    if !common::require_root("a_tsecr_that_matches_nothing_takes_no_sample") {
        return;
    }
    let mut p = Path::new("tcp-nomatch");
    p.down(p.down_seg().seq(1).ts(500, 1).payload(100));
    // Echoes of TSvals from before: the one waiting stays.
    p.up(p.up_seg().seq(1).ack(1).ts(2, 499));
    p.up(p.up_seg().seq(1).ack(1).ts(2, 0));
    assert_eq!(samples(&p.stats()), 0);
    // An echo past it (its segments were never echoed): no sample, and
    // the slot is free for the next new TSval.
    p.up(p.up_seg().seq(1).ack(101).ts(3, 777));
    assert_eq!(samples(&p.stats()), 0);
    p.down(p.down_seg().seq(101).ts(501, 3).payload(100));
    std::thread::sleep(SLEEP_A);
    p.up(p.up_seg().seq(1).ack(201).ts(4, 501));
    let c = p.stats();
    assert_one_sample(&c, false, Side::Subscriber, SLEEP_A);
    // The same echo again, and the same TSval again: nothing more.
    p.up(p.up_seg().seq(1).ack(201).ts(4, 501));
    p.down(p.down_seg().seq(201).ts(501, 4).payload(100));
    p.up(p.up_seg().seq(1).ack(301).ts(4, 501));
    assert_eq!(p.stats().hist(false, Side::Subscriber).count, 1);
}

#[test]
fn data_going_backwards_is_a_retransmit_unless_reordered() {
    if !common::require_root("data_going_backwards_is_a_retransmit_unless_reordered") {
        return;
    }
    let mut p = Path::new("tcp-retransmit");
    let seg = |p: &Path, seq: u32, ts: u32| p.down_seg().seq(seq).ts(ts, 1).payload(100);
    p.down(seg(&p, 1000, 50));
    p.down(seg(&p, 1200, 52));
    // Overtaken on the way: its TSval is older than the newest.
    p.down(seg(&p, 1100, 51));
    assert_eq!(p.stats().retransmits, [0, 0]);
    // Sent again: a TSval at least as new as the newest.
    p.down(seg(&p, 1100, 53));
    p.down(seg(&p, 1000, 53));
    assert_eq!(p.stats().retransmits, [2, 0]);
    // Pure ACKs never count; the sequence wraps.
    p.down(p.down_seg().seq(900).ts(54, 1));
    p.up(p.up_seg().seq(0xffff_ff00).ts(5, 1).payload(0x80));
    p.up(p.up_seg().seq(0xffff_ff80).ts(6, 1).payload(0x100));
    p.up(p.up_seg().seq(0x80).ts(7, 1).payload(0x10));
    assert_eq!(p.stats().retransmits, [2, 0]);
    p.up(p.up_seg().seq(0xffff_fff0).ts(8, 1).payload(0x10));
    assert_eq!(p.stats().retransmits, [2, 1]);
    // Without timestamps, any data going backwards counts.
    let f = |p: &Path, seq: u32| Frame::tcp(p.inet, 80, p.sub, 1).seq(seq).payload(10);
    p.down(f(&p, 100));
    p.down(f(&p, 110));
    p.down(f(&p, 100));
    assert_eq!(p.stats().retransmits, [3, 1]);
    // A SYN sent again.
    let syn = |p: &Path| Frame::tcp(p.sub, 2, p.inet, 80).flags(F::SYN).seq(5);
    p.up(syn(&p));
    p.up(syn(&p));
    assert_eq!(p.stats().retransmits, [3, 2]);
}

#[test]
fn flows_without_timestamps_are_counted_unmeasured() {
    if !common::require_root("flows_without_timestamps_are_counted_unmeasured") {
        return;
    }
    let mut p = Path::new("tcp-nots");
    p.up(p.up_seg().flags(F::SYN).seq(1));
    p.down(p.down_seg().flags(F::SYN | F::ACK).seq(1).ack(2));
    p.up(p.up_seg().seq(2).ack(2));
    for i in 0..5 {
        p.down(p.down_seg().seq(2 + i * 100).payload(100));
        p.up(p.up_seg().seq(2).ack(102 + i * 100));
    }
    let c = p.stats();
    assert_eq!((c.flows, c.unmeasured), (1, 1));
    assert_eq!(samples(&c), 0, "never a zero RTT: {c:?}");
}

#[test]
fn a_full_flow_table_evicts_the_oldest_and_keeps_measuring() {
    if !common::require_root("a_full_flow_table_evicts_the_oldest_and_keeps_measuring") {
        return;
    }
    let bpffs = lqos_bpf::sys::PrivateBpffs::new("tcp-full").unwrap();
    let dp = DataPath::load_with(bpffs.path(), lqos_bpf::loader::OBJECT, 1024).unwrap();
    let maps = dp.maps().unwrap();
    let mut p = Path::with(
        common::Loaded { dp, maps, bpffs },
        SUB,
        "100.64.0.7/32",
        INET,
    );
    let n = 3000u32;
    for i in 0..n {
        let port = 10_000 + i as u16;
        p.up(Frame::tcp(p.sub, port, p.inet, 443)
            .flags(F::SYN)
            .seq(1)
            .ts(i, 0));
    }
    let r = p.read();
    assert_eq!(r.health.flow_table_size, 1024);
    assert_eq!(
        (r.health.flows_new, r.health.flows_failed),
        (u64::from(n), 0)
    );
    assert_eq!(r.health.flows_tracked(), 1024);
    assert_eq!(r.health.evictions(), u64::from(n) - 1024);
    // The newest flows are still there: a SYN-ACK echoing one is timed.
    let last = 10_000 + (n - 1) as u16;
    p.down(
        Frame::tcp(p.inet, 443, p.sub, last)
            .flags(F::SYN | F::ACK)
            .seq(1)
            .ack(2)
            .ts(1, n - 1),
    );
    assert_eq!(p.stats().hist(false, Side::Internet).count, 1);
    assert_eq!(p.stats().flows, u64::from(n));
    // Loading again with another size makes a new table.
    drop(p.l.maps);
    let dp = DataPath::load_with(p.l.bpffs.path(), lqos_bpf::loader::OBJECT, 4096).unwrap();
    drop(dp);
    let t = TcpMaps::open(p.l.bpffs.path()).unwrap().read().unwrap();
    assert_eq!(t.health.flow_table_size, 4096);
}

#[test]
fn a_reset_or_fins_both_ways_close_the_flow() {
    if !common::require_root("a_reset_or_fins_both_ways_close_the_flow") {
        return;
    }
    let mut p = Path::new("tcp-close");
    p.down(p.down_seg().seq(1).ts(1, 1).payload(10));
    p.down(p.down_seg().seq(11).ts(2, 1).flags(F::FIN | F::ACK));
    assert_eq!(p.read().health.flows_closed, 0);
    p.up(p.up_seg().seq(1).ack(12).ts(3, 2).flags(F::FIN | F::ACK));
    assert_eq!(p.read().health.flows_closed, 1);
    // The last ACK and a late FIN make no new flow.
    p.down(p.down_seg().seq(12).ack(2).ts(4, 3));
    p.down(p.down_seg().seq(11).ts(2, 1).flags(F::FIN | F::ACK));
    assert_eq!(p.read().health.flows_new, 1);
    // A RST ends another at once.
    let f = |p: &Path| Frame::tcp(p.sub, 5, p.inet, 443);
    p.up(f(&p).seq(1).payload(5));
    p.up(f(&p).seq(6).flags(F::RST));
    let h = p.read().health;
    assert_eq!((h.flows_new, h.flows_closed), (2, 2));
}

#[test]
fn ipv6_behind_tags_and_pppoe_is_measured() {
    if !common::require_root("ipv6_behind_tags_and_pppoe_is_measured") {
        return;
    }
    let l = common::load("tcp-v6");
    let mut p = Path::with(
        l,
        "2001:db8:1:ff00::9",
        "2001:db8:1:ff00::/56",
        "2001:db8:ffff::1",
    );
    let wrap = |f: Frame| f.vlan(0x88a8, 7).vlan(0x8100, 8).pppoe().ipv6_ext(&[0, 60]);
    p.down(wrap(p.down_seg().seq(1).ts(40, 1).payload(1200)));
    std::thread::sleep(SLEEP_A);
    // SYN-style options: the walk finds the timestamps after MSS and SACK.
    p.up(wrap(p.up_seg().seq(1).ack(1201).ts(2, 40).syn_options()));
    assert_one_sample(&p.stats(), false, Side::Subscriber, SLEEP_A);
}

#[test]
fn circuits_sharing_a_classid_keep_apart_and_pruning_forgets_the_gone() {
    if !common::require_root("circuits_sharing_a_classid_keep_apart_and_pruning_forgets_the_gone") {
        return;
    }
    let mut p = Path::new("tcp-tag");
    p.down(p.down_seg().seq(1).payload(10));
    // The classid goes to another circuit: a new entry from its first flow.
    let other = CircuitValue {
        tag: circuit_tag("c2"),
        ..circuit(1, "c1")
    };
    p.l.maps
        .write(&MapKey::from_net("100.64.0.7/32".parse().unwrap()), &other)
        .unwrap();
    p.down(Frame::tcp(p.inet, 443, p.sub, 2).seq(1).payload(10));
    let r = p.read();
    assert_eq!(r.circuits.len(), 2, "{:?}", r.circuits);
    for (_, c) in &r.circuits {
        assert_eq!(c.flows, 1);
    }
    // A sync to entries that only have the new one forgets the old.
    let mut want = lqos_bpf::model::Entries::default();
    want.insert(MapKey::from_net("100.64.0.7/32".parse().unwrap()), other);
    assert_eq!(
        lqos_bpf::tcp::prune_for(p.l.bpffs.path(), &want).unwrap(),
        1
    );
    let r = p.read();
    assert_eq!(r.circuits.len(), 1);
    assert_eq!(r.circuits[0].0, other.tcp_key());
}

#[test]
fn an_interface_without_tracking_tracks_nothing() {
    if !common::require_root("an_interface_without_tracking_tracks_nothing") {
        return;
    }
    let mut p = Path::new("tcp-off");
    let cfg = IfaceConfig {
        track_tcp: false,
        ..IfaceConfig::bridge(Role::Subscriber, 1)
    };
    p.l.maps.set_iface(LO, &cfg).unwrap();
    let f = p.down_seg().seq(1).ts(1, 1).payload(10).build();
    let out = run_tc(p.l.dp.tc(), &f, LO, 1).unwrap();
    // Still classified.
    assert_eq!(out.priority, circuit(1, "c1").down.classid);
    assert_eq!(p.read().health.flows_new, 0);
}
