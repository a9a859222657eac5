//! What a command needs of the process, checked before anything else: an
//! unprivileged run is told first that changing qdiscs needs root or
//! `CAP_NET_ADMIN` (and entering a network namespace root or
//! `CAP_SYS_ADMIN`), not what fails later for lack of them (the state
//! directory's owner, `ip netns add`, the kernel's EPERM).

/// `CAP_NET_ADMIN`'s bit: changing qdiscs, classes and filters.
const CAP_NET_ADMIN: u32 = 12;
/// `CAP_SYS_ADMIN`'s bit: entering (and creating) network namespaces.
const CAP_SYS_ADMIN: u32 = 21;

/// The effective capability set of this process (`CapEff` of
/// `/proc/self/status`); `None` when it cannot be read.
fn effective() -> Option<u64> {
    parse_cap_eff(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// `CapEff` of a `/proc/PID/status` text.
fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// What `what` (`lqos apply`, ...) needs that capabilities `eff` lack:
/// `CAP_NET_ADMIN` when it changes qdiscs, `CAP_SYS_ADMIN` when it enters
/// or creates a network namespace.
fn missing(what: &str, eff: u64, changes: bool, netns: bool) -> Option<String> {
    let has = |bit: u32| eff & (1 << bit) != 0;
    let mut needs = Vec::new();
    if changes && !has(CAP_NET_ADMIN) {
        needs.push("changes the kernel's qdiscs, which needs root or CAP_NET_ADMIN");
    }
    if netns && !has(CAP_SYS_ADMIN) {
        needs.push("enters a network namespace, which needs root or CAP_SYS_ADMIN");
    }
    (!needs.is_empty()).then(|| {
        format!(
            "{what} {}; this process runs without: run it as root (e.g. with sudo)",
            needs.join(", and ")
        )
    })
}

/// Fails, before anything else is tried, when this process lacks what
/// `what` needs: `changes` (it changes qdiscs), `netns` (it enters or
/// creates a network namespace). An unreadable capability set passes (the
/// kernel has the last word).
pub fn require(what: &str, changes: bool, netns: bool) -> anyhow::Result<()> {
    match effective().and_then(|eff| missing(what, eff, changes, netns)) {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_come_from_cap_eff_and_name_what_is_missing() {
        let status = "Name:\tlqos\nCapInh:\t0000000000000000\nCapEff:\t0000000000001000\n";
        let eff = parse_cap_eff(status).unwrap();
        assert_eq!(eff, 1 << CAP_NET_ADMIN);
        assert_eq!(missing("lqos apply", eff, true, false), None);
        let why = missing("`lqos apply`", eff, true, true).unwrap();
        assert_eq!(
            why,
            "`lqos apply` enters a network namespace, which needs root or CAP_SYS_ADMIN; this \
             process runs without: run it as root (e.g. with sudo)"
        );
        let why = missing("`lqos watch`", 0, true, false).unwrap();
        assert!(
            why.starts_with(
                "`lqos watch` changes the kernel's qdiscs, which needs root or CAP_NET_ADMIN;"
            ),
            "{why}"
        );
        assert_eq!(missing("lqos verify", 0, false, false), None);
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
    }
}
