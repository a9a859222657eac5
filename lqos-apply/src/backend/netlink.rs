//! The rtnetlink backend (one socket per interface worker).

use serde::Serialize;

use super::{Backend, IfaceOps, IfaceReport, LoadReport, Parallelism, Progress, RootDelete};
use crate::error::ApplyError;
use crate::timing::Timing;

/// Netlink loader: serial, or one thread (and socket) per interface.
#[derive(Debug, Clone, Serialize)]
pub struct NetlinkBackend {
    /// Run inside this network namespace.
    pub netns: Option<String>,
    /// Serial or one worker per interface.
    pub parallelism: Parallelism,
}

impl NetlinkBackend {
    /// A loader for `netns` (None = current namespace).
    pub fn new(netns: Option<String>, parallelism: Parallelism) -> NetlinkBackend {
        NetlinkBackend { netns, parallelism }
    }
}

impl Backend for NetlinkBackend {
    fn describe(&self) -> String {
        match self.parallelism {
            Parallelism::Serial => "netlink serial".into(),
            Parallelism::Parallel => "netlink parallel".into(),
        }
    }

    fn load(&self, ifaces: &[IfaceOps], _root_delete: RootDelete, _p: &dyn Progress) -> LoadReport {
        LoadReport {
            backend: self.describe(),
            interfaces: ifaces
                .iter()
                .map(|i| IfaceReport {
                    dev: i.dev.clone(),
                    ops_total: i.ops.len(),
                    ops_applied: 0,
                    timing: None,
                    root_delete: None,
                    error: Some(ApplyError::Netlink {
                        dev: Some(i.dev.clone()),
                        context: "load".into(),
                        message: "netlink module not merged yet".into(),
                    }),
                })
                .collect(),
            total: Timing::default(),
        }
    }
}
