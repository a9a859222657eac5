//! Parsing `tc -b` text back into typed ops.
//!
//! Accepts what [`crate::render`] writes and what LibreQoS writes into
//! `linux_tc.txt`: an optional leading `tc`, blank lines, `#` comments (to
//! the end of the line, as tc does), fractional rates (`2.5mbit`,
//! `1.0gbit`), `0x`-prefixed hex handles (`parent 0x1:0x3`), and classids
//! given as a bare minor (`classid 0x5`, completed from the parent's major
//! as the kernel does). A leaf qdisc without `handle` parses with
//! [`TcHandle::UNSPEC`] (the kernel picks one).

use crate::config::LeafSpec;
use crate::error::{PlanError, SqmError};
pub use crate::error::{Quantity, SyntaxError, Unsupported};
use crate::filter::{self, CLSACT_PARENT, EGRESS};
use crate::filter::{FilterKey, FilterProto, FlowerFilter, MatchSide};
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{CakeParams, Class, FqCodelParams, HtbClass, HtbQdisc, Qdisc, QdiscKind};
use crate::options;
use crate::options::{CakeAckFilter, CakeDiffserv, CakeFlowMode};
use ipnet::IpNet;
use lqos_model::Rate;
use std::str::FromStr;

/// A line of batch text that is not a supported tc command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
#[non_exhaustive]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub error: SyntaxError,
}

/// `cake diffserv4`, `fq_codel`, `pfifo limit 1000`, `none`: the kinds
/// and options of [`parse_qdisc_kind`], as a leaf.
impl FromStr for LeafSpec {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let tokens: Vec<&str> = s.split_ascii_whitespace().collect();
        if tokens.is_empty() {
            return Err(PlanError::Sqm {
                spec: s.to_string(),
                reason: SqmError::Empty,
            });
        }
        if tokens.len() == 1 && tokens[0].eq_ignore_ascii_case("none") {
            return Ok(LeafSpec::None);
        }
        let lowered: Vec<String> = tokens.iter().map(|t| t.to_ascii_lowercase()).collect();
        let refs: Vec<&str> = lowered.iter().map(String::as_str).collect();
        let reason = match parse_qdisc_kind(&refs) {
            Ok(QdiscKind::Other(name)) => SqmError::UnsupportedKind(name),
            Ok(QdiscKind::Mq) | Ok(QdiscKind::Htb(_)) => SqmError::NotALeaf,
            Ok(kind) => return Ok(LeafSpec::Qdisc(kind)),
            Err(e) => e.into(),
        };
        Err(PlanError::Sqm {
            spec: s.to_string(),
            reason,
        })
    }
}

use SyntaxError as E;

fn missing(object: &'static str, what: &'static str) -> SyntaxError {
    E::Missing { object, what }
}

/// Parses a whole batch file into `(device, op)` pairs, in file order.
///
/// ```
/// use lqos_tc::parse::parse_batch;
/// let ops = parse_batch("# setup\ntc qdisc replace dev ens19 root handle 7FFF: mq\n\n").unwrap();
/// assert_eq!(ops.len(), 1);
/// assert_eq!(ops[0].0, "ens19");
/// ```
pub fn parse_batch(text: &str) -> Result<Vec<(String, TcOp)>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = match raw.find('#') {
            Some(p) => &raw[..p],
            None => raw,
        };
        let mut tokens: Vec<&str> = line.split_ascii_whitespace().collect();
        if tokens.first() == Some(&"tc") {
            tokens.remove(0);
        }
        if tokens.is_empty() {
            continue;
        }
        let parsed = parse_tokens(&tokens).map_err(|error| ParseError { line: i + 1, error })?;
        out.push(parsed);
    }
    Ok(out)
}

/// Parses one command (without the leading `tc`), e.g.
/// `qdisc add dev ens19 parent 1:3 handle 10: pfifo`.
pub fn parse_line(line: &str) -> Result<(String, TcOp), ParseError> {
    let ops = parse_batch(line)?;
    match <[_; 1]>::try_from(ops) {
        Ok([one]) => Ok(one),
        Err(v) => Err(ParseError {
            line: 1,
            error: E::NotOneCommand(v.len()),
        }),
    }
}

#[derive(Clone, Copy)]
enum Verb {
    Add,
    Replace,
    Change,
    Delete,
}

fn parse_tokens(t: &[&str]) -> Result<(String, TcOp), SyntaxError> {
    let object = t[0];
    let verb = match t.get(1).copied() {
        Some("add") => Verb::Add,
        Some("replace") => Verb::Replace,
        Some("change") => Verb::Change,
        Some("del") | Some("delete") => Verb::Delete,
        Some(other) => {
            return Err(E::UnsupportedVerb {
                object: object.to_string(),
                verb: other.to_string(),
            })
        }
        None => {
            return Err(E::MissingVerb {
                object: object.to_string(),
            })
        }
    };
    match object {
        "qdisc" => parse_qdisc(verb, &t[2..]),
        "class" => parse_class(verb, &t[2..]),
        "filter" => parse_filter(verb, &t[2..]),
        other => Err(E::UnsupportedObject(other.to_string())),
    }
}

fn parse_qdisc(verb: Verb, t: &[&str]) -> Result<(String, TcOp), SyntaxError> {
    let mut dev = None;
    let mut parent = None;
    let mut handle = TcHandle::UNSPEC;
    let mut i = 0;
    while i < t.len() {
        match t[i] {
            "dev" => {
                dev = Some(value(t, i, "dev")?.to_string());
                i += 2;
            }
            "root" => {
                parent = Some(TcHandle::ROOT);
                i += 1;
            }
            "parent" => {
                parent = Some(parse_handle(value(t, i, "parent")?, false)?);
                i += 2;
            }
            "handle" => {
                handle = parse_handle(value(t, i, "handle")?, true)?;
                i += 2;
            }
            _ => break,
        }
    }
    let dev = dev.ok_or(missing("qdisc", "dev"))?;
    let kind_tokens = &t[i..];
    if kind_tokens == ["clsact"] {
        // `tc qdisc add|replace|del dev X clsact`: tc fills in the slot.
        if parent.is_some_and(|p| p != CLSACT_PARENT) {
            return Err(E::Unsupported(Unsupported::ClsactParent));
        }
        let q = Qdisc::clsact();
        return match verb {
            Verb::Add => Ok((dev, TcOp::AddQdisc(q))),
            Verb::Replace => Ok((dev, TcOp::ReplaceQdisc(q))),
            Verb::Delete => Ok((
                dev,
                TcOp::DeleteQdisc {
                    parent: CLSACT_PARENT,
                    handle: filter::CLSACT_HANDLE,
                },
            )),
            Verb::Change => Err(E::Unsupported(Unsupported::QdiscChange)),
        };
    }
    if let Verb::Delete = verb {
        if !kind_tokens.is_empty() && kind_tokens.len() > 1 {
            return Err(E::Unexpected {
                object: "qdisc del",
                words: kind_tokens.join(" "),
            });
        }
        let parent = parent.unwrap_or(TcHandle::UNSPEC);
        return Ok((dev, TcOp::delete_qdisc(parent, handle)));
    }
    let parent = parent.ok_or(missing("qdisc", "parent or root"))?;
    if kind_tokens.is_empty() {
        return Err(missing("qdisc", "kind"));
    }
    let kind = parse_qdisc_kind(kind_tokens)?;
    let q = Qdisc {
        parent,
        handle,
        kind,
    };
    match verb {
        Verb::Add => Ok((dev, TcOp::AddQdisc(q))),
        Verb::Replace => Ok((dev, TcOp::ReplaceQdisc(q))),
        Verb::Change => Err(E::Unsupported(Unsupported::QdiscChange)),
        Verb::Delete => unreachable!("handled above"),
    }
}

fn parse_class(verb: Verb, t: &[&str]) -> Result<(String, TcOp), SyntaxError> {
    let mut dev = None;
    let mut parent = TcHandle::UNSPEC;
    let mut classid = None;
    let mut i = 0;
    while i < t.len() {
        match t[i] {
            "dev" => {
                dev = Some(value(t, i, "dev")?.to_string());
                i += 2;
            }
            "root" => {
                parent = TcHandle::ROOT;
                i += 1;
            }
            "parent" => {
                parent = parse_handle(value(t, i, "parent")?, false)?;
                i += 2;
            }
            "classid" => {
                classid = Some(parse_handle(value(t, i, "classid")?, false)?);
                i += 2;
            }
            _ => break,
        }
    }
    let dev = dev.ok_or(missing("class", "dev"))?;
    let mut classid = classid.ok_or(missing("class", "classid"))?;
    if classid.major() == 0 && classid != TcHandle::UNSPEC && parent != TcHandle::ROOT {
        // `classid 0x5` under `parent 0x1:0x3` means 1:5 (the kernel fills
        // in the major from the parent).
        classid = TcHandle::new(parent.major(), classid.minor());
    }
    let rest = &t[i..];
    if let Verb::Delete = verb {
        if !rest.is_empty() {
            return Err(E::Unexpected {
                object: "class del",
                words: rest.join(" "),
            });
        }
        return Ok((dev, TcOp::DeleteClass { parent, classid }));
    }
    if rest.first() != Some(&"htb") {
        return Err(E::NotHtbClass(
            rest.first().copied().unwrap_or("").to_string(),
        ));
    }
    let htb = parse_htb_class(&rest[1..])?;
    let c = Class {
        parent,
        classid,
        htb,
    };
    match verb {
        Verb::Add => Ok((dev, TcOp::AddClass(c))),
        Verb::Change => Ok((dev, TcOp::ChangeClass(c))),
        Verb::Replace => Err(E::Unsupported(Unsupported::ClassReplace)),
        Verb::Delete => unreachable!("handled above"),
    }
}

/// `filter replace|del dev X egress pref P handle H protocol ip|ipv6
/// flower [dst_ip|src_ip NET action skbedit queue_mapping Q priority M:m]`.
fn parse_filter(verb: Verb, t: &[&str]) -> Result<(String, TcOp), SyntaxError> {
    let (mut dev, mut egress, mut pref, mut handle, mut proto) = (None, false, None, None, None);
    let mut i = 0;
    while i < t.len() {
        match t[i] {
            "dev" => dev = Some(value(t, i, "dev")?.to_string()),
            "egress" => {
                egress = true;
                i += 1;
                continue;
            }
            "parent" => egress = parse_handle(value(t, i, "parent")?, false)? == EGRESS,
            "pref" | "prio" | "priority" => pref = Some(parse_u16(value(t, i, "pref")?)?),
            "handle" => handle = Some(parse_num_u32(value(t, i, "handle")?)?),
            "protocol" => {
                proto = Some(match value(t, i, "protocol")? {
                    "ip" => FilterProto::Ip,
                    "ipv6" => FilterProto::Ipv6,
                    other => return Err(E::UnsupportedProtocol(other.to_string())),
                })
            }
            _ => break,
        }
        i += 2;
    }
    let dev = dev.ok_or(missing("filter", "dev"))?;
    if !egress {
        return Err(E::Unsupported(Unsupported::FilterHook));
    }
    let key = FilterKey {
        pref: pref.ok_or(missing("filter", "pref"))?,
        protocol: proto.ok_or(missing("filter", "protocol"))?,
        handle: handle
            .filter(|&h| h != 0)
            .ok_or(missing("filter", "handle"))?,
    };
    let rest = &t[i..];
    if rest.first() != Some(&"flower") {
        return Err(E::Unsupported(Unsupported::FilterKind));
    }
    let rest = &rest[1..];
    match verb {
        Verb::Delete if rest.is_empty() => return Ok((dev, TcOp::DeleteFilter(key))),
        Verb::Delete => {
            return Err(E::Unexpected {
                object: "filter del",
                words: rest.join(" "),
            })
        }
        Verb::Replace => {}
        Verb::Add | Verb::Change => return Err(E::Unsupported(Unsupported::FilterVerb)),
    }
    let (mut side, mut net, mut queue, mut prio) = (None, None, None, None);
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            "dst_ip" | "src_ip" => {
                side = Some(if rest[i] == "dst_ip" {
                    MatchSide::Dst
                } else {
                    MatchSide::Src
                });
                net = Some(parse_net(value(rest, i, rest[i])?)?);
                i += 2;
            }
            "action" | "actions" if rest.get(i + 1) == Some(&"skbedit") => i += 2,
            "queue_mapping" => {
                queue = Some(parse_u16(value(rest, i, "queue_mapping")?)?);
                i += 2;
            }
            "priority" => {
                prio = Some(parse_handle(value(rest, i, "priority")?, false)?);
                i += 2;
            }
            other => return Err(unsupported_option("flower", other)),
        }
    }
    let net = net.ok_or(missing("flower", "dst_ip or src_ip"))?;
    if FilterProto::of(&net) != key.protocol {
        return Err(E::WrongFamily {
            net,
            protocol: key.protocol.name(),
        });
    }
    Ok((
        dev,
        TcOp::ReplaceFilter(FlowerFilter {
            key,
            side: side.ok_or(missing("flower", "dst_ip or src_ip"))?,
            net,
            queue_mapping: queue.ok_or(missing("skbedit", "queue_mapping"))?,
            priority: prio.ok_or(missing("skbedit", "priority"))?,
        }),
    ))
}

fn parse_u16(s: &str) -> Result<u16, SyntaxError> {
    s.parse().map_err(|_| E::U16(s.to_string()))
}

fn unsupported_option(kind: &str, option: &str) -> SyntaxError {
    E::UnsupportedOption {
        kind: kind.to_string(),
        option: option.to_string(),
    }
}

/// A decimal or `0x` hex u32 (tc's `get_u32(.., 0)`).
fn parse_num_u32(s: &str) -> Result<u32, SyntaxError> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).map_err(|_| E::Number(s.to_string())),
        None => parse_u32(s),
    }
}

/// An address (`/32` or `/128`) or a prefix; host bits must be zero.
fn parse_net(s: &str) -> Result<IpNet, SyntaxError> {
    let net: IpNet = if s.contains('/') {
        s.parse().map_err(|_| E::Prefix(s.to_string()))?
    } else {
        IpNet::from(
            s.parse::<core::net::IpAddr>()
                .map_err(|_| E::Address(s.to_string()))?,
        )
    };
    if net.trunc() != net {
        return Err(E::HostBits {
            text: s.to_string(),
            trunc: net.trunc(),
        });
    }
    Ok(net)
}

fn parse_htb_class(t: &[&str]) -> Result<HtbClass, SyntaxError> {
    let mut rate = None;
    let mut ceil = None;
    let mut prio = 0;
    let mut quantum = 0;
    let mut burst = None;
    let mut cburst = None;
    let mut i = 0;
    while i < t.len() {
        let key = t[i];
        let v = value(t, i, key)?;
        match key {
            "rate" => rate = Some(parse_rate(v)?),
            "ceil" => ceil = Some(parse_rate(v)?),
            "prio" => prio = parse_u32(v)?,
            "quantum" => quantum = parse_u32(v)?,
            "burst" | "buffer" | "maxburst" => burst = Some(parse_size(v)?),
            "cburst" | "cbuffer" | "cmaxburst" => cburst = Some(parse_size(v)?),
            other => return Err(unsupported_option("htb class", other)),
        }
        i += 2;
    }
    let rate = rate.ok_or(missing("htb class", "rate"))?;
    Ok(HtbClass {
        rate,
        ceil: ceil.unwrap_or(rate),
        quantum,
        prio,
        burst,
        cburst,
    })
}

/// Parses a qdisc kind and its options (`["cake", "diffserv4"]`); used for
/// batch lines and for `default_sqm` strings.
pub fn parse_qdisc_kind(t: &[&str]) -> Result<QdiscKind, SyntaxError> {
    let (name, opts) = t.split_first().ok_or(E::MissingKind)?;
    let mut i = 0;
    match *name {
        "mq" => {
            if let Some(o) = opts.first() {
                return Err(E::MqOptions(o.to_string()));
            }
            Ok(QdiscKind::Mq)
        }
        "htb" => {
            let mut h = HtbQdisc {
                default_minor: 0,
                r2q: None,
                direct_qlen: None,
            };
            while i < opts.len() {
                let key = opts[i];
                let v = value(opts, i, key)?;
                match key {
                    "default" => h.default_minor = parse_hex_u32(v)?,
                    "r2q" => h.r2q = Some(parse_u32(v)?),
                    "direct_qlen" => h.direct_qlen = Some(parse_u32(v)?),
                    other => return Err(unsupported_option("htb", other)),
                }
                i += 2;
            }
            Ok(QdiscKind::Htb(h))
        }
        "cake" => {
            let mut p = CakeParams::default();
            while i < opts.len() {
                let o = opts[i];
                i += 1;
                match o {
                    "bandwidth" => {
                        p.bandwidth = Some(parse_rate(value(opts, i - 1, o)?)?);
                        i += 1;
                    }
                    "unlimited" => p.bandwidth = Some(Rate::ZERO),
                    "rtt" => {
                        p.rtt_us = Some(parse_time_us(value(opts, i - 1, o)?)?);
                        i += 1;
                    }
                    "memlimit" => {
                        p.memlimit = Some(parse_size(value(opts, i - 1, o)?)?);
                        i += 1;
                    }
                    word => {
                        if let Some(d) = CakeDiffserv::from_tc_word(word) {
                            p.diffserv = Some(d);
                        } else if let Some(f) = CakeFlowMode::from_tc_word(word) {
                            p.flow_mode = Some(f);
                        } else if let Some(a) = CakeAckFilter::from_tc_word(word) {
                            p.ack_filter = Some(a);
                        } else if let Some(v) = options::CAKE_NAT.parse(word) {
                            p.nat = Some(v);
                        } else if let Some(v) = options::CAKE_WASH.parse(word) {
                            p.wash = Some(v);
                        } else if let Some(v) = options::CAKE_SPLIT_GSO.parse(word) {
                            p.split_gso = Some(v);
                        } else if let Some(us) = options::cake_rtt_preset(word) {
                            p.rtt_us = Some(us);
                        } else {
                            return Err(unsupported_option("cake", word));
                        }
                    }
                }
            }
            Ok(QdiscKind::Cake(p))
        }
        "fq_codel" => {
            let mut p = FqCodelParams::default();
            while i < opts.len() {
                let o = opts[i];
                if let Some(e) = options::FQ_CODEL_ECN.parse(o) {
                    p.ecn = Some(e);
                    i += 1;
                    continue;
                }
                let v = value(opts, i, o)?;
                match o {
                    "limit" => p.limit = Some(parse_u32(v)?),
                    "flows" => p.flows = Some(parse_u32(v)?),
                    "target" => p.target_us = Some(parse_time_us(v)?),
                    "interval" => p.interval_us = Some(parse_time_us(v)?),
                    "quantum" => p.quantum = Some(parse_u32(v)?),
                    "memory_limit" => p.memory_limit = Some(parse_size(v)?),
                    other => return Err(unsupported_option("fq_codel", other)),
                }
                i += 2;
            }
            Ok(QdiscKind::FqCodel(p))
        }
        "pfifo" | "bfifo" => {
            let mut limit = None;
            while i < opts.len() {
                let o = opts[i];
                let v = value(opts, i, o)?;
                match o {
                    "limit" if *name == "pfifo" => limit = Some(parse_u32(v)?),
                    "limit" => limit = Some(parse_size(v)?),
                    other => return Err(unsupported_option(name, other)),
                }
                i += 2;
            }
            Ok(if *name == "pfifo" {
                QdiscKind::Pfifo { limit }
            } else {
                QdiscKind::Bfifo { limit }
            })
        }
        other => {
            if !opts.is_empty() {
                return Err(E::UnknownKindWithOptions(other.to_string()));
            }
            if other.is_empty()
                || !other
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(E::InvalidKind(other.to_string()));
            }
            Ok(QdiscKind::Other(other.to_string()))
        }
    }
}

fn value<'a>(t: &[&'a str], i: usize, key: &str) -> Result<&'a str, SyntaxError> {
    t.get(i + 1).copied().ok_or_else(|| E::MissingValue {
        key: key.to_string(),
    })
}

/// Parses a handle or classid as tc does, leniently: `7FFF:`, `0x1:0x3`,
/// `1a:e3b`, `root`, `none`. Without a colon, a qdisc handle is a major
/// (`8` = `8:`) while a classid/parent is a raw number (`0x5` = `0:5`).
pub fn parse_handle(s: &str, qdisc_handle: bool) -> Result<TcHandle, SyntaxError> {
    match s {
        "root" => return Ok(TcHandle::ROOT),
        "none" => return Ok(TcHandle::UNSPEC),
        _ => {}
    }
    let err = || E::Handle(s.to_string());
    let hex = |p: &str, allow_empty: bool| -> Result<u32, SyntaxError> {
        let p = p
            .strip_prefix("0x")
            .or_else(|| p.strip_prefix("0X"))
            .unwrap_or(p);
        if p.is_empty() {
            return if allow_empty { Ok(0) } else { Err(err()) };
        }
        if p.len() > 8 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(err());
        }
        u32::from_str_radix(p, 16).map_err(|_| err())
    };
    match s.split_once(':') {
        Some((maj, min)) => {
            let maj = hex(maj, true)?;
            let min = hex(min, true)?;
            if maj > 0xffff || min > 0xffff {
                return Err(err());
            }
            Ok(TcHandle::new(maj as u16, min as u16))
        }
        None => {
            let v = hex(s, false)?;
            if qdisc_handle {
                if v > 0xffff {
                    return Err(err());
                }
                Ok(TcHandle::new(v as u16, 0))
            } else {
                Ok(TcHandle::from_raw(v))
            }
        }
    }
}

fn parse_u32(s: &str) -> Result<u32, SyntaxError> {
    s.parse().map_err(|_| E::Number(s.to_string()))
}

fn parse_hex_u32(s: &str) -> Result<u32, SyntaxError> {
    let p = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u32::from_str_radix(p, 16).map_err(|_| E::Hex(s.to_string()))
}

/// Splits `2.5mbit` into an exact decimal (`25`, scale `10`) and `mbit`.
fn split_decimal(s: &str) -> Result<(u128, u128, &str), SyntaxError> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty())
        || frac.contains('.')
        || int.len() > 20
        || frac.len() > 18
    {
        return Err(E::Decimal(s.to_string()));
    }
    let mut mant: u128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        mant = mant * 10 + u128::from(b - b'0');
    }
    Ok((mant, 10u128.pow(frac.len() as u32), unit))
}

/// Parses a tc rate (`10500kbit`, `2.5mbit`, `1.0gbit`, `1000000`, `125kbps`)
/// into an exact [`Rate`] (rounded to the nearest bit/s).
pub fn parse_rate(s: &str) -> Result<Rate, SyntaxError> {
    let lower = s.to_ascii_lowercase();
    let (mant, div, unit) = split_decimal(&lower)?;
    let scale: u128 = match unit {
        "" | "bit" => 1,
        "kbit" => 1_000,
        "mbit" => 1_000_000,
        "gbit" => 1_000_000_000,
        "tbit" => 1_000_000_000_000,
        "kibit" => 1 << 10,
        "mibit" => 1 << 20,
        "gibit" => 1 << 30,
        "tibit" => 1 << 40,
        "bps" => 8,
        "kbps" => 8_000,
        "mbps" => 8_000_000,
        "gbps" => 8_000_000_000,
        "tbps" => 8_000_000_000_000,
        _ => return Err(bad_unit(Quantity::Rate, s)),
    };
    let bits = (mant * scale + div / 2) / div;
    u64::try_from(bits)
        .map(Rate::from_bps)
        .map_err(|_| too_large(Quantity::Rate, s))
}

/// Parses a tc size in bytes (`1600`, `1600b`, `64k`, `1mb`).
pub fn parse_size(s: &str) -> Result<u32, SyntaxError> {
    let lower = s.to_ascii_lowercase();
    let (mant, div, unit) = split_decimal(&lower)?;
    let scale: u128 = match unit {
        "" | "b" => 1,
        "k" | "kb" => 1024,
        "m" | "mb" => 1024 * 1024,
        "g" | "gb" => 1024 * 1024 * 1024,
        "kbit" => 128,
        "mbit" => 128 * 1024,
        _ => return Err(bad_unit(Quantity::Size, s)),
    };
    u32::try_from(mant * scale / div).map_err(|_| too_large(Quantity::Size, s))
}

/// Parses a tc time into microseconds (`300ms`, `100us`, `1s`; a bare
/// number is microseconds, as in tc).
pub fn parse_time_us(s: &str) -> Result<u32, SyntaxError> {
    let lower = s.to_ascii_lowercase();
    let (mant, div, unit) = split_decimal(&lower)?;
    let scale: u128 = match unit {
        "" | "us" | "usec" | "usecs" => 1,
        "ms" | "msec" | "msecs" => 1_000,
        "s" | "sec" | "secs" => 1_000_000,
        _ => return Err(bad_unit(Quantity::Time, s)),
    };
    u32::try_from(mant * scale / div).map_err(|_| too_large(Quantity::Time, s))
}

fn bad_unit(quantity: Quantity, text: &str) -> SyntaxError {
    E::Unit {
        quantity,
        text: text.to_string(),
    }
}

fn too_large(quantity: Quantity, text: &str) -> SyntaxError {
    E::TooLarge {
        quantity,
        text: text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libreqos_lines_parse() {
        let text = "\
qdisc replace dev eth1 root handle 7FFF: mq
qdisc add dev eth1 parent 7FFF:0x1 handle 0x1: htb default 2
class add dev eth1 parent 0x1: classid 0x1:1 htb rate 1000.0mbit ceil 1000.0mbit quantum 12500
qdisc add dev eth1 parent 0x1:1 cake diffserv4
class add dev eth1 parent 0x1:1 classid 0x1:2 htb rate 250.0mbit ceil 999.0mbit prio 5 quantum 12487
class add dev eth1 parent 0x1:0x3 classid 0x5 htb rate 2.5mbit ceil 10.5mbit prio 3 quantum 1522 # CircuitID: 1
qdisc add dev eth1 parent 0x1:0x5 cake diffserv4 rtt 300
";
        let ops = parse_batch(text).unwrap();
        assert_eq!(ops.len(), 7);
        match &ops[1].1 {
            TcOp::AddQdisc(q) => {
                assert_eq!(q.parent, TcHandle::new(0x7fff, 1));
                assert_eq!(q.handle, TcHandle::new(1, 0));
                assert_eq!(
                    q.kind,
                    QdiscKind::Htb(HtbQdisc {
                        default_minor: 2,
                        r2q: None,
                        direct_qlen: None
                    })
                );
            }
            other => panic!("{other:?}"),
        }
        match &ops[5].1 {
            TcOp::AddClass(c) => {
                assert_eq!(c.classid, TcHandle::new(1, 5));
                assert_eq!(c.parent, TcHandle::new(1, 3));
                assert_eq!(c.htb.rate, Rate::from_bps(2_500_000));
                assert_eq!(c.htb.ceil, Rate::from_bps(10_500_000));
            }
            other => panic!("{other:?}"),
        }
        match &ops[6].1 {
            TcOp::AddQdisc(q) => {
                assert_eq!(q.handle, TcHandle::UNSPEC);
                match &q.kind {
                    QdiscKind::Cake(p) => assert_eq!(p.rtt_us, Some(300)),
                    other => panic!("{other:?}"),
                }
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_line() {
        let e =
            parse_batch("\n\nqdisc add dev x parent 1:3 handle 5: sfq perturb 10\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse_batch("class add dev x parent 1: classid 1:1 htb rate fast\n").unwrap_err();
        assert!(e.to_string().starts_with("line 1:"), "{e}");
        assert!(parse_batch("filter add dev x\n").is_err());
    }

    #[test]
    fn errors_are_typed() {
        let kind = |s: &str| parse_qdisc_kind(&s.split_whitespace().collect::<Vec<_>>());
        assert_eq!(
            kind("cake diffserv5"),
            Err(SyntaxError::UnsupportedOption {
                kind: "cake".into(),
                option: "diffserv5".into()
            })
        );
        assert_eq!(kind("mq x"), Err(SyntaxError::MqOptions("x".into())));
        assert_eq!(kind(""), Err(SyntaxError::MissingKind));
        assert_eq!(
            kind("sfq perturb 10"),
            Err(SyntaxError::UnknownKindWithOptions("sfq".into()))
        );
        assert_eq!(
            kind("fq_codel limit"),
            Err(SyntaxError::MissingValue {
                key: "limit".into()
            })
        );
        assert_eq!(
            parse_handle("1:10000", false),
            Err(SyntaxError::Handle("1:10000".into()))
        );
        assert_eq!(
            parse_rate("10mbyte"),
            Err(SyntaxError::Unit {
                quantity: Quantity::Rate,
                text: "10mbyte".into()
            })
        );
        assert_eq!(
            parse_size("8gb"),
            Err(SyntaxError::TooLarge {
                quantity: Quantity::Size,
                text: "8gb".into()
            })
        );
        assert_eq!(
            parse_time_us("1.2.3ms"),
            Err(SyntaxError::Decimal("1.2.3ms".into()))
        );
        let e = parse_batch("class add dev x parent 1: classid 1:3 htb ceil 1mbit\n").unwrap_err();
        assert_eq!(
            e.error,
            SyntaxError::Missing {
                object: "htb class",
                what: "rate"
            }
        );
        assert_eq!(e.to_string(), "line 1: htb class: missing rate");
        let e = parse_batch("qdisc change dev x root handle 1: htb\n").unwrap_err();
        assert_eq!(e.error, SyntaxError::Unsupported(Unsupported::QdiscChange));
        let e = parse_batch(
            "filter replace dev x egress pref 1 handle 1 protocol ip flower dst_ip 10.0.0.1/8 \
             action skbedit queue_mapping 0 priority 1:3\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: 10.0.0.1/8: host bits are set (use 10.0.0.0/8)"
        );
    }

    #[test]
    fn rates_sizes_times() {
        assert_eq!(parse_rate("2.5mbit").unwrap().bps(), 2_500_000);
        assert_eq!(parse_rate("1.0gbit").unwrap().bps(), 1_000_000_000);
        assert_eq!(parse_rate("10500kbit").unwrap().bps(), 10_500_000);
        assert_eq!(parse_rate("125kbps").unwrap().bps(), 1_000_000);
        assert_eq!(parse_rate("999").unwrap().bps(), 999);
        assert!(parse_rate("1e3mbit").is_err());
        assert_eq!(parse_time_us("300ms").unwrap(), 300_000);
        assert_eq!(parse_time_us("300").unwrap(), 300);
        assert_eq!(parse_size("64k").unwrap(), 65536);
    }
}
