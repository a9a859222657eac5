//! A dump whose replies overflow the socket's receive buffer (`ENOBUFS`:
//! the kernel dropped a reply) is retried and reads the whole tree; it is
//! never taken for an empty or partial tree. Live, in a private namespace.

mod common;

use lqos_apply::netlink::{NetlinkError, NetlinkSocket, SendOptions};
use lqos_tc::ops::QdiscKind;

#[test]
fn a_dump_that_overflows_the_receive_buffer_is_retried_not_read_as_an_empty_tree() {
    let Some(ns) = common::fixture("dump_overflow") else {
        return;
    };
    let ops = common::tree_ops(
        4,
        3000,
        common::varied_rates,
        QdiscKind::Pfifo { limit: None },
    );
    let mut nl = NetlinkSocket::open_in_netns(ns.name()).unwrap();
    let ifindex = nl.link("ens19").unwrap().ifindex;
    nl.send_ops(ifindex, &ops, &SendOptions::default(), &mut |_| {})
        .unwrap_or_else(|f| panic!("{f}"));
    let whole = nl.dump(ifindex).unwrap();
    assert_eq!(whole.classes.len(), 3000 + 8);

    // The smallest receive buffer, already holding a reply nobody read:
    // the dump's first reply does not fit.
    let overflowing = || {
        let mut s = NetlinkSocket::open_in_netns(ns.name()).unwrap();
        s.set_recv_buffer_size(0).unwrap();
        s.leave_replies_unread(1).unwrap();
        s
    };
    // One attempt alone fails with ENOBUFS (it does overflow) ...
    match overflowing().dump_raw(None, ifindex) {
        Err(NetlinkError::Io { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc::ENOBUFS), "{source}")
        }
        other => panic!("expected ENOBUFS, got {:?}", other.map(|m| m.len())),
    }
    // ... and the read-back retries it and reads the whole tree.
    let mut s = overflowing();
    let again = s.dump(ifindex).unwrap();
    assert_eq!(again, whole);
    // The socket keeps working.
    assert_eq!(s.dump(ifindex).unwrap(), whole);
}
