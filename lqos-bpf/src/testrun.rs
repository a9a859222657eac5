//! Running the programs on crafted packets with `BPF_PROG_TEST_RUN`: the
//! kernel runs the verified program on a copy of the frame, as it would
//! on the wire, and returns its verdict (and for tc the `__sk_buff`'s
//! `priority`). Used by the tests and the per-packet benchmarks.

use std::time::Duration;

use aya::programs::{SchedClassifier, TestRun, TestRunOptions, Xdp};

use crate::error::{BpfError, Result};
use crate::layout::programs;

/// `XDP_PASS`.
pub const XDP_PASS: u32 = 2;
/// `XDP_REDIRECT`.
pub const XDP_REDIRECT: u32 = 4;
/// `TC_ACT_OK`.
pub const TC_ACT_OK: u32 = 0;

/// `sizeof(struct __sk_buff)`.
const SKB_CTX: usize = 192;
/// `offsetof(struct __sk_buff, priority)`.
const SKB_PRIORITY: usize = 32;
/// `offsetof(struct __sk_buff, ifindex)`.
const SKB_IFINDEX: usize = 40;

/// What the tc program did to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcOutcome {
    /// Its verdict (`TC_ACT_OK`).
    pub action: u32,
    /// `skb->priority` after it ran (the classid; 0 = untouched).
    pub priority: u32,
    /// Mean time per run.
    pub per_run: Duration,
}

/// What the XDP program did to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpOutcome {
    /// Its verdict (`XDP_PASS`, `XDP_REDIRECT`).
    pub action: u32,
    /// Mean time per run.
    pub per_run: Duration,
}

/// Runs the tc program `repeat` times on `frame` (an Ethernet frame, at
/// least 14 bytes) as if leaving interface `ifindex` (in the caller's
/// network namespace; 1 is its loopback).
pub fn run_tc(
    prog: &SchedClassifier,
    frame: &[u8],
    ifindex: u32,
    repeat: u32,
) -> Result<TcOutcome> {
    let mut ctx_in = [0u8; SKB_CTX];
    ctx_in[SKB_IFINDEX..SKB_IFINDEX + 4].copy_from_slice(&ifindex.to_ne_bytes());
    let mut ctx_out = [0u8; SKB_CTX];
    let mut data_out = vec![0u8; frame.len() + 256];
    let r = prog
        .test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut data_out),
            ctx_in: Some(&ctx_in),
            ctx_out: Some(&mut ctx_out),
            repeat: repeat.max(1),
            ..Default::default()
        })
        .map_err(BpfError::program(
            programs::TC,
            format!("test run on a {}-byte frame", frame.len()),
        ))?;
    let p = &ctx_out[SKB_PRIORITY..SKB_PRIORITY + 4];
    Ok(TcOutcome {
        action: r.return_value,
        priority: u32::from_ne_bytes([p[0], p[1], p[2], p[3]]),
        per_run: r.duration,
    })
}

/// Runs the XDP program `repeat` times on `frame` as received on
/// `ifindex` (RX queue 0). The redirect itself is not carried out: its
/// target shows in the `lqos1_redirects` counters.
pub fn run_xdp(prog: &Xdp, frame: &[u8], ifindex: u32, repeat: u32) -> Result<XdpOutcome> {
    // struct xdp_md { data, data_end, data_meta, ingress_ifindex,
    // rx_queue_index, egress_ifindex }: data_end = the frame's length.
    let mut ctx = [0u8; 24];
    ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
    ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
    let mut data_out = vec![0u8; frame.len() + 256];
    let r = prog
        .test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut data_out),
            ctx_in: Some(&ctx),
            repeat: repeat.max(1),
            ..Default::default()
        })
        .map_err(BpfError::program(
            programs::XDP,
            format!("test run on a {}-byte frame", frame.len()),
        ))?;
    Ok(XdpOutcome {
        action: r.return_value,
        per_run: r.duration,
    })
}
