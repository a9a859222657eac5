//! The daemon's model of what the kernel holds.

use std::collections::BTreeMap;

use lqos_tc::tree::TcTree;

use crate::backend::IfaceOps;

/// What the kernel holds as far as the daemon knows: one [`TcTree`] per
/// interface, kept up to date op by op as loads succeed, or unknown (after
/// any failure, at start, or when an op sent does not apply to the model):
/// then the next load reads the kernel back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownKernel {
    trees: Option<BTreeMap<String, TcTree>>,
}

/// An op the kernel accepted does not apply to the model of interface
/// `dev`: the model was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfStep {
    /// The interface.
    pub dev: String,
}

impl KnownKernel {
    /// Nothing known: read the kernel back.
    pub fn unknown() -> KnownKernel {
        KnownKernel { trees: None }
    }

    /// The kernel holds exactly `trees` (what was just loaded after a
    /// read-back).
    pub fn known(trees: BTreeMap<String, TcTree>) -> KnownKernel {
        KnownKernel { trees: Some(trees) }
    }

    /// Whether the kernel's state is known.
    pub fn is_known(&self) -> bool {
        self.trees.is_some()
    }

    /// The trees, when known.
    pub fn trees(&self) -> Option<&BTreeMap<String, TcTree>> {
        self.trees.as_ref()
    }

    /// `dev`'s tree when the state is known (empty for an interface the
    /// daemon never loaded), `None` when unknown.
    pub fn tree(&self, dev: &str) -> Option<&TcTree> {
        static EMPTY: std::sync::OnceLock<TcTree> = std::sync::OnceLock::new();
        self.trees.as_ref().map(|t| {
            t.get(dev)
                .unwrap_or_else(|| EMPTY.get_or_init(TcTree::default))
        })
    }

    /// Forgets everything (a load failed: the kernel holds some prefix of
    /// what was sent).
    pub fn invalidate(&mut self) {
        self.trees = None;
    }

    /// Applies the ops of `streams` that the kernel accepted (all of them:
    /// call this only after a load without error). An op the model cannot
    /// apply makes the state unknown and is reported. Nothing happens when
    /// the state is unknown.
    pub fn apply_sent(&mut self, streams: &[IfaceOps<'_>]) -> Result<(), OutOfStep> {
        let Some(trees) = self.trees.as_mut() else {
            return Ok(());
        };
        for s in streams {
            let tree = trees.entry(s.dev.clone()).or_default();
            if s.sent().any(|op| tree.apply(&op).is_err()) {
                self.trees = None;
                return Err(OutOfStep { dev: s.dev.clone() });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lqos_tc::TcOp;

    #[test]
    fn ops_apply_to_the_model_and_a_stray_op_makes_it_unknown() {
        let (_, plan) = crate::test_fixtures::bridge_plan(10, 1, "pfifo");
        let ip = &plan.interfaces[0];
        let mut k = KnownKernel::known(BTreeMap::new());
        assert_eq!(k.tree("ens19"), Some(&TcTree::default()));
        k.apply_sent(&[IfaceOps::from_plan(ip)]).unwrap();
        assert_eq!(k.tree("ens19"), Some(&ip.tree()));
        // Deleting a class that is not there: the model was wrong.
        let stray = TcOp::DeleteClass {
            parent: lqos_tc::TcHandle::new(1, 0),
            classid: lqos_tc::TcHandle::new(0x77, 0x77),
        };
        let e = k
            .apply_sent(&[IfaceOps::new("ens19", vec![stray])])
            .unwrap_err();
        assert_eq!(e.dev, "ens19");
        assert!(!k.is_known());
        assert_eq!(k.tree("ens19"), None);
        // Unknown stays unknown.
        k.apply_sent(&[IfaceOps::from_plan(ip)]).unwrap();
        assert!(!k.is_known());
    }
}
