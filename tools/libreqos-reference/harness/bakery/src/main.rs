//! Runs LibreQoS's own planner and
//! bakery command builder on what a stubbed LibreQoS.py recorded.
//!   bakery identities < json   -> plan_class_identities output
//!   bakery bins < json         -> plan_top_level_assignments output
//!   bakery bake CONF.toml < calls.jsonl -> the tc argv lines the bakery builds (one per line)
#![allow(dead_code, unused_imports)]
mod commands;
mod qdisc_handles;
mod queue_math;

use commands::{BakeryCommands, ExecutionMode};
use lqos_bus::TcHandle;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub(crate) static MQ_CREATED: AtomicBool = AtomicBool::new(false);

fn hash_to_i64(text: &str) -> i64 {
    // Only needs to be unique per name here.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish() as i64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
    match args[1].as_str() {
        "identities" => {
            let v: Value = serde_json::from_str(&input).unwrap();
            let sites: Vec<lqos_config::SiteIdentityInput> = serde_json::from_value(v["sites"].clone()).unwrap();
            let groups: Vec<lqos_config::CircuitIdentityGroupInput> = serde_json::from_value(v["groups"].clone()).unwrap();
            let prev_s: BTreeMap<String, lqos_config::PlannerSiteIdentityState> = serde_json::from_value(v["site_state"].clone()).unwrap_or_default();
            let prev_c: BTreeMap<String, lqos_config::PlannerCircuitIdentityState> = serde_json::from_value(v["circuit_state"].clone()).unwrap_or_default();
            let out = lqos_config::plan_class_identities(&sites, &groups, &prev_s, &prev_c,
                v["stick_offset"].as_u64().unwrap() as u16, v["circuit_padding"].as_u64().unwrap() as u32);
            println!("{}", serde_json::to_string(&out).unwrap());
        }
        "bins" => {
            let v: Value = serde_json::from_str(&input).unwrap();
            let items: Vec<lqos_config::TopLevelPlannerItem> = serde_json::from_value(v["items"].clone()).unwrap();
            let bins: Vec<String> = serde_json::from_value(v["bins"].clone()).unwrap();
            let prev: BTreeMap<String, String> = serde_json::from_value(v["prev_assign"].clone()).unwrap_or_default();
            let ts: BTreeMap<String, f64> = serde_json::from_value(v["last_change_ts"].clone()).unwrap_or_default();
            let mode = match v["mode"].as_str().unwrap_or("stable_greedy") {
                "round_robin" => lqos_config::TopLevelPlannerMode::RoundRobin,
                "greedy" => lqos_config::TopLevelPlannerMode::Greedy,
                _ => lqos_config::TopLevelPlannerMode::StableGreedy,
            };
            let params = lqos_config::TopLevelPlannerParams {
                mode,
                hysteresis_threshold: v["hysteresis_threshold"].as_f64().unwrap_or(0.03),
                cooldown_seconds: v["cooldown_seconds"].as_f64().unwrap_or(3600.0),
                move_budget_per_run: v["move_budget_per_run"].as_u64().unwrap_or(1) as usize,
            };
            let out = lqos_config::plan_top_level_assignments(&items, &bins, &prev, &ts, v["now_ts"].as_f64().unwrap_or(0.0), &params);
            println!("{}", serde_json::to_string(&out).unwrap());
        }
        "bake" => {
            let conf: lqos_config::Config = toml::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
            let mut conf = conf;
            if conf.queues.monitor_only { conf.queues.queue_mode = lqos_config::QueueMode::Observe; }
            let config = Arc::new(conf);
            let mut next_handle: HashMap<String, u16> = HashMap::new();
            let mut take = |dev: String| { let h = next_handle.entry(dev).or_insert(0x9000); let v = *h; *h += 1; v };
            for line in input.lines().filter(|l| !l.trim().is_empty()) {
                let v: Value = serde_json::from_str(line).unwrap();
                let f = |k: &str| v[k].as_f64().unwrap() as f32;
                let h = |k: &str| TcHandle::from_string(v[k].as_str().unwrap()).unwrap();
                let cmd = match v["op"].as_str().unwrap() {
                    "setup_mq" => BakeryCommands::MqSetup {
                        queues_available: v["queues_available"].as_u64().unwrap() as usize,
                        stick_offset: v["stick_offset"].as_u64().unwrap() as usize,
                    },
                    "add_site" => BakeryCommands::AddSite {
                        site_hash: hash_to_i64(v["site_name"].as_str().unwrap()),
                        parent_class_id: h("parent_class_id"),
                        up_parent_class_id: h("up_parent_class_id"),
                        class_minor: v["class_minor"].as_u64().unwrap() as u16,
                        download_bandwidth_min: f("download_bandwidth_min"),
                        upload_bandwidth_min: f("upload_bandwidth_min"),
                        download_bandwidth_max: f("download_bandwidth_max"),
                        upload_bandwidth_max: f("upload_bandwidth_max"),
                    },
                    "add_circuit" => {
                        let stick = config.on_a_stick_mode();
                        BakeryCommands::AddCircuit {
                            circuit_hash: hash_to_i64(v["circuit_name"].as_str().unwrap()),
                            circuit_name: v["circuit_name"].as_str().map(String::from),
                            site_name: v["site_name"].as_str().map(String::from),
                            parent_class_id: h("parent_class_id"),
                            up_parent_class_id: h("up_parent_class_id"),
                            class_minor: v["class_minor"].as_u64().unwrap() as u16,
                            download_bandwidth_min: f("download_bandwidth_min"),
                            upload_bandwidth_min: f("upload_bandwidth_min"),
                            download_bandwidth_max: f("download_bandwidth_max"),
                            upload_bandwidth_max: f("upload_bandwidth_max"),
                            class_major: v["class_major"].as_u64().unwrap() as u16,
                            up_class_major: v["up_class_major"].as_u64().unwrap() as u16,
                            down_qdisc_handle: Some(take(config.isp_interface())),
                            up_qdisc_handle: if stick { None } else { Some(take(config.internet_interface())) },
                            ip_addresses: v["ip_addresses"].as_str().unwrap_or("").to_string(),
                            sqm_override: v["sqm_override"].as_str().map(String::from),
                        }
                    }
                    _ => continue,
                };
                if let Some(cmds) = cmd.to_commands(&config, ExecutionMode::Builder) {
                    for c in cmds { println!("{}", c.join(" ")); }
                }
            }
        }
        other => panic!("unknown subcommand {other}"),
    }
}
