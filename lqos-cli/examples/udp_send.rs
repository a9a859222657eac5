//! Sends UDP datagrams out of one interface with a socket priority (an HTB
//! classid: HTB takes a priority equal to one of its classids as that
//! class) and a TOS byte (DSCP << 2: cake's tins), for the stock-kernel
//! lab's statistics captures (`lab/capture-stats.sh`).
//!
//! ```text
//! udp_send DEV SRC_IP DST_IP PRIORITY TOS COUNT [SIZE]
//! # e.g. udp_send ens19 10.77.0.1 10.77.0.99 0x10003 0xb8 200 500
//! ```

use std::net::UdpSocket;

fn num(s: &str) -> Result<u32, std::num::ParseIntError> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [dev, src, dst, prio, tos, count, rest @ ..] = a.as_slice() else {
        return Err("usage: udp_send DEV SRC_IP DST_IP PRIORITY TOS COUNT [SIZE]".into());
    };
    let size: usize = rest.first().map_or(Ok(500), |s| s.parse())?;
    let s = UdpSocket::bind(format!("{src}:0"))?;
    use nix::sys::socket::{setsockopt, sockopt};
    setsockopt(&s, sockopt::BindToDevice, &std::ffi::OsString::from(dev))?;
    // TOS first: setting IP_TOS also sets the socket priority from it
    // (rt_tos2priority), which would replace the classid.
    setsockopt(&s, sockopt::Ipv4Tos, &(num(tos)? as i32))?;
    setsockopt(&s, sockopt::Priority, &(num(prio)? as i32))?;
    setsockopt(&s, sockopt::SndBufForce, &(16 << 20))?;
    s.connect(format!("{dst}:9"))?;
    let payload = vec![0u8; size];
    let mut sent = 0;
    for _ in 0..num(count)? {
        if s.send(&payload).is_ok() {
            sent += 1;
        }
    }
    println!("sent {sent} datagrams of {size} bytes");
    Ok(())
}
