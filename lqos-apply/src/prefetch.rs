//! Reading the live trees on a second thread while the caller plans.
//!
//! A reload that changes nothing is mostly two things: the caller's own
//! work (read the saved allocation, parse and validate the inputs, plan)
//! and the kernel answering the tree dumps. Neither needs the other until
//! the diff, and the dumps are almost all kernel time on the dumping
//! thread, so on a machine with two cores they overlap: [`Prefetched::overlap`]
//! dumps the interfaces (known from `lqos.conf` before anything is parsed)
//! on a scoped thread while the caller's closure plans, joins, and serves
//! each tree once to the apply that follows ([`LiveSource::dump`]).
//!
//! Take the apply lock ([`crate::state::NetnsState::lock`]) before
//! starting, so that no other apply changes the trees between the read and the
//! diff ([`crate::Session::apply_planned_locked`]).
//!
//! ```
//! use lqos_apply::backend::Recording;
//! use lqos_apply::live::LiveSource;
//! use lqos_apply::load::Prefetched;
//!
//! let kernel = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
//! let devs = ["ens19".to_string(), "ens20".to_string()];
//! let (planned, live) =
//!     Prefetched::overlap(&kernel, &kernel, &devs, || Ok::<_, String>("planned")).unwrap();
//! assert_eq!(planned, "planned");
//! assert_eq!(live.pending(), 2);
//! assert!(live.dump("ens19").unwrap().qdiscs.is_empty()); // served from the read-ahead
//! assert_eq!(live.pending(), 1);
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use lqos_tc::ops::QdiscKind;
use lqos_tc::tree::TcTree;

use crate::error::Result;
use crate::live::{KindSupport, LinkSummary, LiveSource};
use crate::timing::{CpuScope, Stopwatch, Timing};

/// A [`LiveSource`] whose first [`dump`](LiveSource::dump) of each
/// interface returns the tree read ahead by [`Prefetched::overlap`];
/// everything else (links, later dumps such as a verify after the load,
/// probes) goes to the inner source.
pub struct Prefetched<'a> {
    inner: &'a dyn LiveSource,
    trees: Mutex<BTreeMap<String, Result<TcTree>>>,
    timing: Timing,
}

impl std::fmt::Debug for Prefetched<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefetched")
            .field("pending", &self.pending())
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

impl<'a> Prefetched<'a> {
    /// Runs `work` on the calling thread while a scoped thread dumps `devs`
    /// from `reader`, one after another, and returns `work`'s result with
    /// the trees (each `Ok` or the dump's error, which names the
    /// interface). Use a `reader` with its own socket (a second
    /// [`crate::live::NetlinkLive`]), so that `work`'s own link lookups on
    /// `inner` do not wait for the dumps.
    ///
    /// The thread is always joined before this returns: when `work` fails
    /// (or panics) the dumps not started yet are skipped, the one under
    /// way finishes, and the error is returned; nothing is ever sent to
    /// the kernel here, only dump requests.
    pub fn overlap<T, E>(
        inner: &'a dyn LiveSource,
        reader: &dyn LiveSource,
        devs: &[String],
        work: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<(T, Prefetched<'a>), E> {
        let stop = AtomicBool::new(false);
        let (out, read) = std::thread::scope(|s| {
            let stop = &stop;
            let reader_thread = s.spawn(move || {
                let sw = Stopwatch::start(CpuScope::Thread);
                let mut trees = BTreeMap::new();
                for dev in devs {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    trees.insert(dev.clone(), reader.dump(dev));
                }
                (trees, sw.stop())
            });
            // Stops the reader early if `work` fails or unwinds.
            struct StopOnDrop<'s>(&'s AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let guard = StopOnDrop(stop);
            let out = work();
            if out.is_err() {
                drop(guard);
            } else {
                std::mem::forget(guard);
            }
            let read = reader_thread.join();
            (out, read)
        });
        let out = out?;
        // If the reader panicked, nothing was read ahead: every dump goes
        // to `inner` (which then reports whatever is wrong).
        let (trees, timing) = read.unwrap_or_default();
        Ok((
            out,
            Prefetched {
                inner,
                trees: Mutex::new(trees),
                timing,
            },
        ))
    }

    /// Interfaces read ahead whose tree has not been served yet.
    pub fn pending(&self) -> usize {
        self.trees.lock().expect("prefetched trees").len()
    }

    /// Wall and CPU time of the reading thread (its CPU time is nearly all
    /// the kernel answering the dumps).
    pub fn timing(&self) -> Timing {
        self.timing
    }
}

impl LiveSource for Prefetched<'_> {
    fn netns(&self) -> Option<&str> {
        self.inner.netns()
    }

    fn link(&self, dev: &str) -> Result<Option<LinkSummary>> {
        self.inner.link(dev)
    }

    /// The tree read ahead (once), else a fresh dump from the inner source.
    fn dump(&self, dev: &str) -> Result<TcTree> {
        let ahead = self.trees.lock().expect("prefetched trees").remove(dev);
        match ahead {
            Some(tree) => tree,
            None => self.inner.dump(dev),
        }
    }

    fn probe_qdiscs(&self, kinds: &[QdiscKind]) -> Result<Vec<KindSupport>> {
        self.inner.probe_qdiscs(kinds)
    }

    fn probe_classifier(&self) -> Result<std::result::Result<(), crate::error::ClassifierMissing>> {
        self.inner.probe_classifier()
    }

    /// The inner source's (so the memory preflight runs as without the
    /// read-ahead).
    fn meminfo(&self) -> Option<crate::meminfo::MemInfo> {
        self.inner.meminfo()
    }

    fn poll(&self, req: &crate::stats::PollRequest) -> crate::stats::Polled {
        self.inner.poll(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{NoProgress, Recording};
    use crate::engine::{apply_plan, ApplyOptions};
    use crate::error::ApplyError;
    use crate::netlink::NetlinkError;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// A reader over a [`Recording`] that is slow, counts the dumps in
    /// flight and finished, and fails the dump of `fail` like a socket
    /// would (the error names the interface).
    struct SlowReader<'r> {
        rec: &'r Recording,
        fail: Option<&'static str>,
        in_flight: AtomicUsize,
        done: AtomicUsize,
    }

    impl<'r> SlowReader<'r> {
        fn new(rec: &'r Recording, fail: Option<&'static str>) -> Self {
            SlowReader {
                rec,
                fail,
                in_flight: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
            }
        }
    }

    impl LiveSource for SlowReader<'_> {
        fn link(&self, dev: &str) -> Result<Option<LinkSummary>> {
            self.rec.link(dev)
        }
        fn dump(&self, dev: &str) -> Result<TcTree> {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(30));
            let r = if self.fail == Some(dev) {
                Err(ApplyError::Netlink {
                    dev: Some(dev.to_string()),
                    action: crate::error::NetlinkAction::ReadTree,
                    source: NetlinkError::Io {
                        what: crate::netlink::Request::Dump {
                            of: crate::netlink::DumpOf::Qdiscs,
                            ifindex: 1,
                            parent: None,
                        },
                        source: std::io::Error::from_raw_os_error(libc::ENOBUFS),
                    },
                })
            } else {
                self.rec.dump(dev)
            };
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.done.fetch_add(1, Ordering::SeqCst);
            r
        }
        fn probe_qdiscs(&self, kinds: &[QdiscKind]) -> Result<Vec<KindSupport>> {
            self.rec.probe_qdiscs(kinds)
        }
        fn probe_classifier(
            &self,
        ) -> Result<std::result::Result<(), crate::error::ClassifierMissing>> {
            self.rec.probe_classifier()
        }
        fn poll(&self, req: &crate::stats::PollRequest) -> crate::stats::Polled {
            self.rec.poll(req)
        }
    }

    fn plan(circuits: usize, seed: u64) -> lqos_tc::Plan {
        crate::test_fixtures::bridge_plan(circuits, seed, "pfifo").1
    }

    fn devs() -> Vec<String> {
        vec!["ens19".into(), "ens20".into()]
    }

    fn kernel_with(p: &lqos_tc::Plan) -> Recording {
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        apply_plan(p, &rec, &rec, ApplyOptions::default(), &NoProgress).unwrap();
        rec.clear_sent();
        rec
    }

    #[test]
    fn read_ahead_trees_give_the_same_diff_and_are_served_once() {
        let p1 = plan(200, 1);
        let rec = kernel_with(&p1);
        // Nothing changed: nothing to send, both trees read ahead.
        let reader = SlowReader::new(&rec, None);
        let (p, live) =
            Prefetched::overlap(&rec, &reader, &devs(), || Ok::<_, ApplyError>(p1.clone()))
                .unwrap();
        assert_eq!(reader.done.load(Ordering::SeqCst), 2);
        let r = apply_plan(&p, &live, &rec, ApplyOptions::default(), &NoProgress).unwrap();
        assert_eq!(r.ops_total(), 0);
        assert_eq!(live.pending(), 0);
        // A later dump (a verify after the load) is a fresh one, not the
        // tree read before the load.
        let p2 = plan(200, 2);
        let reader = SlowReader::new(&rec, None);
        let (p, live) =
            Prefetched::overlap(&rec, &reader, &devs(), || Ok::<_, ApplyError>(p2.clone()))
                .unwrap();
        let opts = ApplyOptions::default().verify_after(true);
        let r = apply_plan(&p, &live, &rec, opts, &NoProgress).unwrap();
        assert!(r.ops_total() > 0);
        assert!(r.verify.unwrap().is_clean());
        assert_eq!(rec.tree("ens19").unwrap(), p2.interfaces[0].tree());
        // An interface not read ahead is dumped on demand.
        let reader = SlowReader::new(&rec, None);
        let only = vec!["ens20".to_string()];
        let (_, live) = Prefetched::overlap(&rec, &reader, &only, || Ok::<_, ()>(())).unwrap();
        assert_eq!(live.dump("ens19").unwrap(), p2.interfaces[0].tree());
        assert_eq!(live.pending(), 1);
    }

    #[test]
    fn everything_but_the_first_dumps_goes_to_the_inner_source() {
        let mib = 1u64 << 20;
        let mem = crate::meminfo::MemInfo {
            total: 1024 * mib,
            available: 700 * mib,
        };
        let rec = Recording::new()
            .with_link("ens19", 4)
            .with_link("ens20", 4)
            .with_meminfo(mem)
            .without_qdisc_kind("cake");
        let reader = SlowReader::new(&rec, None);
        let (_, live) = Prefetched::overlap(&rec, &reader, &devs(), || Ok::<_, ()>(())).unwrap();
        assert_eq!(live.meminfo(), rec.meminfo());
        assert!(live.meminfo().is_some());
        assert_eq!(live.link("ens20").unwrap(), rec.link("ens20").unwrap());
        assert_eq!(live.link("eth9").unwrap(), None);
        let cake = QdiscKind::Cake(Default::default());
        assert_eq!(
            live.probe_qdiscs(std::slice::from_ref(&cake)).unwrap(),
            rec.probe_qdiscs(&[cake]).unwrap()
        );
        assert_eq!(live.netns(), rec.netns());
    }

    #[test]
    fn a_failed_dump_during_planning_is_the_apply_error_and_names_the_interface() {
        let p1 = plan(100, 1);
        let rec = kernel_with(&p1);
        let reader = SlowReader::new(&rec, Some("ens20"));
        let (p, live) =
            Prefetched::overlap(&rec, &reader, &devs(), || Ok::<_, ApplyError>(p1.clone()))
                .unwrap();
        let e = apply_plan(&p, &live, &rec, ApplyOptions::default(), &NoProgress).unwrap_err();
        assert_eq!(e.dev(), Some("ens20"), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("ens20") && text.contains("reading the tc tree"),
            "{text}"
        );
        assert!(rec.sent().is_empty(), "nothing sent after a failed read");
    }

    #[test]
    fn a_failing_plan_joins_the_reader_and_sends_nothing() {
        let p1 = plan(100, 1);
        let rec = kernel_with(&p1);
        let before = (rec.tree("ens19"), rec.tree("ens20"));
        let reader = SlowReader::new(&rec, None);
        let e = Prefetched::overlap(&rec, &reader, &devs(), || {
            // Fails while the first dump is still under way.
            std::thread::sleep(Duration::from_millis(5));
            Err::<(), _>("ShapedDevices.csv line 3: bad rate")
        })
        .unwrap_err();
        assert_eq!(e, "ShapedDevices.csv line 3: bad rate");
        // Joined: no dump in flight once overlap returned, and the second
        // interface was not read at all after the failure.
        assert_eq!(reader.in_flight.load(Ordering::SeqCst), 0);
        assert!(reader.done.load(Ordering::SeqCst) <= 1);
        assert!(rec.sent().is_empty());
        assert_eq!((rec.tree("ens19"), rec.tree("ens20")), before);
    }

    #[test]
    fn a_panicking_plan_still_joins_the_reader() {
        let rec = Recording::new().with_link("ens19", 4).with_link("ens20", 4);
        let reader = SlowReader::new(&rec, None);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ =
                Prefetched::overlap(&rec, &reader, &devs(), || -> std::result::Result<(), ()> {
                    panic!("planner bug")
                });
        }));
        assert!(r.is_err());
        // Joined before the panic went on (the panic hook runs before the
        // unwinding stops the reader, so it may have read both trees).
        assert_eq!(reader.in_flight.load(Ordering::SeqCst), 0);
        assert!(rec.sent().is_empty());
    }
}
