//! Golden bytes, every capture both ways: `encode_op` must produce exactly
//! what iproute2's `tc` (6.1) sends for the same command, captured with
//! strace by `tests/fixtures/netlink/capture.sh` and `capture_filters.sh`
//! (one `.hex` file per command, the tc command in its header), and tc's
//! bytes must decode back into the op. Seq and ifindex are taken from the
//! capture. Each capture also has its own golden test beside its kind in
//! `src/netlink/<kind>.rs`.
//!
//! Normalisation, only where lqos deliberately differs, done explicitly on
//! tc's bytes before an exact comparison:
//! - HTB classes: tc appends `TCA_HTB_RTAB` and `TCA_HTB_CTAB` (1 KiB rate
//!   tables each). With linklayer ethernet the kernel ignores them, so lqos
//!   omits them: [`strip_htb_rate_tables`].
//! - HTB classes whose default burst is below 1 µs of transmit time (rates
//!   above ~12.8 Gbit): tc 6.1 truncates the time to whole µs and sends
//!   `buffer`/`cbuffer` = 0 ticks; lqos sends the untruncated tick count,
//!   which replaces tc's zeros.

use lqos_apply::netlink::golden::{
    assert_same, htb_parms_offset, load, ours, strip_htb_rate_tables,
};
use lqos_apply::netlink::PschedClock;
use lqos_tc::TcOp;

/// The captures' directory (shared with the goldens beside each kind).
mod golden_hex {
    pub use lqos_apply::netlink::golden::fixtures_dir;
}

/// Every capture, both ways, driven by the `tc` command in its header (no
/// hand-written op; the classifier's `clsact` and flower captures
/// included, the egress filter dump request excepted as it is no op): the command parsed by `lqos_tc::parse` and encoded is
/// tc's message (normalised as described at the top); and tc's own bytes
/// decoded are the parsed op, where a burst the command leaves to tc's
/// default (`None`) decodes to that default to within the 1 µs tick
/// truncation of tc's formula.
#[test]
fn every_capture_both_ways() {
    let dir = golden_hex::fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".hex").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 25, "captures: {names:?}");
    let clock = PschedClock::default();
    for name in &names {
        let g = load(name);
        if g.command.contains(" show ") {
            // Dump requests, not ops: no TcOp to parse or decode into; their
            // bytes are checked against `class_dump_request`
            // (src/netlink/htb.rs, htb_class_dump_parent) and
            // `filter_dump_request` (src/netlink/flower.rs,
            // flower_dump_request).
            continue;
        }
        let line = g.command.strip_prefix("tc ").unwrap_or(&g.command);
        let (dev, op) = lqos_tc::parse::parse_line(line)
            .unwrap_or_else(|e| panic!("{name}: `{}`: {e}", g.command));
        assert_eq!(dev, "ens19", "{name}");

        // Parsed -> encoded == tc's bytes (normalised).
        let lqos = ours(&g, &op);
        let mut tc = g.bytes.clone();
        if matches!(op, TcOp::AddClass(_) | TcOp::ChangeClass(_)) {
            tc = strip_htb_rate_tables(&tc);
            let p = htb_parms_offset(&tc);
            if tc[p + 24..p + 32] == [0u8; 8] {
                // tc 6.1's zero ticks above ~12.8 Gbit (see the top).
                let q = htb_parms_offset(&lqos);
                tc[p + 24..p + 32].copy_from_slice(&lqos[q + 24..q + 32]);
            }
        }
        assert_same(name, &tc, &lqos);

        // tc's bytes -> decoded == parsed.
        let (ifindex, mut decoded) = lqos_apply::netlink::decode_request(&g.bytes, &clock)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            ifindex,
            i32::from_ne_bytes(g.bytes[20..24].try_into().unwrap())
        );
        let mut wanted = op.clone();
        match (&mut decoded, &mut wanted) {
            (TcOp::AddClass(d), TcOp::AddClass(w))
            | (TcOp::ChangeClass(d), TcOp::ChangeClass(w)) => {
                for (got, want, rate) in [
                    (&mut d.htb.burst, &mut w.htb.burst, w.htb.rate),
                    (&mut d.htb.cburst, &mut w.htb.cburst, w.htb.ceil),
                ] {
                    let got_v = got.expect("decoded burst");
                    let want_v = want.unwrap_or_else(|| clock.default_burst(rate.bytes_per_sec()));
                    let one_us = (rate.bytes_per_sec() / 1_000_000 + 1) as u32;
                    assert!(
                        got_v <= want_v && want_v - got_v <= one_us.max(2),
                        "{name}: burst {got_v} vs {want_v} (1 us = {one_us} bytes)"
                    );
                    *got = *want;
                }
            }
            (TcOp::AddQdisc(d), TcOp::AddQdisc(w))
            | (TcOp::ReplaceQdisc(d), TcOp::ReplaceQdisc(w)) => {
                // tc always sends HTB's rate2quantum (10 unless given).
                if let (lqos_tc::ops::QdiscKind::Htb(dh), lqos_tc::ops::QdiscKind::Htb(wh)) =
                    (&mut d.kind, &w.kind)
                {
                    assert_eq!(dh.r2q, Some(wh.r2q.unwrap_or(10)), "{name}");
                    dh.r2q = wh.r2q;
                }
            }
            _ => {}
        }
        assert_eq!(decoded, wanted, "{name} ({}): decoded tc bytes", g.command);
    }
}
