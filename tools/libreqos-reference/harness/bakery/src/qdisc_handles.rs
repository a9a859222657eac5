//! The one part of lqos_bakery's qdisc_handles.rs the command builder
//! needs, written from its rule: the leaf of queue `major`'s class `:1` is
//! `0x2000 + 2 major`, the default class `:2`'s the next one. (Circuit leaf
//! handles, which the bakery persists, are given by main.rs: 0x9000 up per
//! interface in command order, as on a fresh box.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InfraQdiscSlot {
    Primary,
    Default,
}

pub(crate) fn infra_qdisc_handle(queue_major: u16, slot: InfraQdiscSlot) -> u16 {
    let base = 0x2000u16.saturating_add(queue_major.saturating_mul(2));
    match slot {
        InfraQdiscSlot::Primary => base,
        InfraQdiscSlot::Default => base.saturating_add(1),
    }
}
