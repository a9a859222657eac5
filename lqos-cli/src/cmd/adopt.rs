//! `--adopt-libreqos DIR` (`lqos plan`, `lqos apply`): plan from the
//! allocation a LibreQoS box recorded, so the first plan is the tree
//! LibreQoS built, with its classids.

use std::path::Path;

use anyhow::Context;
use lqos_apply::adopt::LibreQosDir;
use lqos_apply::live::LiveSource;
use lqos_tc::{Allocation, Plan, TcHandle};

use super::inputs::InputArgs;
use super::inputs::PlanOptions;

/// LibreQoS's state, read, and the allocation to plan from.
pub struct Adoption {
    /// The state directory, read.
    pub dir: LibreQosDir,
    /// LibreQoS's classids (and, when read from the kernel, leaf handles).
    pub seed: Allocation,
}

/// Reads LibreQoS's state directory `dir` and seeds the allocation; with
/// `live`, the leaf handles come from the kernel's trees of the interfaces
/// lqos.conf names. Without `--queues`, the plan gets LibreQoS's queue
/// count.
pub fn adopt(
    dir: &Path,
    inputs: &InputArgs,
    options: &mut PlanOptions,
    live: Option<&dyn LiveSource>,
) -> anyhow::Result<Adoption> {
    let lq = LibreQosDir::read(dir)?;
    let devs = inputs.inputs_quiet().interface_hint();
    let (down, up) = match devs.as_slice() {
        [d, u] => (d.as_str(), u.as_str()),
        [d] => (d.as_str(), d.as_str()),
        _ => anyhow::bail!(
            "--adopt-libreqos: lqos.conf names no interfaces ([bridge] or [single_interface])"
        ),
    };
    let seed = lq.seed(live, down, up).with_context(|| {
        format!("--adopt-libreqos: cannot read the live trees of {down} and {up}")
    })?;
    if options.queues.is_none() {
        options.queues = Some(lq.tx_queues());
    }
    crate::out::note!(
        "lqos: adopting LibreQoS's allocation from {}: {} nodes, {} circuits, {} queues per direction{}",
        dir.display(),
        lq.state.nodes.len(),
        lq.state.circuits.len(),
        lq.state.queues,
        if live.is_some() {
            format!(
                ", {} leaf handles read from the kernel",
                seed.circuits
                    .iter()
                    .map(|c| usize::from(c.leaf_download.is_some()) + usize::from(c.leaf_upload.is_some()))
                    .sum::<usize>()
            )
        } else {
            String::new()
        }
    );
    Ok(Adoption { dir: lq, seed })
}

impl Adoption {
    /// Checks that `plan` kept LibreQoS's queue layout and says how many of
    /// its circuits and nodes kept LibreQoS's classids.
    pub fn report(&self, plan: &Plan) -> anyhow::Result<()> {
        if plan.allocation.queues != self.seed.queues {
            anyhow::bail!(
                "--adopt-libreqos: LibreQoS built {} queues per direction but this plan has {}; give --queues {} (or fix override_available_queues)",
                self.seed.queues,
                plan.allocation.queues,
                self.dir.tx_queues()
            );
        }
        let theirs: std::collections::HashMap<&str, (u32, u16)> = self
            .seed
            .circuits
            .iter()
            .map(|c| (c.id.as_str(), (c.queue, c.minor)))
            .collect();
        let kept = plan
            .allocation
            .circuits
            .iter()
            .filter(|c| theirs.get(c.id.as_str()) == Some(&(c.queue, c.minor)))
            .count();
        let nodes: std::collections::HashMap<&str, TcHandle> = self
            .seed
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), TcHandle::new(n.queue as u16 + 1, n.minor)))
            .collect();
        let kept_nodes = plan
            .allocation
            .nodes
            .iter()
            .filter(|n| {
                nodes.get(n.name.as_str()) == Some(&TcHandle::new(n.queue as u16 + 1, n.minor))
            })
            .count();
        crate::out::note!(
            "lqos: kept LibreQoS's classids for {kept} of {} circuits and {kept_nodes} of {} nodes",
            plan.allocation.circuits.len(),
            plan.allocation.nodes.len()
        );
        Ok(())
    }
}
