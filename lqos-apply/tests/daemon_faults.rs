//! Kernel faults under the reload daemon ([`Faulty`] around the recording
//! fake kernel, driven through [`lqos_apply::daemon::Driver`] with a manual
//! clock): at any op of the start load or of an edit's load, any errno or a
//! cut socket, the daemon reports the failing op and the kernel's words,
//! keeps the last good plan, retries after its retry time reading the
//! kernel back, and converges to what the files say.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use lqos_apply::backend::{Fault, Faulty, Recording};
use lqos_apply::daemon::{Driver, Event, FileEvent, Kernel, Settings};
use lqos_apply::error::ApplyError;
use lqos_apply::inputs::InputFile;
use lqos_apply::inputs::{Inputs, PlanOverrides};
use lqos_apply::saved::load_saved_plan;
use lqos_apply::state::NetnsState;
use lqos_apply::verify_plan;
use lqos_apply::watch::{Outcome, Trigger, WatchStatus};
use lqos_model::Rate;
use proptest::prelude::*;

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::Errno(libc::ENOMEM)),
        Just(Fault::Errno(libc::EBUSY)),
        Just(Fault::Errno(libc::EINVAL)),
        Just(Fault::Errno(libc::ENOBUFS)),
        Just(Fault::CutSocket),
    ]
}

/// Where the fault goes.
#[derive(Debug, Clone, Copy)]
enum When {
    /// The start's full load.
    Start,
    /// An edit of a few rows (the incremental path).
    Edit,
    /// An edit of network.json (the full path, diffed against the model).
    NetworkEdit,
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![Just(When::Start), Just(When::Edit), Just(When::NetworkEdit)]
}

/// The input files of a generated network in a temporary directory.
struct Files {
    dir: tempfile::TempDir,
    net: lqos_model::Network,
}

impl Files {
    fn new(circuits: usize) -> Files {
        let g = lqos_model::generate(&{
            let mut p = lqos_model::GenParams::with_circuits(circuits);
            p.seed = 5;
            p
        });
        let dir = tempfile::tempdir().unwrap();
        let w = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        w(
            "network.json",
            lqos_model::write::write_network_json(&g.network),
        );
        w(
            "ShapedDevices.csv",
            lqos_model::write::write_shaped_devices(&g.network),
        );
        w("lqos.conf", lqos_model::write::write_config(&g.config));
        Files {
            dir,
            net: g.network,
        }
    }

    /// Three circuits' download ceilings go up.
    fn edit_rows(&mut self) {
        let mut cs = self.net.circuits().to_vec();
        for i in [2, 9, 17] {
            cs[i].download_max = Rate::from_mbps(cs[i].download_min.mbps_floor() + 7);
        }
        self.net.set_circuits(cs);
        std::fs::write(
            self.dir.path().join("ShapedDevices.csv"),
            lqos_model::write::write_shaped_devices(&self.net),
        )
        .unwrap();
    }

    /// Makes the edit of `when`; the file it changed.
    fn edit(&mut self, when: When) -> InputFile {
        match when {
            When::Start => InputFile::Devices,
            When::Edit => {
                self.edit_rows();
                InputFile::Devices
            }
            When::NetworkEdit => {
                self.edit_network();
                InputFile::Network
            }
        }
    }

    /// network.json's first top-level node changes its rates.
    fn edit_network(&self) {
        let path = self.dir.path().join("network.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let (_, node) = v.as_object_mut().unwrap().iter_mut().next().unwrap();
        node["downloadBandwidthMbps"] = 777.into();
        std::fs::write(&path, v.to_string()).unwrap();
    }
}

fn settings() -> Settings {
    let mut s = Settings::default();
    s.overrides = PlanOverrides::default().sqm("pfifo".parse().unwrap());
    s.verify_every = None;
    s.debounce = Duration::ZERO;
    s
}

/// The ops of each [`When`]'s load without faults (the inputs and the
/// plans are deterministic).
fn load_sizes() -> [usize; 3] {
    static SIZES: std::sync::OnceLock<[usize; 3]> = std::sync::OnceLock::new();
    *SIZES.get_or_init(|| {
        [When::Start, When::Edit, When::NetworkEdit].map(|when| {
            let mut f = Files::new(40);
            let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
            let st = NetnsState::new(f.dir.path().join("st"), None);
            let k = Kernel {
                live: &kernel,
                backend: &kernel,
            };
            let mut d = Driver::new(settings(), Inputs::in_dir(f.dir.path()), &st, k);
            d.start(&mut |_| {});
            if let When::Start = when {
                return kernel.sent().len();
            }
            let before = kernel.sent().len();
            let file = f.edit(when);
            d.file_event(file, FileEvent::Closed);
            d.run(&mut |_| {});
            kernel.sent().len() - before
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_daemon_reports_a_kernel_fault_keeps_the_last_good_plan_retries_and_converges(
        at in 0.0f64..1.0,
        fault in fault(),
        when in when(),
    ) {
        let mut files = Files::new(40);
        let faulty = Faulty::new(Recording::new().with_link("ens19", 4).with_link("ens20", 4));
        let state = NetnsState::new(files.dir.path().join("st"), None);
        let k = Kernel { live: faulty.inner(), backend: &faulty };
        let settings = settings();
        let retry = settings.retry;
        let clock = Rc::new(Cell::new(Instant::now()));
        let c = clock.clone();
        let mut d = Driver::new(settings, Inputs::in_dir(files.dir.path()), &state, k)
            .with_clock(move || c.get());
        let mut events = Vec::new();

        // Where the fault goes: op k of the load it hits.
        let n = load_sizes()[when as usize];
        prop_assume!(n > 0);
        let k = ((at * n as f64) as usize).min(n - 1);
        let last_good = match when {
            When::Start => {
                faulty.fail_at(k, fault);
                d.start(&mut |e| events.push(e));
                None
            }
            When::Edit | When::NetworkEdit => {
                d.start(&mut |_| {});
                let good = d.core().plan().unwrap().clone();
                faulty.fail_at(k, fault);
                let file = files.edit(when);
                d.file_event(file, FileEvent::Closed);
                d.run(&mut |e| events.push(e));
                Some(good)
            }
        };
        prop_assert_eq!(faulty.fired(), 1);

        // Reported: the op and the kernel's words (or the lost ACK).
        let err = events.iter().find_map(|e| match e {
            Event::LoadFailed { error, .. } => Some(error),
            _ => None,
        });
        let Some(err) = err else {
            return Err(TestCaseError::fail(format!("no LoadFailed in {events:?}")));
        };
        let text = err.to_string();
        match (fault, err) {
            (Fault::Errno(e), ApplyError::OpFailed { dev, op, errno, .. }) => {
                prop_assert_eq!(*errno, Some(e));
                let words = nix::errno::Errno::from_raw(e).desc();
                prop_assert!(text.contains(words), "{}", text);
                let line = lqos_tc::render::render_line(dev, op);
                prop_assert!(text.contains(&line), "{} lacks {}", text, line);
            }
            (Fault::CutSocket, ApplyError::Netlink { .. }) => {
                prop_assert!(text.contains("receiving the ACK"), "{}", text);
            }
            (f, e) => prop_assert!(false, "{:?} reported as {}", f, e),
        }
        prop_assert!(!d.core().known().is_known());
        // The status says so; the last good plan is not the one that failed.
        let st = WatchStatus::load(&state).unwrap().unwrap();
        let rec = st.last.unwrap();
        prop_assert_eq!(rec.outcome, Outcome::Failed);
        prop_assert!(rec.error.as_deref().is_some_and(|e| e == text), "{:?}", rec.error);
        let saved = load_saved_plan(&state).unwrap().map(|s| s.plan);
        prop_assert_eq!(saved.as_ref(), last_good.as_ref());

        // The retry after the retry time reads the kernel back, converges,
        // and only then saves the plan as the last good one.
        let retry_at = d.deadline().expect("a retry is scheduled");
        prop_assert_eq!(retry_at, clock.get() + retry);
        clock.set(retry_at);
        events.clear();
        d.run(&mut |e| events.push(e));
        let applied = events.iter().find_map(|e| match e {
            Event::Applied(a) => Some(a),
            _ => None,
        });
        prop_assert!(applied.is_some_and(|a| a.trigger == Trigger::Retry), "{:?}", events);
        prop_assert!(d.core().known().is_known());
        let plan = d.core().plan().unwrap().clone();
        let v = verify_plan(&plan, faulty.inner()).unwrap();
        prop_assert!(v.is_clean(), "{:?}", v);
        let saved = load_saved_plan(&state).unwrap().map(|s| s.plan);
        prop_assert_eq!(saved.as_ref(), Some(&plan));
        prop_assert_eq!(d.deadline(), None);
    }
}
