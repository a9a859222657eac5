//! An in-memory model of one interface's kernel tree, and what ops do to it.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::filter::{
    self, FilterKey, FilterProto, Filters, FlowerFilter, MatchSide, CLSACT_HANDLE,
};
use crate::handle::TcHandle;
use crate::op::TcOp;
use crate::ops::{Class, Qdisc, QdiscKind, HTB_MAX_DEPTH};
use ipnet::IpNet;

/// The qdiscs and classes of one interface, keyed by handle / classid.
///
/// Built by applying ops (the planner's view) or by reading the kernel back
/// (`lqos-apply`), so a plan and a live tree compare directly. Qdiscs the
/// kernel created itself have handle `0:` ([`TcHandle::UNSPEC`]) and are
/// kept apart, in [`TcTree::kernel_defaults`] by parent
/// ([`TcTree::insert_qdisc`] files a qdisc in the right map); the model
/// drops them when something replaces them, and [`crate::diff()`] and
/// [`crate::rules`] never compare them.
///
/// ```
/// use lqos_tc::{TcHandle, TcOp};
/// use lqos_tc::ops::{Qdisc, QdiscKind};
/// use lqos_tc::tree::TcTree;
/// let mut t = TcTree::default();
/// t.apply(&TcOp::ReplaceQdisc(Qdisc::root(TcHandle::new(0x7fff, 0), QdiscKind::Mq)))
///     .unwrap();
/// assert!(t.apply(&TcOp::DeleteClass {
///     parent: TcHandle::UNSPEC, classid: TcHandle::new(1, 3),
/// }).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TcTree {
    /// Qdiscs by handle.
    pub qdiscs: BTreeMap<TcHandle, Qdisc>,
    /// HTB classes by classid.
    pub classes: BTreeMap<TcHandle, Class>,
    /// lqos's egress flower filters (under the `clsact` qdisc `ffff:`).
    #[serde(default)]
    pub filters: Filters,
    /// Qdiscs the kernel created itself (handle `0:`: a veth's `noqueue`
    /// root, the default qdisc under each mq queue no plan replaced), by
    /// parent. Never part of a plan.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_defaults: BTreeMap<TcHandle, Qdisc>,
}

/// Why an op is invalid on a tree (what the kernel would refuse).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// The parent qdisc/class does not exist.
    #[error("`{op}`: parent {parent} does not exist")]
    ParentMissing {
        /// The op, rendered.
        op: String,
        /// The missing parent.
        parent: TcHandle,
    },
    /// A qdisc or class with this handle already exists (or the parent
    /// already has a qdisc and the op is not a replace).
    #[error("`{op}`: {handle} already exists")]
    Exists {
        /// The op, rendered.
        op: String,
        /// The existing handle.
        handle: TcHandle,
    },
    /// The qdisc or class to change/delete does not exist.
    #[error("`{op}`: {handle} does not exist")]
    NotFound {
        /// The op, rendered.
        op: String,
        /// The missing handle.
        handle: TcHandle,
    },
    /// A class with child classes cannot be deleted.
    #[error("`{op}`: class {classid} still has child classes")]
    HasChildren {
        /// The op, rendered.
        op: String,
        /// The class.
        classid: TcHandle,
    },
    /// Replace of an existing handle with another kind (kernel: EINVAL).
    #[error("`{op}`: {handle} is a {old} qdisc, cannot change it into {new} in place")]
    KindChange {
        /// The op, rendered.
        op: String,
        /// The handle.
        handle: TcHandle,
        /// Existing kind.
        old: String,
        /// Requested kind.
        new: String,
    },
    /// The qdisc does not support changing its options in place.
    #[error("`{op}`: {kind} qdisc {handle} cannot be changed in place")]
    NotChangeable {
        /// The op, rendered.
        op: String,
        /// The handle.
        handle: TcHandle,
        /// Its kind.
        kind: String,
    },
    /// Parent or handle does not fit the object (wrong parent on change or
    /// delete, class outside its HTB, qdisc handle with a minor...).
    #[error("`{op}`: {reason}")]
    Invalid {
        /// The op, rendered.
        op: String,
        /// What is wrong.
        reason: String,
    },
    /// HTB allows at most 8 levels of classes.
    #[error("`{op}`: class {classid} would be at depth {depth}, HTB allows {max}", max = HTB_MAX_DEPTH)]
    TooDeep {
        /// The op, rendered.
        op: String,
        /// The class.
        classid: TcHandle,
        /// Its depth.
        depth: usize,
    },
}

impl TcTree {
    /// Does it hold a `clsact` qdisc (the classifier's)?
    pub fn has_clsact(&self) -> bool {
        self.qdiscs
            .get(&CLSACT_HANDLE)
            .is_some_and(|q| q.kind == QdiscKind::Clsact)
    }

    /// Applies one op, enforcing the kernel's rules. On error the tree is
    /// unchanged. Costs O(tree size); use [`TcTree::apply_all`] for streams.
    pub fn apply(&mut self, op: &TcOp) -> Result<(), TreeError> {
        Model::new(self).apply(op)
    }

    /// Applies ops in order; on error returns the index of the failing op
    /// (the ops before it stay applied).
    pub fn apply_all(&mut self, ops: &[TcOp]) -> Result<(), (usize, TreeError)> {
        let mut m = Model::new(self);
        for (i, op) in ops.iter().enumerate() {
            m.apply(op).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// The tree that `ops` build from an empty interface.
    pub fn from_ops(ops: &[TcOp]) -> Result<TcTree, (usize, TreeError)> {
        let mut t = TcTree::default();
        t.apply_all(ops)?;
        Ok(t)
    }

    /// Files `q`: by handle in [`TcTree::qdiscs`], or, for a
    /// kernel-created qdisc with handle `0:`, by parent in
    /// [`TcTree::kernel_defaults`]. No kernel rules are checked (this is
    /// for readback); use [`TcTree::apply`] for ops.
    pub fn insert_qdisc(&mut self, q: Qdisc) {
        if q.is_kernel_default() {
            self.kernel_defaults.insert(q.parent, q);
        } else {
            self.qdiscs.insert(q.handle, q);
        }
    }

    /// The root qdisc (parent `root`, explicit handle), if any.
    pub fn root(&self) -> Option<&Qdisc> {
        self.qdiscs
            .values()
            .find(|q| q.parent == TcHandle::ROOT && q.handle != TcHandle::UNSPEC)
    }

    /// Qdiscs with explicit handles keyed by their parent.
    pub fn qdisc_by_parent(&self) -> HashMap<TcHandle, &Qdisc> {
        self.qdiscs
            .values()
            .filter(|q| q.handle != TcHandle::UNSPEC)
            .map(|q| (q.parent, q))
            .collect()
    }

    /// Child classes of every class or HTB qdisc, in classid order.
    pub fn class_children(&self) -> HashMap<TcHandle, Vec<TcHandle>> {
        let mut m: HashMap<TcHandle, Vec<TcHandle>> = HashMap::new();
        for c in self.classes.values() {
            m.entry(c.parent).or_default().push(c.classid);
        }
        m
    }

    /// Number of classes under HTB qdisc `major:`.
    pub fn class_count_in(&self, major: u16) -> usize {
        self.classes
            .range(TcHandle::new(major, 0)..=TcHandle::new(major, 0xffff))
            .count()
    }
}

/// A tree plus the indexes the kernel rules need.
struct Model<'a> {
    t: &'a mut TcTree,
    /// parent -> handle of the (explicit-handle) qdisc attached there.
    at_parent: HashMap<TcHandle, TcHandle>,
    /// class or HTB qdisc -> number of child classes.
    children: HashMap<TcHandle, u32>,
    /// Filter preference -> its protocol (the kernel keeps one per pref).
    pref_proto: HashMap<u16, FilterProto>,
    /// (pref, side, prefix) -> handle: flower refuses a second filter with
    /// the same key and mask in one preference.
    flower_keys: HashMap<(u16, MatchSide, IpNet), u32>,
}

impl<'a> Model<'a> {
    fn new(t: &'a mut TcTree) -> Model<'a> {
        let mut at_parent = HashMap::with_capacity(t.qdiscs.len());
        for q in t.qdiscs.values() {
            if q.handle != TcHandle::UNSPEC {
                at_parent.insert(q.parent, q.handle);
            }
        }
        let mut children: HashMap<TcHandle, u32> = HashMap::with_capacity(t.classes.len());
        for c in t.classes.values() {
            *children.entry(c.parent).or_default() += 1;
        }
        let mut pref_proto = HashMap::new();
        let mut flower_keys = HashMap::with_capacity(t.filters.len());
        for f in t.filters.values() {
            pref_proto.insert(f.key.pref, f.key.protocol);
            flower_keys.insert((f.key.pref, f.side, f.net), f.key.handle);
        }
        Model {
            t,
            at_parent,
            children,
            pref_proto,
            flower_keys,
        }
    }

    fn apply(&mut self, op: &TcOp) -> Result<(), TreeError> {
        match op {
            TcOp::AddQdisc(q) => self.put_qdisc(op, q, false),
            TcOp::ReplaceQdisc(q) => self.put_qdisc(op, q, true),
            TcOp::DeleteRoot => self.del_root(op),
            TcOp::DeleteQdisc { parent, handle } => self.del_qdisc(op, *parent, *handle),
            TcOp::AddClass(c) => self.add_class(op, c),
            TcOp::ChangeClass(c) => self.change_class(op, c),
            TcOp::DeleteClass { parent, classid } => self.del_class(op, *parent, *classid),
            TcOp::ReplaceFilter(f) => self.put_filter(op, f),
            TcOp::DeleteFilter(k) => self.del_filter(op, *k),
        }
    }

    /// `clsact` lives in the device's ingress slot: add fails if it exists,
    /// replace of an existing one changes nothing.
    fn put_clsact(&mut self, op: &TcOp, q: &Qdisc, replace: bool) -> Result<(), TreeError> {
        if q.handle != filter::CLSACT_HANDLE && q.handle != TcHandle::UNSPEC
            || q.parent != filter::CLSACT_PARENT
        {
            return Err(invalid(op, "clsact has parent ffff:fff1 and handle ffff:"));
        }
        if self.t.qdiscs.contains_key(&filter::CLSACT_HANDLE) {
            if !replace {
                return Err(TreeError::Exists {
                    op: text(op),
                    handle: filter::CLSACT_HANDLE,
                });
            }
            return Ok(());
        }
        self.at_parent
            .insert(filter::CLSACT_PARENT, filter::CLSACT_HANDLE);
        self.t.qdiscs.insert(filter::CLSACT_HANDLE, Qdisc::clsact());
        Ok(())
    }

    fn put_filter(&mut self, op: &TcOp, f: &FlowerFilter) -> Result<(), TreeError> {
        if !self.t.has_clsact() {
            return Err(TreeError::ParentMissing {
                op: text(op),
                parent: filter::EGRESS,
            });
        }
        let k = f.key;
        if k.handle == 0 {
            return Err(invalid(op, "a filter handle is never 0"));
        }
        if FilterProto::of(&f.net) != k.protocol {
            return Err(invalid(
                op,
                "the address family does not match the protocol",
            ));
        }
        if let Some(p) = self.pref_proto.get(&k.pref) {
            if *p != k.protocol {
                return Err(invalid(
                    op,
                    &format!("pref {} is in use by protocol {}", k.pref, p.name()),
                ));
            }
        }
        let fk = (k.pref, f.side, f.net.trunc());
        if let Some(&h) = self.flower_keys.get(&fk) {
            if h != k.handle {
                return Err(invalid(
                    op,
                    &format!("filter {h} in pref {} already matches {}", k.pref, f.net),
                ));
            }
        }
        if let Some(old) = self.t.filters.get(&k) {
            self.flower_keys.remove(&(k.pref, old.side, old.net));
        }
        self.pref_proto.insert(k.pref, k.protocol);
        self.flower_keys.insert(fk, k.handle);
        self.t.filters.insert(k, f.clone());
        Ok(())
    }

    fn del_filter(&mut self, op: &TcOp, k: FilterKey) -> Result<(), TreeError> {
        let Some(old) = self.t.filters.remove(&k) else {
            return Err(invalid(op, &format!("no {k}")));
        };
        self.flower_keys.remove(&(k.pref, old.side, old.net));
        if !self.t.filters.keys().any(|x| x.pref == k.pref) {
            self.pref_proto.remove(&k.pref);
        }
        Ok(())
    }

    fn auto_handle(&self, op: &TcOp) -> Result<TcHandle, TreeError> {
        (0x8000u16..0xffff)
            .map(|m| TcHandle::new(m, 0))
            .find(|h| !self.t.qdiscs.contains_key(h))
            .ok_or_else(|| invalid(op, "no free qdisc handle"))
    }

    fn put_qdisc(&mut self, op: &TcOp, q: &Qdisc, replace: bool) -> Result<(), TreeError> {
        if q.kind == QdiscKind::Clsact || q.parent == filter::CLSACT_PARENT {
            return self.put_clsact(op, q, replace);
        }
        let mut q = q.clone();
        if q.handle == TcHandle::UNSPEC {
            if let Some(&h) = self.at_parent.get(&q.parent) {
                if replace {
                    q.handle = h;
                } else {
                    return Err(TreeError::Exists {
                        op: text(op),
                        handle: h,
                    });
                }
            } else {
                q.handle = self.auto_handle(op)?;
            }
        }
        if q.handle.minor() != 0 || q.handle == TcHandle::ROOT {
            return Err(invalid(op, "a qdisc handle has no minor (major:)"));
        }
        // The parent must exist and be able to hold a qdisc.
        if q.parent != TcHandle::ROOT {
            match self.t.qdiscs.get(&q.parent.qdisc()).map(|p| &p.kind) {
                Some(QdiscKind::Mq) if q.parent.minor() != 0 => {}
                Some(QdiscKind::Htb(_)) if self.t.classes.contains_key(&q.parent) => {
                    if self.children.get(&q.parent).copied().unwrap_or(0) > 0 {
                        return Err(invalid(
                            op,
                            &format!(
                                "class {} has child classes, it cannot hold a qdisc",
                                q.parent
                            ),
                        ));
                    }
                }
                _ => {
                    return Err(TreeError::ParentMissing {
                        op: text(op),
                        parent: q.parent,
                    })
                }
            }
        }
        if let Some(existing) = self.t.qdiscs.get(&q.handle) {
            if existing.parent != q.parent {
                return Err(TreeError::Exists {
                    op: text(op),
                    handle: q.handle,
                });
            }
            if !replace {
                return Err(TreeError::Exists {
                    op: text(op),
                    handle: q.handle,
                });
            }
            if existing.kind.name() != q.kind.name() {
                return Err(TreeError::KindChange {
                    op: text(op),
                    handle: q.handle,
                    old: existing.kind.name().to_string(),
                    new: q.kind.name().to_string(),
                });
            }
            if let QdiscKind::Htb(_) = q.kind {
                // sch_htb has no change operation.
                return Err(TreeError::NotChangeable {
                    op: text(op),
                    handle: q.handle,
                    kind: "htb".into(),
                });
            }
            self.t.qdiscs.insert(q.handle, q);
            return Ok(());
        }
        self.drop_default_at(q.parent);
        if let Some(&old) = self.at_parent.get(&q.parent) {
            if !replace {
                return Err(TreeError::Exists {
                    op: text(op),
                    handle: old,
                });
            }
            self.remove_qdisc_subtree(old);
        }
        self.at_parent.insert(q.parent, q.handle);
        self.t.qdiscs.insert(q.handle, q);
        Ok(())
    }

    /// `qdisc del root`: the kernel refuses (`ENOENT`) when the root is its
    /// own handle-0 default; otherwise everything goes, kernel defaults
    /// below included.
    fn del_root(&mut self, op: &TcOp) -> Result<(), TreeError> {
        if !self.at_parent.contains_key(&TcHandle::ROOT) {
            return Err(TreeError::NotFound {
                op: text(op),
                handle: TcHandle::ROOT,
            });
        }
        // The root delete leaves the ingress slot (clsact, and so its
        // filters) alone.
        let clsact = self.t.qdiscs.remove(&filter::CLSACT_HANDLE);
        self.t.qdiscs.clear();
        self.t.classes.clear();
        self.t.kernel_defaults.clear();
        self.at_parent.clear();
        self.children.clear();
        if let Some(c) = clsact {
            self.at_parent.insert(c.parent, c.handle);
            self.t.qdiscs.insert(c.handle, c);
        }
        Ok(())
    }

    fn del_qdisc(
        &mut self,
        op: &TcOp,
        parent: TcHandle,
        handle: TcHandle,
    ) -> Result<(), TreeError> {
        let target = if handle != TcHandle::UNSPEC {
            let q = self
                .t
                .qdiscs
                .get(&handle)
                .ok_or_else(|| TreeError::NotFound {
                    op: text(op),
                    handle,
                })?;
            if parent != TcHandle::UNSPEC && q.parent != parent {
                return Err(invalid(
                    op,
                    &format!("qdisc {handle} hangs under {}, not {parent}", q.parent),
                ));
            }
            handle
        } else {
            *self
                .at_parent
                .get(&parent)
                .ok_or_else(|| TreeError::NotFound {
                    op: text(op),
                    handle: parent,
                })?
        };
        self.remove_qdisc_subtree(target);
        Ok(())
    }

    /// Forgets the kernel-created (handle 0) qdisc under `parent`.
    fn drop_default_at(&mut self, parent: TcHandle) {
        self.t.kernel_defaults.remove(&parent);
    }

    fn remove_qdisc_subtree(&mut self, handle: TcHandle) {
        let Some(q) = self.t.qdiscs.remove(&handle) else {
            return;
        };
        if self.at_parent.get(&q.parent) == Some(&handle) {
            self.at_parent.remove(&q.parent);
        }
        let major = handle.major();
        match q.kind {
            QdiscKind::Mq => {
                let under: Vec<TcHandle> = self
                    .at_parent
                    .iter()
                    .filter(|(p, _)| **p != TcHandle::ROOT && p.major() == major)
                    .map(|(_, h)| *h)
                    .collect();
                for h in under {
                    self.remove_qdisc_subtree(h);
                }
                // The kernel's defaults under the mq classes go with it.
                self.t
                    .kernel_defaults
                    .retain(|p, _| *p == TcHandle::ROOT || p.major() != major);
            }
            QdiscKind::Htb(_) => {
                let ids: Vec<TcHandle> = self
                    .t
                    .classes
                    .range(TcHandle::new(major, 0)..=TcHandle::new(major, 0xffff))
                    .map(|(k, _)| *k)
                    .collect();
                for id in ids {
                    if let Some(&leaf) = self.at_parent.get(&id) {
                        self.remove_qdisc_subtree(leaf);
                    }
                    self.drop_default_at(id);
                    self.t.classes.remove(&id);
                    self.children.remove(&id);
                }
                self.children.remove(&handle);
            }
            QdiscKind::Clsact => {
                self.t.filters.clear();
                self.pref_proto.clear();
                self.flower_keys.clear();
            }
            _ => {}
        }
    }

    fn add_class(&mut self, op: &TcOp, c: &Class) -> Result<(), TreeError> {
        let qd = c.classid.qdisc();
        if c.classid.minor() == 0 || c.classid.major() == 0 || c.classid == TcHandle::ROOT {
            return Err(invalid(op, "a classid needs a major and a non-zero minor"));
        }
        if self.t.classes.contains_key(&c.classid) {
            return Err(TreeError::Exists {
                op: text(op),
                handle: c.classid,
            });
        }
        match self.t.qdiscs.get(&qd).map(|q| &q.kind) {
            Some(QdiscKind::Htb(_)) => {}
            _ => {
                return Err(TreeError::ParentMissing {
                    op: text(op),
                    parent: qd,
                })
            }
        }
        let depth = if c.parent == qd {
            1
        } else if c.parent.qdisc() == qd && self.t.classes.contains_key(&c.parent) {
            1 + self.depth_of(c.parent)
        } else {
            return Err(TreeError::ParentMissing {
                op: text(op),
                parent: c.parent,
            });
        };
        if depth > HTB_MAX_DEPTH {
            return Err(TreeError::TooDeep {
                op: text(op),
                classid: c.classid,
                depth,
            });
        }
        if c.parent != qd && self.children.get(&c.parent).copied().unwrap_or(0) == 0 {
            // The parent turns from a leaf into an inner class: the kernel
            // destroys its leaf qdisc.
            if let Some(&leaf) = self.at_parent.get(&c.parent) {
                self.remove_qdisc_subtree(leaf);
            }
        }
        *self.children.entry(c.parent).or_default() += 1;
        self.t.classes.insert(c.classid, c.clone());
        Ok(())
    }

    fn depth_of(&self, mut id: TcHandle) -> usize {
        let mut d = 1;
        while let Some(c) = self.t.classes.get(&id) {
            if c.parent == c.classid.qdisc() || d > HTB_MAX_DEPTH + 1 {
                break;
            }
            d += 1;
            id = c.parent;
        }
        d
    }

    fn change_class(&mut self, op: &TcOp, c: &Class) -> Result<(), TreeError> {
        let existing = self
            .t
            .classes
            .get_mut(&c.classid)
            .ok_or_else(|| TreeError::NotFound {
                op: text(op),
                handle: c.classid,
            })?;
        if c.parent != TcHandle::UNSPEC && existing.parent != c.parent {
            return Err(invalid(
                op,
                &format!(
                    "class {} hangs under {}; a change cannot move it to {}",
                    c.classid, existing.parent, c.parent
                ),
            ));
        }
        existing.htb = c.htb.clone();
        Ok(())
    }

    fn del_class(
        &mut self,
        op: &TcOp,
        parent: TcHandle,
        classid: TcHandle,
    ) -> Result<(), TreeError> {
        let existing = self
            .t
            .classes
            .get(&classid)
            .ok_or_else(|| TreeError::NotFound {
                op: text(op),
                handle: classid,
            })?;
        if parent != TcHandle::UNSPEC && existing.parent != parent {
            return Err(invalid(
                op,
                &format!(
                    "class {classid} hangs under {}, not {parent}",
                    existing.parent
                ),
            ));
        }
        if self.children.get(&classid).copied().unwrap_or(0) > 0 {
            return Err(TreeError::HasChildren {
                op: text(op),
                classid,
            });
        }
        let p = existing.parent;
        if let Some(&leaf) = self.at_parent.get(&classid) {
            self.remove_qdisc_subtree(leaf);
        }
        self.drop_default_at(classid);
        self.t.classes.remove(&classid);
        self.children.remove(&classid);
        if let Some(n) = self.children.get_mut(&p) {
            *n -= 1;
            if *n == 0 {
                self.children.remove(&p);
            }
        }
        Ok(())
    }
}

fn text(op: &TcOp) -> String {
    crate::text::render_line("DEV", op)
}

fn invalid(op: &TcOp, reason: &str) -> TreeError {
    TreeError::Invalid {
        op: text(op),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_at(parent: TcHandle, kind: &str) -> Qdisc {
        Qdisc::new(parent, TcHandle::UNSPEC, QdiscKind::Other(kind.into()))
    }

    #[test]
    fn kernel_defaults_are_kept_apart_and_go_when_replaced() {
        let mut t = TcTree::default();
        t.insert_qdisc(default_at(TcHandle::ROOT, "noqueue"));
        assert!(t.qdiscs.is_empty() && t.root().is_none());
        // Our root replaces the kernel's.
        let mq = Qdisc::root(TcHandle::new(0x7fff, 0), QdiscKind::Mq);
        t.apply(&TcOp::ReplaceQdisc(mq)).unwrap();
        assert!(!t.kernel_defaults.contains_key(&TcHandle::ROOT));
        // The kernel hangs a default under each mq queue (readback).
        for q in 1..=2 {
            t.insert_qdisc(default_at(TcHandle::new(0x7fff, q), "pfifo_fast"));
        }
        t.apply(&TcOp::AddQdisc(Qdisc::htb(TcHandle::new(0x7fff, 1), 1, 2)))
            .unwrap();
        let left: Vec<TcHandle> = t.kernel_defaults.keys().copied().collect();
        assert_eq!(left, [TcHandle::new(0x7fff, 2)]);
        // Deleting the root takes the rest.
        t.apply(&TcOp::DeleteRoot).unwrap();
        assert_eq!(t, TcTree::default());
    }
}
