//! The programs run by the kernel (`BPF_PROG_TEST_RUN`) on crafted frames:
//! loading them here is the verifier check.

mod common;

use std::net::IpAddr;

use lqos_bpf::layout::{CircuitValue, DefaultQueues, IfaceConfig, Role, Steer};
use lqos_bpf::model::MapKey;
use lqos_bpf::packet::Frame;
use lqos_bpf::testrun::{run_tc, run_xdp, TC_ACT_OK, XDP_PASS};

/// The test run's device: this network namespace's loopback.
const LO: u32 = 1;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn circuit(n: u32, down_q: u16, up_q: u16) -> CircuitValue {
    CircuitValue {
        down: Steer {
            classid: (u32::from(down_q) + 1) << 16 | (0x10 + n),
            queue: down_q,
            cpu: down_q % 2,
        },
        up: Steer {
            classid: (u32::from(up_q) + 1) << 16 | (0x10 + n),
            queue: up_q,
            cpu: up_q % 2,
        },
        circuit: n,
    }
}

fn bridge_side(role: Role) -> IfaceConfig {
    IfaceConfig {
        role,
        xdp_redirect: true,
        default_minor: 2,
        down: DefaultQueues {
            queue_base: 0,
            queue_count: 4,
        },
        up: DefaultQueues {
            queue_base: 0,
            queue_count: 4,
        },
    }
}

#[test]
fn tc_sets_the_circuits_classid_for_a_host() {
    if !common::require_root("tc_sets_the_circuits_classid_for_a_host") {
        return;
    }
    let mut l = common::load("tc-host");
    l.maps
        .set_iface(LO, &bridge_side(Role::Subscriber))
        .unwrap();
    let c = circuit(1, 2, 3);
    l.maps
        .write(&MapKey::from_net("100.64.0.7/32".parse().unwrap()), &c)
        .unwrap();
    let f = Frame::udp(ip("198.51.100.1"), ip("100.64.0.7")).build();
    let out = run_tc(l.dp.tc(), &f, LO, 1).unwrap();
    assert_eq!(out.action, TC_ACT_OK);
    assert_eq!(out.priority, c.down.classid);
    let x = run_xdp(l.dp.xdp(), &f, LO, 1).unwrap();
    // Arriving on the subscriber side: upload, keyed by the source (no circuit).
    assert_eq!(x.action, XDP_PASS);
}
