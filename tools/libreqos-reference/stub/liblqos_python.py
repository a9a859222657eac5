"""Stand-in for LibreQoS's liblqos_python (pyo3) so LibreQoS.py runs
without lqosd or a kernel: config getters read $LQBASE_CONF (lqos.conf),
planner calls run LibreQoS's own Rust planner (harness binary), Bakery
and IP-map calls are recorded to $LQBASE_STATE."""
import json, os, subprocess, tomllib

HARNESS = os.environ["LQREF_HARNESS"]
_conf = None


def _c():
    global _conf
    if _conf is None:
        with open(os.environ["LQBASE_CONF"], "rb") as f:
            _conf = tomllib.load(f)
    return _conf


def _q(key, default):
    return _c().get("queues", {}).get(key, default)


def _state():
    return os.environ["LQBASE_STATE"]


def is_lqosd_alive(): return True
def check_config(): return True
def is_libre_already_running(): return False
def create_lock_file(): pass
def free_lock_file(): pass
def clear_ip_mappings(): pass
def delete_ip_mapping(*a): pass
def add_ip_mapping(*a): pass
def validate_shaped_devices(): return "OK"
def scheduler_error(*a): return True
def submit_urgent_issue(*a, **k): return False
def clear_urgent_issue_by_identity(*a, **k): return False
def xdp_ip_mapping_ready(): return True
def validated_runtime_shaping_inputs_path(): return None
def get_libreqos_state_directory(): return _state()
def get_libreqos_directory(): return os.environ["LQBASE_DIR"]
def xdp_ip_mapping_capacity(): return 10**9
def overrides_circuit_adjustments_effective(): return []
def get_tree_weights(): return []
def get_weights(): return []
def is_network_flat(): return False
def enable_insight_topology(): return False
def is_insight_enabled(): return False
def topology_import_ingress_enabled(): return False
def run_shell_commands_as_sudo(): return False
def enable_actual_shell_commands(): return True
def shaping_cpu_count(): return int(os.environ.get("LQBASE_CPUS", "64"))
def automatic_import_uisp(): return False
def automatic_import_splynx(): return False
def automatic_import_powercode(): return False
def automatic_import_sonar(): return False
def automatic_import_wispgate(): return False
def automatic_import_netzur(): return False
def automatic_import_visp(): return False


# The getters as lqos_python implements them (u32 casts included).
def sqm(): return _q("default_sqm", "cake diffserv4")
def fast_queues_fq_codel():
    v = _q("fast_queues_fq_codel", None)
    return float(1000.0 if v is None else v)
def upstream_bandwidth_capacity_download_mbps(): return int(_q("uplink_bandwidth_mbps", 1000))
def upstream_bandwidth_capacity_upload_mbps(): return int(_q("uplink_bandwidth_mbps", 1000))
def generated_pn_download_mbps(): return int(_q("generated_pn_download_mbps", 1000))
def generated_pn_upload_mbps(): return int(_q("generated_pn_upload_mbps", 1000))
def queues_available_override(): return int(_q("override_available_queues", 0) or 0)
def use_bin_packing_to_balance_cpu(): return bool(_q("use_binpacking", False))
def queue_mode():
    m = _q("queue_mode", None)
    if m is None:
        m = "observe" if _q("monitor_only", False) else "shape"
    return m
def on_a_stick(): return "bridge" not in _c()
def interface_a():
    c = _c()
    return c["bridge"]["to_network"] if "bridge" in c else c["single_interface"]["interface"]
def interface_b():
    c = _c()
    return c["bridge"]["to_internet"] if "bridge" in c else c["single_interface"]["interface"]


def _harness(sub, payload):
    out = subprocess.run([HARNESS, sub], input=json.dumps(payload).encode(), capture_output=True, check=True)
    return json.loads(out.stdout)


def plan_top_level_cpu_bins(items, queues_available, prev_assign=None, last_change_ts=None, now_ts=None,
                            mode=None, move_budget_per_run=None, cooldown_seconds=None, hysteresis_threshold=None):
    return _harness("bins", {
        "items": items, "bins": ["CpueQueue%d" % i for i in range(queues_available)],
        "prev_assign": prev_assign or {}, "last_change_ts": last_change_ts or {}, "now_ts": now_ts or 0.0,
        "mode": mode, "move_budget_per_run": move_budget_per_run if move_budget_per_run is not None else 1,
        "cooldown_seconds": cooldown_seconds if cooldown_seconds is not None else 3600.0,
        "hysteresis_threshold": hysteresis_threshold if hysteresis_threshold is not None else 0.03,
    })


def plan_class_identities(sites, circuit_groups, site_state=None, circuit_state=None, stick_offset=0, circuit_padding=8):
    return _harness("identities", {
        "sites": sites, "groups": circuit_groups, "site_state": site_state or {},
        "circuit_state": circuit_state or {}, "stick_offset": stick_offset, "circuit_padding": circuit_padding,
    })


class BatchedCommands:
    def __init__(self):
        self.batch = []
    def add_ip_mapping(self, ip, classid, cpu, upload, circuit_id, device_id):
        self.batch.append({"ip": ip, "classid": classid, "cpu": cpu, "upload": upload,
                           "circuit_id": circuit_id, "device_id": device_id})
    def finish_ip_mappings(self): pass
    def submit(self):
        with open(os.path.join(_state(), "ip_mappings.json"), "w") as f:
            json.dump(self.batch, f, indent=1)
    def length(self): return len(self.batch)
    def log(self): self.submit()


class Bakery:
    def __init__(self):
        self.queue = []
    def start_batch(self): pass
    def setup_mq(self, queues_available, stick_offset):
        self.queue.append({"op": "setup_mq", "queues_available": queues_available, "stick_offset": stick_offset})
    def add_site(self, site_name, parent_class_id, up_parent_class_id, class_minor, dmin, umin, dmax, umax):
        self.queue.append({"op": "add_site", "site_name": site_name, "parent_class_id": parent_class_id,
                           "up_parent_class_id": up_parent_class_id, "class_minor": class_minor,
                           "download_bandwidth_min": dmin, "upload_bandwidth_min": umin,
                           "download_bandwidth_max": dmax, "upload_bandwidth_max": umax})
    def add_circuit(self, circuit_name, site_name, parent_class_id, up_parent_class_id, class_minor, dmin, umin,
                    dmax, umax, class_major, up_class_major, ip_addresses, sqm_override):
        self.queue.append({"op": "add_circuit", "circuit_name": circuit_name, "site_name": site_name,
                           "parent_class_id": parent_class_id, "up_parent_class_id": up_parent_class_id,
                           "class_minor": class_minor, "download_bandwidth_min": dmin,
                           "upload_bandwidth_min": umin, "download_bandwidth_max": dmax,
                           "upload_bandwidth_max": umax, "class_major": class_major,
                           "up_class_major": up_class_major, "ip_addresses": ip_addresses,
                           "sqm_override": sqm_override})
    def estimate_qdisc_budget(self):
        return {"ok": True, "interfaces": {}, "safe_budget": 0, "hard_limit": 0}
    def commit(self):
        path = os.path.join(_state(), "bakery_calls.jsonl")
        with open(path, "w") as f:
            for c in self.queue:
                f.write(json.dumps(c) + "\n")
        out = subprocess.run([HARNESS, "bake", os.environ["LQBASE_CONF"]], stdin=open(path, "rb"),
                             capture_output=True, check=True)
        os.makedirs(os.path.join(_state(), "debug"), exist_ok=True)
        with open(os.path.join(_state(), "debug", "linux_tc_rust.txt"), "wb") as f:
            f.write(out.stdout)
