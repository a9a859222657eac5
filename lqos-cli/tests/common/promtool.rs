//! `promtool check metrics` (Prometheus's own linter of the text format)
//! for the tests of `/metrics`: `promtool` on PATH or at `$LQOS_PROMTOOL`.
//! Without it a test skips that check with a message, unless
//! `LQOS_REQUIRE_PROMTOOL=1` (CI installs it: Debian's `prometheus`).

use std::io::Write;
use std::process::{Command, Stdio};

/// The promtool to run, if any.
fn promtool(what: &str) -> Option<String> {
    let bin = std::env::var("LQOS_PROMTOOL").unwrap_or_else(|_| "promtool".to_string());
    let found = Command::new(&bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(bin);
    }
    if std::env::var("LQOS_REQUIRE_PROMTOOL").as_deref() == Ok("1") {
        panic!("{what}: LQOS_REQUIRE_PROMTOOL=1 but there is no {bin}");
    }
    eprintln!(
        "skipping promtool check of {what}: no {bin} (apt-get install prometheus, or set LQOS_PROMTOOL)"
    );
    None
}

/// Asserts that `promtool check metrics` accepts `text`: the text format
/// 0.0.4 with no finding at all. promtool reads only that format, so
/// OpenMetrics (`openmetrics`) must parse, and its only findings may be
/// "no help text" for a counter's `_total` samples whose family has its
/// help under the name without `_total`, as OpenMetrics writes it.
/// Returns whether promtool ran.
pub fn assert_passes(text: &str, openmetrics: bool, what: &str) -> bool {
    let Some(bin) = promtool(what) else {
        return false;
    };
    let mut child = Command::new(bin)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !openmetrics {
        assert!(
            out.status.success() && said.trim().is_empty(),
            "promtool check metrics of {what} ({}):\n{said}",
            out.status
        );
        return true;
    }
    // Exit 3: lint findings only (1 would be a parse error).
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "promtool check metrics of {what} ({}):\n{said}",
        out.status
    );
    for line in said.lines().filter(|l| !l.trim().is_empty()) {
        let family = line
            .strip_suffix(" no help text")
            .and_then(|n| n.strip_suffix("_total"));
        let help_of_family = family.is_some_and(|f| {
            text.contains(&format!("\n# HELP {f} ")) || text.starts_with(&format!("# HELP {f} "))
        });
        assert!(
            help_of_family,
            "promtool check metrics of {what}: {line}\n{said}"
        );
    }
    true
}
