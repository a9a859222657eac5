//! A deterministic synthetic ISP network for tests and benches.
//!
//! See [`generate`].

use core::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smol_str::SmolStr;

use crate::config::{BridgeConfig, LqosConfig, QueuesConfig};
use crate::network::Network;
use crate::rate::Rate;
use crate::types::{Circuit, Device, Node};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GenParams {
    /// Number of circuits.
    pub circuits: usize,
    /// RNG seed: same seed, same network.
    pub seed: u64,
    /// Top-level sites.
    pub sites: usize,
    /// Child sites per site above the last site level.
    pub site_fanout: usize,
    /// APs per site of the last site level.
    pub fanout: usize,
    /// Levels of sites (0 = flat network; capped so sites + APs fit
    /// [`Network::MAX_NODE_DEPTH`]).
    pub depth: usize,
    /// Share of circuits with 2-3 devices.
    pub multi_device_fraction: f64,
    /// Share of circuits that also get an IPv6 /56.
    pub ipv6_fraction: f64,
    /// Share of devices that get a small IPv4 range (/30) instead of one
    /// address.
    pub ipv4_range_fraction: f64,
    /// Unevenness of top-level sites: top-level site `k` (1-based) gets a
    /// share of circuits proportional to `1 / k^site_skew`. 0 = even.
    pub site_skew: f64,
    /// Keep every circuit's minimum at a quarter of its maximum even where
    /// an AP's circuits then ask for more than the AP guarantees (the
    /// planner squashes them, as LibreQoS does). Off: an AP's circuits get
    /// a smaller fraction of their maximum where needed, so every minimum
    /// is guaranteed, as in an ISP's tree.
    pub oversubscribed: bool,
}

impl GenParams {
    /// The defaults with `circuits` circuits.
    pub fn with_circuits(circuits: usize) -> GenParams {
        GenParams {
            circuits,
            ..GenParams::default()
        }
    }
}

impl Default for GenParams {
    /// 1,000 circuits, seed 1, 8 sites of 2 levels (fan-out 2), 4 APs per
    /// leaf site, 5% multi-device circuits, half with IPv6.
    fn default() -> Self {
        GenParams {
            circuits: 1000,
            seed: 1,
            sites: 8,
            site_fanout: 2,
            fanout: 4,
            depth: 2,
            multi_device_fraction: 0.05,
            ipv6_fraction: 0.5,
            ipv4_range_fraction: 0.02,
            site_skew: 0.0,
            oversubscribed: false,
        }
    }
}

/// A generated network and a matching config.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Generated {
    /// Nodes and circuits.
    pub network: Network,
    /// Bridge `ens19` (to_network) / `ens20` (to_internet), `cake diffserv4`.
    pub config: LqosConfig,
}

/// Plans (download max, upload max) in Mbps text with their weights.
const PLANS: [(&str, &str, u32); 9] = [
    ("25", "5", 20),
    ("50", "10", 15),
    ("100", "20", 25),
    ("300", "50", 15),
    ("1000", "100", 8),
    ("2.5", "1", 4),
    ("10.5", "5.25", 5),
    ("100.5", "20.25", 4),
    ("155", "20", 4),
];

const STREETS: [&str; 8] = [
    "Oak St.",
    "Maple Ave.",
    "Main St.",
    "Cedar Rd.",
    "Elm Dr.",
    "Pine Ln.",
    "Birch Ct.",
    "Lake Rd.",
];
const TOWNS: [&str; 6] = [
    "Gurnee, IL",
    "Peabody, MA",
    "Ringgold, GA",
    "Romulus, MI",
    "Jamestown, NY",
    "Bakersfield, CA",
];

/// 0-based index of the top-level site a site named `Site_K[_...]` is under.
fn top_site_index(site: &str) -> usize {
    site.strip_prefix("Site_")
        .and_then(|r| r.split('_').next())
        .and_then(|k| k.parse::<usize>().ok())
        .map_or(0, |k| k.saturating_sub(1))
}

/// Generates a network as described by `params` (deterministic).
///
/// The same [`GenParams`] (including the seed) always give the same network,
/// byte for byte once written. The output passes validation with no warning
/// and re-reads equal (see the tests).
///
/// Shape: `sites` top-level sites; each site above the last site level has
/// `site_fanout` child sites (`depth` levels of sites in all); every site of
/// the last level has `fanout` APs; circuits are spread over the APs at
/// random. `depth = 0` gives a flat network (`{}`, circuits without parent).
/// The node depth (`depth` + 1 for the APs) is capped at
/// [`Network::MAX_NODE_DEPTH`].
///
/// Circuits get realistic plans (25/5, 50/10, 100/20, 300/50, 1000/100,
/// 155/20 Mbps and fractional ones such as 2.5/1, 10.5/5.25, 100.5/20.25)
/// with min = max / 4, or, where the minimums of an AP's circuits would
/// add up to more than the AP guarantees (its rate less 1 Mbit, as the
/// planner computes it), max / 8, max / 16, ... for that AP's circuits, the
/// first that fits (unless [`GenParams::oversubscribed`]); circuits of a
/// flat network fit in one generated parent node, whose rate is then the
/// link's. One IPv4 address from 100.64.0.0/10 per device (a
/// few get a /30), an IPv6 /56 from fdd7:b724::/32 for some circuits,
/// random locally administered MACs, and device lines numbered as
/// [`write_shaped_devices`](crate::write::write_shaped_devices) writes them. The
/// config bridges `ens19` (to_network) and `ens20` (to_internet) with
/// `cake diffserv4`.
///
/// ```
/// use lqos_model::{generate, GenParams};
/// let g = generate(&GenParams::with_circuits(50));
/// assert_eq!(g.network.circuits().len(), 50);
/// assert_eq!(g, generate(&GenParams::with_circuits(50)));
/// ```
pub fn generate(params: &GenParams) -> Generated {
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let depth = params.depth.min(Network::MAX_NODE_DEPTH - 1);
    let mut net = Network::new();
    let mut aps: Vec<String> = Vec::new();
    let mut ap_top: Vec<usize> = Vec::new();
    let leaf_cap = 10_000u64;
    let cap_at = |level: usize| -> Rate {
        // Level 1 = top. Leaf sites 10 Gbit, doubling per level up, <= 100 Gbit.
        let up = depth.saturating_sub(level) as u32;
        Rate::from_mbps(leaf_cap.saturating_mul(1u64 << up.min(20)).min(100_000))
    };
    if depth > 0 {
        // Breadth-first by level, parents first.
        let mut level_sites: Vec<String> = Vec::new();
        for s in 1..=params.sites.max(1) {
            let name = format!("Site_{s}");
            add(&mut net, None, &name, "site", cap_at(1), cap_at(1));
            level_sites.push(name);
        }
        for level in 2..=depth {
            let mut next = Vec::new();
            for parent in &level_sites {
                for k in 1..=params.site_fanout.max(1) {
                    let name = format!("{parent}_{k}");
                    add(
                        &mut net,
                        Some(parent),
                        &name,
                        "site",
                        cap_at(level),
                        cap_at(level),
                    );
                    next.push(name);
                }
            }
            level_sites = next;
        }
        for site in &level_sites {
            let suffix = site.strip_prefix("Site_").unwrap_or(site);
            for k in 1..=params.fanout.max(1) {
                let name = format!("AP_{suffix}_{k}");
                let (d, u) = if rng.random_bool(0.5) {
                    (2000, 1000)
                } else {
                    (1000, 1000)
                };
                add(
                    &mut net,
                    Some(site),
                    &name,
                    "ap",
                    Rate::from_mbps(d),
                    Rate::from_mbps(u),
                );
                aps.push(name);
                ap_top.push(top_site_index(site));
            }
        }
    }
    // Cumulative AP weights for uneven top-level sites (skew > 0).
    let ap_cumulative: Vec<f64> = if params.site_skew > 0.0 && !aps.is_empty() {
        let mut per_top: Vec<usize> = Vec::new();
        for &t in &ap_top {
            if per_top.len() <= t {
                per_top.resize(t + 1, 0);
            }
            per_top[t] += 1;
        }
        let mut acc = 0.0;
        ap_top
            .iter()
            .map(|&t| {
                acc += 1.0 / ((t + 1) as f64).powf(params.site_skew) / per_top[t] as f64;
                acc
            })
            .collect()
    } else {
        Vec::new()
    };

    let total_weight: u32 = PLANS.iter().map(|p| p.2).sum();
    let mut next_v4: u32 = u32::from(Ipv4Addr::new(100, 64, 0, 1));
    let v6_base: u128 = u128::from(Ipv6Addr::new(0xfdd7, 0xb724, 0, 0, 0, 0, 0, 0));
    let mut next_v6: u128 = 1;
    let mut line = 2usize;
    let mut circuits = Vec::with_capacity(params.circuits);
    for i in 0..params.circuits {
        let id = (10_001 + i).to_string();
        let mut pick = rng.random_range(0..total_weight);
        let plan = PLANS
            .iter()
            .find(|p| {
                if pick < p.2 {
                    true
                } else {
                    pick -= p.2;
                    false
                }
            })
            .unwrap_or(&PLANS[0]);
        let dmax = Rate::from_mbps_str(plan.0).unwrap_or(Rate::from_mbps(25));
        let umax = Rate::from_mbps_str(plan.1).unwrap_or(Rate::from_mbps(5));
        let dmin = Rate::from_bps((dmax.bps() / 4).max(1));
        let umin = Rate::from_bps((umax.bps() / 4).max(1));
        let parent = if aps.is_empty() {
            None
        } else if let Some(&total) = ap_cumulative.last() {
            let x = rng.random_range(0.0..total);
            let k = ap_cumulative
                .partition_point(|&c| c <= x)
                .min(aps.len() - 1);
            Some(aps[k].clone())
        } else {
            Some(aps[rng.random_range(0..aps.len())].clone())
        };
        let name = format!(
            "{} {}, {}",
            rng.random_range(1..9999),
            STREETS[rng.random_range(0..STREETS.len())],
            TOWNS[rng.random_range(0..TOWNS.len())]
        );
        let n_devices = if rng.random_bool(params.multi_device_fraction.clamp(0.0, 1.0)) {
            rng.random_range(2..=3)
        } else {
            1
        };
        let with_v6 = rng.random_bool(params.ipv6_fraction.clamp(0.0, 1.0));
        let mut devices = Vec::with_capacity(n_devices);
        for k in 0..n_devices {
            let ipv4 = if rng.random_bool(params.ipv4_range_fraction.clamp(0.0, 1.0)) {
                let start = next_v4.div_ceil(4) * 4;
                next_v4 = start + 4;
                vec![Ipv4Net::new_assert(Ipv4Addr::from(start), 30)]
            } else {
                let a = next_v4;
                next_v4 += 1;
                vec![Ipv4Net::new_assert(Ipv4Addr::from(a), 32)]
            };
            let ipv6 = if with_v6 && k == 0 {
                let p = v6_base | (next_v6 << 72);
                next_v6 += 1;
                vec![Ipv6Net::new_assert(Ipv6Addr::from(p), 56)]
            } else {
                Vec::new()
            };
            let mac: [u8; 5] = rng.random();
            devices.push(Device {
                id: format!("{id}-{}", k + 1).into(),
                name: ["Router", "CPE", "Phone"][k % 3].into(),
                mac: format!(
                    "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    mac[0], mac[1], mac[2], mac[3], mac[4]
                )
                .into(),
                ipv4,
                ipv6,
                line,
            });
            line += 1;
        }
        circuits.push(Circuit {
            id: id.into(),
            name: name.into(),
            parent: parent.map(SmolStr::from),
            download_min: dmin,
            upload_min: umin,
            download_max: dmax,
            upload_max: umax,
            comment: SmolStr::default(),
            sqm: None,
            devices,
        });
    }
    let link = if depth > 0 {
        cap_at(1)
    } else {
        Rate::from_mbps(leaf_cap)
    };
    // What a generated parent node guarantees (flat networks).
    let generated_pn = if depth > 0 {
        Rate::from_mbps(1000)
    } else {
        link
    };
    if !params.oversubscribed {
        let guarantee = |parent: Option<&str>| -> (Rate, Rate) {
            let (d, u) = match parent.and_then(|p| net.node_by_name(p)) {
                Some(n) => (net.node(n).download, net.node(n).upload),
                None => (generated_pn, generated_pn),
            };
            let below = |r: Rate| r.saturating_sub(Rate::from_mbps(1));
            (below(d), below(u))
        };
        fit_minimums(&mut circuits, guarantee);
    }
    net.set_circuits(circuits);

    let config = LqosConfig {
        bridge: Some(BridgeConfig {
            to_internet: "ens20".to_string(),
            to_network: "ens19".to_string(),
        }),
        single_interface: None,
        queues: QueuesConfig {
            default_sqm: "cake diffserv4".into(),
            uplink_bandwidth_mbps: link.mbps_floor(),
            downlink_bandwidth_mbps: link.mbps_floor(),
            generated_pn_download_mbps: generated_pn.mbps_floor(),
            generated_pn_upload_mbps: generated_pn.mbps_floor(),
            ..QueuesConfig::default()
        },
        ..LqosConfig::default()
    };
    Generated {
        network: net,
        config,
    }
}

/// Lowers the minimums of each parent's circuits to max / 8, max / 16, ...
/// (the first that fits) where their max / 4 minimums add up to more than
/// `guarantee(parent)` gives (download, upload).
fn fit_minimums(circuits: &mut [Circuit], guarantee: impl Fn(Option<&str>) -> (Rate, Rate)) {
    let mut by_parent: std::collections::BTreeMap<Option<&str>, Vec<usize>> = Default::default();
    for (i, c) in circuits.iter().enumerate() {
        by_parent.entry(c.parent.as_deref()).or_default().push(i);
    }
    let mut divisor = vec![4u64; circuits.len()];
    for (parent, members) in &by_parent {
        let (gd, gu) = guarantee(*parent);
        let sum = |d: u64, max: fn(&Circuit) -> Rate| -> u64 {
            members
                .iter()
                .map(|&i| (max(&circuits[i]).bps() / d).max(1))
                .sum()
        };
        let mut d = 4u64;
        while d < 1 << 20
            && (sum(d, |c| c.download_max) > gd.bps() || sum(d, |c| c.upload_max) > gu.bps())
        {
            d *= 2;
        }
        for &i in members {
            divisor[i] = d;
        }
    }
    for (c, d) in circuits.iter_mut().zip(divisor) {
        c.download_min = Rate::from_bps((c.download_max.bps() / d).max(1));
        c.upload_min = Rate::from_bps((c.upload_max.bps() / d).max(1));
    }
}

fn add(net: &mut Network, parent: Option<&str>, name: &str, kind: &str, down: Rate, up: Rate) {
    let node = Node {
        name: name.to_string(),
        id: Some(name.to_lowercase().replace('_', "-")),
        node_type: Some(kind.to_string()),
        download: down,
        upload: up,
        virtual_node: false,
    };
    // Names are unique by construction.
    let _ = net.add_node(parent, node);
}
