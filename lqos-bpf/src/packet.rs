//! Crafted Ethernet frames for the test runs and benchmarks: UDP or TCP
//! over IPv4 or IPv6, optionally behind VLAN tags and a PPPoE session,
//! with IPv4 options, fragments and IPv6 extension headers.
//!
//! ```
//! use lqos_bpf::packet::Frame;
//! let f = Frame::udp("100.64.0.1".parse().unwrap(), "198.51.100.7".parse().unwrap())
//!     .vlan(0x8100, 100)
//!     .build();
//! assert_eq!(&f[12..14], &[0x81, 0x00]);
//! assert_eq!(f.len(), 14 + 4 + 20 + 8 + 18);
//! let t = Frame::tcp("198.51.100.7".parse().unwrap(), 443, "100.64.0.1".parse().unwrap(), 40000)
//!     .seq(1000)
//!     .ts(7, 3)
//!     .payload(100)
//!     .build();
//! // TCP header with NOP NOP TS: 32 bytes.
//! assert_eq!(t.len(), 14 + 20 + 32 + 100);
//! ```

use std::net::IpAddr;

/// A frame to build.
#[derive(Debug, Clone)]
pub struct Frame {
    src: IpAddr,
    dst: IpAddr,
    tags: Vec<(u16, u16)>,
    pppoe: bool,
    ethertype: Option<u16>,
    v4_options: usize,
    frag_offset: u16,
    more_fragments: bool,
    v6_ext: Vec<u8>,
    v6_frag_offset: Option<u16>,
    payload: usize,
    tcp: Option<Tcp>,
}

/// TCP flags (`Frame::flags`).
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// The TCP header of a TCP frame.
#[derive(Debug, Clone)]
struct Tcp {
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    ts: Option<(u32, u32)>,
    /// Options as a SYN carries them (MSS, SACK permitted, TS, NOP,
    /// window scale) instead of NOP NOP TS.
    syn_layout: bool,
}

impl Frame {
    /// A UDP datagram from `src` to `dst` (both IPv4 or both IPv6) with
    /// 18 bytes of payload.
    pub fn udp(src: IpAddr, dst: IpAddr) -> Frame {
        Frame {
            src,
            dst,
            tags: Vec::new(),
            pppoe: false,
            ethertype: None,
            v4_options: 0,
            frag_offset: 0,
            more_fragments: false,
            v6_ext: Vec::new(),
            v6_frag_offset: None,
            payload: 18,
            tcp: None,
        }
    }

    /// A TCP segment from `src:sport` to `dst:dport` (ACK set, sequence
    /// and acknowledgement numbers 0, no options, no payload).
    pub fn tcp(src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> Frame {
        Frame {
            payload: 0,
            tcp: Some(Tcp {
                sport,
                dport,
                seq: 0,
                ack: 0,
                flags: tcp_flags::ACK,
                ts: None,
                syn_layout: false,
            }),
            ..Frame::udp(src, dst)
        }
    }

    fn tcp_mut(&mut self) -> &mut Tcp {
        self.tcp.as_mut().expect("a TCP frame (Frame::tcp)")
    }

    /// TCP: the sequence number.
    pub fn seq(mut self, seq: u32) -> Frame {
        self.tcp_mut().seq = seq;
        self
    }

    /// TCP: the acknowledgement number.
    pub fn ack(mut self, ack: u32) -> Frame {
        self.tcp_mut().ack = ack;
        self
    }

    /// TCP: the flags (`tcp_flags::*`).
    pub fn flags(mut self, flags: u8) -> Frame {
        self.tcp_mut().flags = flags;
        self
    }

    /// TCP: the timestamps option (TSval, TSecr), after two NOPs as Linux
    /// sends it on every segment but the SYN.
    pub fn ts(mut self, tsval: u32, tsecr: u32) -> Frame {
        self.tcp_mut().ts = Some((tsval, tsecr));
        self
    }

    /// TCP: the options laid out as a SYN carries them (MSS, SACK
    /// permitted, timestamps, NOP, window scale).
    pub fn syn_options(mut self) -> Frame {
        self.tcp_mut().syn_layout = true;
        self
    }

    fn transport(&self) -> (u8, Vec<u8>) {
        let Some(t) = &self.tcp else {
            let mut h = Vec::with_capacity(8);
            h.extend_from_slice(&40000u16.to_be_bytes());
            h.extend_from_slice(&5201u16.to_be_bytes());
            h.extend_from_slice(&((8 + self.payload) as u16).to_be_bytes());
            h.extend_from_slice(&[0, 0]);
            return (17, h);
        };
        let mut opts: Vec<u8> = Vec::new();
        let ts = |o: &mut Vec<u8>, (v, e): (u32, u32)| {
            o.extend_from_slice(&[8, 10]);
            o.extend_from_slice(&v.to_be_bytes());
            o.extend_from_slice(&e.to_be_bytes());
        };
        if t.syn_layout {
            opts.extend_from_slice(&[2, 4, 0x05, 0xb4, 4, 2]);
            if let Some(x) = t.ts {
                ts(&mut opts, x);
            }
            opts.extend_from_slice(&[1, 3, 3, 7]);
        } else if let Some(x) = t.ts {
            opts.extend_from_slice(&[1, 1]);
            ts(&mut opts, x);
        }
        while !opts.len().is_multiple_of(4) {
            opts.push(0);
        }
        let mut h = Vec::with_capacity(20 + opts.len());
        h.extend_from_slice(&t.sport.to_be_bytes());
        h.extend_from_slice(&t.dport.to_be_bytes());
        h.extend_from_slice(&t.seq.to_be_bytes());
        h.extend_from_slice(&t.ack.to_be_bytes());
        h.push((((20 + opts.len()) / 4) as u8) << 4);
        h.push(t.flags);
        h.extend_from_slice(&65535u16.to_be_bytes());
        h.extend_from_slice(&[0, 0, 0, 0]);
        h.extend_from_slice(&opts);
        (6, h)
    }

    /// Adds a VLAN tag (TPID 0x8100, 0x88a8 or 0x9100) inside the ones
    /// already added.
    pub fn vlan(mut self, tpid: u16, vid: u16) -> Frame {
        self.tags.push((tpid, vid));
        self
    }

    /// Carries the IP packet in a PPPoE session (after any tags).
    pub fn pppoe(mut self) -> Frame {
        self.pppoe = true;
        self
    }

    /// Replaces the innermost ethertype (e.g. ARP 0x0806).
    pub fn ethertype(mut self, t: u16) -> Frame {
        self.ethertype = Some(t);
        self
    }

    /// IPv4 options of `words` x 4 bytes (NOPs).
    pub fn ipv4_options(mut self, words: usize) -> Frame {
        self.v4_options = words.min(10);
        self
    }

    /// An IPv4 fragment at `offset` (in 8-byte units); `more`: MF set.
    pub fn fragment(mut self, offset: u16, more: bool) -> Frame {
        self.frag_offset = offset;
        self.more_fragments = more;
        self
    }

    /// IPv6 extension headers (next-header values 0, 43, 60; 8 bytes
    /// each) before the UDP header.
    pub fn ipv6_ext(mut self, nh: &[u8]) -> Frame {
        self.v6_ext = nh.to_vec();
        self
    }

    /// An IPv6 fragment header at `offset` (in 8-byte units).
    pub fn ipv6_fragment(mut self, offset: u16) -> Frame {
        self.v6_frag_offset = Some(offset);
        self
    }

    /// Payload bytes after the UDP header.
    pub fn payload(mut self, n: usize) -> Frame {
        self.payload = n;
        self
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01]);
        let ip_type: u16 = if self.src.is_ipv6() { 0x86dd } else { 0x0800 };
        for &(tpid, vid) in &self.tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&vid.to_be_bytes());
        }
        let (proto, l4) = self.transport();
        let l4_len = l4.len() + self.payload;
        let l3 = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let ihl = 5 + self.v4_options;
                let mut h = vec![0u8; ihl * 4];
                h[0] = 0x40 | ihl as u8;
                h[2..4].copy_from_slice(&((ihl * 4 + l4_len) as u16).to_be_bytes());
                let frag =
                    (self.frag_offset & 0x1fff) | if self.more_fragments { 0x2000 } else { 0 };
                h[6..8].copy_from_slice(&frag.to_be_bytes());
                h[8] = 64;
                h[9] = proto;
                h[12..16].copy_from_slice(&s.octets());
                h[16..20].copy_from_slice(&d.octets());
                for b in &mut h[20..] {
                    *b = 1; // NOP
                }
                let sum = checksum(&h);
                h[10..12].copy_from_slice(&sum.to_be_bytes());
                h
            }
            (s, d) => {
                let s = match s {
                    IpAddr::V6(a) => a.octets(),
                    IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                };
                let d = match d {
                    IpAddr::V6(a) => a.octets(),
                    IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                };
                let mut chain: Vec<u8> = self.v6_ext.clone();
                if self.v6_frag_offset.is_some() {
                    chain.push(44);
                }
                let ext_len = chain.len() * 8;
                let mut h = vec![0u8; 40 + ext_len];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&((ext_len + l4_len) as u16).to_be_bytes());
                h[6] = chain.first().copied().unwrap_or(proto);
                h[7] = 64;
                h[8..24].copy_from_slice(&s);
                h[24..40].copy_from_slice(&d);
                for (i, &this) in chain.iter().enumerate() {
                    let at = 40 + i * 8;
                    h[at] = chain.get(i + 1).copied().unwrap_or(proto);
                    if this == 44 {
                        let off = self.v6_frag_offset.unwrap_or(0) << 3;
                        h[at + 2..at + 4].copy_from_slice(&off.to_be_bytes());
                    } else {
                        h[at + 1] = 0; // (0 + 1) * 8 bytes
                    }
                }
                h
            }
        };
        let inner = self
            .ethertype
            .unwrap_or(if self.pppoe { 0x8864 } else { ip_type });
        f.extend_from_slice(&inner.to_be_bytes());
        if self.pppoe {
            let ppp: u16 = if self.src.is_ipv6() { 0x0057 } else { 0x0021 };
            f.extend_from_slice(&[0x11, 0x00, 0x12, 0x34]);
            f.extend_from_slice(&((l3.len() + l4_len + 2) as u16).to_be_bytes());
            f.extend_from_slice(&ppp.to_be_bytes());
        }
        f.extend_from_slice(&l3);
        f.extend_from_slice(&l4);
        f.extend(std::iter::repeat_n(0xabu8, self.payload));
        f
    }
}

fn checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}
