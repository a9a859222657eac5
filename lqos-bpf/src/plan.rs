//! From an lqos plan to what the data path needs: the interfaces with
//! their roles and default queues, the map entries, which CPU owns which
//! TX queue. Pure.

use lqos_tc::config::Interfaces;
use lqos_tc::{Plan, PlanConfig};

use crate::attach::Interface;
use crate::error::{BpfError, Result};
use crate::layout::{IfaceConfig, Role};
use crate::model::Entries;

/// Which CPU owns each TX queue: queue `q` belongs to `cpus[q % n]`, so
/// with as many queues as CPUs each CPU owns one queue and transmits on
/// it alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPolicy {
    cpus: Vec<u32>,
}

impl CpuPolicy {
    /// Queues spread over `cpus` in order (empty: everything on CPU 0).
    pub fn new(cpus: Vec<u32>) -> CpuPolicy {
        CpuPolicy {
            cpus: if cpus.is_empty() { vec![0] } else { cpus },
        }
    }

    /// Queues spread over the online CPUs.
    pub fn online() -> Result<CpuPolicy> {
        Ok(CpuPolicy::new(crate::sys::online_cpus()?))
    }

    /// The CPU that owns TX queue `queue`.
    pub fn cpu_of(&self, queue: u32) -> u16 {
        self.cpus[queue as usize % self.cpus.len()] as u16
    }

    /// The CPUs, each of which gets a cpumap entry.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }
}

fn vlan(v: u32, which: &str) -> Result<u16> {
    u16::try_from(v)
        .ok()
        .filter(|v| *v < 4096)
        .ok_or_else(|| BpfError::Preflight {
            check: "configuration",
            message: format!("{which} {v} is not a VLAN ID (0-4095)"),
        })
}

/// The interfaces of a plan's config with their roles: on a bridge the
/// download interface faces the subscribers and the upload one the
/// internet, each direction's default class spread over its queues; on a
/// stick one interface with both halves of the queues, the direction told
/// by the VLAN (as LibreQoS's `single_interface`).
pub fn interfaces(cfg: &PlanConfig) -> Result<Vec<Interface>> {
    let per_dir = cfg.queues_per_direction();
    let count = u16::try_from(per_dir).map_err(|_| BpfError::Preflight {
        check: "configuration",
        message: format!("{per_dir} queues per direction do not fit the maps"),
    })?;
    let side = |role| IfaceConfig::bridge(role, count);
    Ok(match &cfg.interfaces {
        Interfaces::Bridge { download, upload } => vec![
            Interface {
                name: download.clone(),
                config: side(Role::Subscriber),
            },
            Interface {
                name: upload.clone(),
                config: side(Role::Internet),
            },
        ],
        Interfaces::OnAStick {
            interface,
            internet_vlan,
            network_vlan,
        } => {
            let mut c = side(Role::Stick {
                internet_vlan: vlan(*internet_vlan, "internet_vlan")?,
                network_vlan: vlan(*network_vlan, "network_vlan")?,
            });
            c.up.queue_base = count;
            vec![Interface {
                name: interface.clone(),
                config: c,
            }]
        }
    })
}

/// The map entries of `plan` (see [`Entries::from_ip_map`]).
pub fn entries(plan: &Plan, cpus: &CpuPolicy) -> Result<Entries> {
    Entries::from_ip_map(&plan.ip_map, |q| cpus.cpu_of(q))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_model::{Circuit, Device, Network, Rate};

    fn net() -> Network {
        let mut n = Network::new();
        for (i, (v4, v6)) in [
            ("100.64.0.7/32", None),
            ("100.64.1.0/29", Some("2001:db8:1:ff00::/56")),
        ]
        .into_iter()
        .enumerate()
        {
            n.add_circuit(Circuit {
                id: format!("c{i}").into(),
                name: format!("n{i}").into(),
                parent: None,
                download_min: Rate::from_mbps(1),
                upload_min: Rate::from_mbps(1),
                download_max: Rate::from_mbps(10),
                upload_max: Rate::from_mbps(5),
                comment: Default::default(),
                sqm: None,
                devices: vec![Device {
                    id: format!("d{i}").into(),
                    name: "cpe".into(),
                    mac: Default::default(),
                    ipv4: vec![v4.parse().unwrap()],
                    ipv6: v6.map(|s| s.parse().unwrap()).into_iter().collect(),
                    line: 0,
                }],
            });
        }
        n
    }

    #[test]
    fn a_bridge_plan_gives_both_sides_and_every_address() {
        let cfg = PlanConfig::bridge("ens19", "ens20", 4);
        let p = lqos_tc::plan(&net(), &cfg, None).unwrap();
        let ifs = interfaces(&cfg).unwrap();
        assert_eq!(ifs[0].name, "ens19");
        assert_eq!(ifs[0].config.role, Role::Subscriber);
        assert_eq!(ifs[1].config.role, Role::Internet);
        assert_eq!(ifs[1].config.down.queue_count, 4);
        let e = entries(&p, &CpuPolicy::new(vec![0, 1])).unwrap();
        assert_eq!(e.counts(), (1, 2));
        for ent in p.ip_map.entries() {
            let (_, v) = e.lookup(ent.net.network()).unwrap();
            assert_eq!(v.down.classid, ent.download.classid.raw());
            assert_eq!(v.up.classid, ent.upload.classid.raw());
            assert_eq!(u32::from(v.down.queue), ent.download.queue);
            assert_eq!(v.down.cpu, (ent.download.queue % 2) as u16);
            assert_eq!(v.circuit, ent.circuit);
        }
    }

    #[test]
    fn a_stick_splits_the_queues_and_takes_the_vlans() {
        let mut cfg = PlanConfig::bridge("ens19", "ens20", 8);
        cfg.interfaces = Interfaces::OnAStick {
            interface: "ens19".into(),
            internet_vlan: 100,
            network_vlan: 200,
        };
        let ifs = interfaces(&cfg).unwrap();
        assert_eq!(ifs.len(), 1);
        let c = ifs[0].config;
        assert_eq!(
            c.role,
            Role::Stick {
                internet_vlan: 100,
                network_vlan: 200
            }
        );
        assert_eq!((c.down.queue_base, c.down.queue_count), (0, 4));
        assert_eq!((c.up.queue_base, c.up.queue_count), (4, 4));
        let p = lqos_tc::plan(&net(), &cfg, None).unwrap();
        let e = entries(&p, &CpuPolicy::new(vec![0, 1])).unwrap();
        for (_, v) in e.iter() {
            assert!(v.down.queue < 4 && v.up.queue >= 4, "{v:?}");
            assert_eq!(v.up.classid >> 16, u32::from(v.up.queue) + 1);
        }
        cfg.interfaces = Interfaces::OnAStick {
            interface: "ens19".into(),
            internet_vlan: 5000,
            network_vlan: 200,
        };
        assert!(interfaces(&cfg)
            .unwrap_err()
            .to_string()
            .contains("internet_vlan 5000"));
    }
}
