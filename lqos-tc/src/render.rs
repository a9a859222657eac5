//! Rendering typed ops as `tc -b` text.
//!
//! Rates are printed exactly in the largest SI unit that divides them
//! (`gbit`, `mbit`, `kbit`, `bit`; tc parses these as powers of 1000).
//! Nothing from the input files (names, comments) is ever written, so no
//! CSV text can end a line or add a command.

use crate::op::TcOp;
use crate::plan::{InterfacePlan, Plan};
use crate::text::{bytes_to_string, Out};
pub use crate::text::{rate_to_tc, render_line, write_kind, write_op, write_rate};

/// All ops of one interface, one line each; with `root_delete` the text
/// starts with `qdisc del dev X root`.
pub fn render_interface(ip: &InterfacePlan, root_delete: bool) -> String {
    let mut b = Vec::with_capacity(ip.ops.len() * 80 + 64);
    let _ = interface_chunks(
        ip,
        root_delete,
        usize::MAX,
        &mut |_| Ok::<(), ()>(()),
        &mut b,
    );
    bytes_to_string(b)
}

/// [`render_interface`], written to `w` in chunks of about 64 KiB (the
/// text is never held whole).
pub fn render_interface_to<W: std::io::Write>(
    ip: &InterfacePlan,
    root_delete: bool,
    w: &mut W,
) -> std::io::Result<()> {
    write_chunked(w, |flush, b| {
        interface_chunks(ip, root_delete, CHUNK, flush, b)
    })
}

/// Buffer size of the `*_to` renderers.
const CHUNK: usize = 64 * 1024;

/// Renders `ip` into `b`, handing `b` to `flush` (which empties it) each
/// time it holds `chunk` bytes or more.
fn interface_chunks<E>(
    ip: &InterfacePlan,
    root_delete: bool,
    chunk: usize,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
    b: &mut Vec<u8>,
) -> Result<(), E> {
    let mut w = Out::new(&ip.dev, 0);
    std::mem::swap(&mut w.b, b);
    let mut res = Ok(());
    if root_delete {
        w.op(&TcOp::delete_root());
        w.nl();
    }
    for op in &ip.ops {
        w.op(op);
        w.nl();
        if w.b.len() >= chunk {
            res = flush(&mut w.b);
            if res.is_err() {
                break;
            }
        }
    }
    std::mem::swap(&mut w.b, b);
    res
}

/// The combined file in the order LibreQoS writes `linux_tc.txt`: the queue
/// setup of every interface, then the node and circuit lines interleaved
/// (download class, its leaf, upload class, its leaf). With `root_delete`
/// the file starts with one root delete per interface.
pub fn render_combined(plan: &Plan, root_delete: bool) -> String {
    let total: usize = plan.interfaces.iter().map(|i| i.ops.len()).sum();
    let mut b: Vec<u8> = Vec::with_capacity(total * 80 + 128);
    let _ = combined_chunks(
        plan,
        root_delete,
        usize::MAX,
        &mut |_| Ok::<(), ()>(()),
        &mut b,
    );
    bytes_to_string(b)
}

/// [`render_combined`], written to `w` in chunks of about 64 KiB (the
/// text is never held whole).
pub fn render_combined_to<W: std::io::Write>(
    plan: &Plan,
    root_delete: bool,
    w: &mut W,
) -> std::io::Result<()> {
    write_chunked(w, |flush, b| {
        combined_chunks(plan, root_delete, CHUNK, flush, b)
    })
}

/// Runs a `*_chunks` renderer with a [`CHUNK`]-sized buffer whose flush
/// writes to `w`, then writes what is left.
fn write_chunked<W: std::io::Write>(
    w: &mut W,
    render: impl FnOnce(
        &mut dyn FnMut(&mut Vec<u8>) -> std::io::Result<()>,
        &mut Vec<u8>,
    ) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut b = Vec::with_capacity(CHUNK + 512);
    let mut flush = |b: &mut Vec<u8>| {
        let r = w.write_all(b);
        b.clear();
        r
    };
    render(&mut flush, &mut b)?;
    flush(&mut b)
}

/// Renders the combined file into `b`, handing `b` to `flush` (which
/// empties it) each time it holds `chunk` bytes or more.
fn combined_chunks<E>(
    plan: &Plan,
    root_delete: bool,
    chunk: usize,
    flush: &mut dyn FnMut(&mut Vec<u8>) -> Result<(), E>,
    b: &mut Vec<u8>,
) -> Result<(), E> {
    let mut outs: Vec<Out> = plan
        .interfaces
        .iter()
        .map(|i| Out::new(&i.dev, 0))
        .collect();
    // Each Out writes into the shared buffer in turn.
    let mut emit = |w: &mut Out, b: &mut Vec<u8>, op: &TcOp| -> Result<(), E> {
        std::mem::swap(&mut w.b, b);
        w.op(op);
        w.nl();
        std::mem::swap(&mut w.b, b);
        if b.len() >= chunk {
            flush(b)?;
        }
        Ok(())
    };
    if root_delete {
        for w in outs.iter_mut() {
            emit(w, b, &TcOp::delete_root())?;
        }
    }
    for (ip, w) in plan.interfaces.iter().zip(outs.iter_mut()) {
        for op in &ip.ops[..ip.setup_ops.min(ip.ops.len())] {
            emit(w, b, op)?;
        }
    }
    // Interleave the per-entity groups (a class op and the ops after it up
    // to the next class op) of all interfaces.
    let mut cursors: Vec<usize> = plan
        .interfaces
        .iter()
        .map(|i| i.setup_ops.min(i.ops.len()))
        .collect();
    loop {
        let mut progressed = false;
        for ((ip, cur), w) in plan
            .interfaces
            .iter()
            .zip(cursors.iter_mut())
            .zip(outs.iter_mut())
        {
            if *cur >= ip.ops.len() {
                continue;
            }
            progressed = true;
            let mut end = *cur + 1;
            while end < ip.ops.len() && !matches!(ip.ops[end], TcOp::AddClass(_)) {
                end += 1;
            }
            for op in &ip.ops[*cur..end] {
                emit(w, b, op)?;
            }
            *cur = end;
        }
        if !progressed {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_use_the_largest_exact_unit() {
        let r = |bps| rate_to_tc(lqos_model::Rate::from_bps(bps));
        assert_eq!(r(1_000_000_000), "1gbit");
        assert_eq!(r(1_234_000_000), "1234mbit");
        assert_eq!(r(2_500_000), "2500kbit");
        assert_eq!(r(2_800), "2800bit");
        assert_eq!(r(2_801), "2801bit");
        assert_eq!(r(40_000_000_000), "40gbit");
        assert_eq!(r(0), "0bit");
    }
}
