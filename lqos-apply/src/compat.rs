//! TEMPORARY stand-ins for lqos-tc functions that are not merged yet
//! (`render::render_line`, `TcTree::apply`, `diff`). Replaced by the real
//! ones at merge time.

use lqos_tc::{Class, Qdisc, QdiscKind, TcHandle, TcOp, TcTree};

fn class_text(c: &Class) -> String {
    format!(
        "parent {} classid {} htb rate {}bit ceil {}bit quantum {} prio {}",
        c.parent,
        c.classid,
        c.htb.rate.bps(),
        c.htb.ceil.bps(),
        c.htb.quantum,
        c.htb.prio
    )
}

fn qdisc_text(q: &Qdisc) -> String {
    let parent = if q.parent == TcHandle::ROOT {
        "root".to_string()
    } else {
        format!("parent {}", q.parent)
    };
    let kind = match &q.kind {
        QdiscKind::Htb(h) => format!("htb default {:x}", h.default_minor),
        QdiscKind::Pfifo { limit: Some(l) } => format!("pfifo limit {l}"),
        QdiscKind::Bfifo { limit: Some(l) } => format!("bfifo limit {l}"),
        k => k.name().to_string(),
    };
    format!("{parent} handle {} {kind}", q.handle)
}

/// One `tc -b` line for `op` on `dev`.
pub fn render_line(dev: &str, op: &TcOp) -> String {
    match op {
        TcOp::AddQdisc(q) => format!("qdisc add dev {dev} {}", qdisc_text(q)),
        TcOp::ReplaceQdisc(q) => format!("qdisc replace dev {dev} {}", qdisc_text(q)),
        TcOp::DeleteQdisc { parent, handle } if *parent == TcHandle::ROOT => {
            if *handle == TcHandle::UNSPEC {
                format!("qdisc del dev {dev} root")
            } else {
                format!("qdisc del dev {dev} root handle {handle}")
            }
        }
        TcOp::DeleteQdisc { parent, handle } => {
            format!("qdisc del dev {dev} parent {parent} handle {handle}")
        }
        TcOp::AddClass(c) => format!("class add dev {dev} {}", class_text(c)),
        TcOp::ChangeClass(c) => format!("class change dev {dev} {}", class_text(c)),
        TcOp::DeleteClass { classid, .. } => format!("class del dev {dev} classid {classid}"),
    }
}

/// Applies `op` to `tree` as the kernel would (roughly).
pub fn tree_apply(tree: &mut TcTree, op: &TcOp) {
    match op {
        TcOp::AddQdisc(q) | TcOp::ReplaceQdisc(q) => {
            tree.qdiscs.insert(q.handle, q.clone());
        }
        TcOp::DeleteQdisc { parent, handle } => {
            if *parent == TcHandle::ROOT {
                tree.qdiscs.clear();
                tree.classes.clear();
            } else {
                tree.qdiscs.remove(handle);
                let maj = handle.major();
                tree.classes.retain(|k, _| k.major() != maj);
            }
        }
        TcOp::AddClass(c) | TcOp::ChangeClass(c) => {
            tree.classes.insert(c.classid, c.clone());
        }
        TcOp::DeleteClass { classid, .. } => {
            tree.classes.remove(classid);
            tree.qdiscs.retain(|_, q| q.parent != *classid);
        }
    }
}

/// Minimal ordered diff (old -> new).
pub fn diff(old: &TcTree, new: &TcTree) -> Vec<TcOp> {
    let mut ops = Vec::new();
    for (h, q) in &old.qdiscs {
        if !new.qdiscs.contains_key(h) && q.parent != TcHandle::ROOT {
            ops.push(TcOp::DeleteQdisc {
                parent: q.parent,
                handle: *h,
            });
        }
    }
    for id in old.classes.keys().rev() {
        if !new.classes.contains_key(id) {
            ops.push(TcOp::DeleteClass {
                parent: old.classes[id].parent,
                classid: *id,
            });
        }
    }
    for (h, q) in &new.qdiscs {
        if matches!(q.kind, QdiscKind::Mq | QdiscKind::Htb(_)) && old.qdiscs.get(h) != Some(q) {
            ops.push(TcOp::ReplaceQdisc(q.clone()));
        }
    }
    for (id, c) in &new.classes {
        match old.classes.get(id) {
            None => ops.push(TcOp::AddClass(c.clone())),
            Some(o) if o != c => ops.push(TcOp::ChangeClass(c.clone())),
            _ => {}
        }
    }
    for (h, q) in &new.qdiscs {
        if !matches!(q.kind, QdiscKind::Mq | QdiscKind::Htb(_)) && old.qdiscs.get(h) != Some(q) {
            ops.push(TcOp::ReplaceQdisc(q.clone()));
        }
    }
    ops
}
