//! Problems found in the inputs, collected into one [`Report`].

use std::fmt;

/// How bad a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// lqos will load the input anyway (LibreQoS does the same), but the
    /// operator should look at it.
    Warning,
    /// The input cannot be shaped as written.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// The key of LibreQoS's `lqos.conf` a [`Problem`] is about, for the
/// warnings about keys that change what LibreQoS shapes and that lqos
/// honours differently or not at all: a front end can add its own advice
/// (the option of its own that does what the key did).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigKey {
    /// `[queues] queue_mode = "observe"` (or `monitor_only`).
    QueueMode,
    /// `[queues] use_binpacking`.
    UseBinpacking,
    /// `[queues] lazy_queues`.
    LazyQueues,
    /// `[queues] dry_run`.
    DryRun,
    /// `[treeguard]`.
    TreeGuard,
    /// `[stormguard]`.
    StormGuard,
    /// `[dynamic_circuits]`.
    DynamicCircuits,
    /// `[long_term_stats] enable_insight_topology`.
    InsightTopology,
    /// An integration's `enable_*` switch.
    Integration,
    /// `exclude_efficiency_cores`.
    ExcludeEfficiencyCores,
}

/// One problem in an input file.
///
/// Displays as `file:line: circuit "id": message` (the parts that are known),
/// e.g. `ShapedDevices.csv:12: circuit "10001": download min 0 is zero`.
/// Names taken from the input are always shown quoted and escaped (`{:?}`),
/// so a hostile name cannot forge or hide a message line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// Error or warning.
    pub severity: Severity,
    /// File label (as given to the parser).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The circuit involved, verbatim.
    pub circuit: Option<String>,
    /// The node involved, verbatim.
    pub node: Option<String>,
    /// What is wrong (input text inside is quoted with `{:?}`).
    pub message: String,
    /// The LibreQoS `lqos.conf` key it is about, when it is one lqos
    /// honours differently.
    pub key: Option<ConfigKey>,
}

impl Problem {
    /// An error about `file`.
    pub fn error(file: &str, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Error,
            file: file.to_string(),
            line: None,
            circuit: None,
            node: None,
            message: message.into(),
            key: None,
        }
    }

    /// A warning about `file`.
    pub fn warning(file: &str, message: impl Into<String>) -> Problem {
        Problem {
            severity: Severity::Warning,
            ..Problem::error(file, message)
        }
    }

    /// Sets the line.
    pub fn at(mut self, line: usize) -> Problem {
        self.line = Some(line);
        self
    }

    /// Sets the line if known.
    pub fn at_opt(mut self, line: Option<usize>) -> Problem {
        self.line = line;
        self
    }

    /// Names the circuit.
    pub fn circuit(mut self, id: &str) -> Problem {
        self.circuit = Some(id.to_string());
        self
    }

    /// Names the node.
    pub fn node(mut self, name: &str) -> Problem {
        self.node = Some(name.to_string());
        self
    }

    /// Names the LibreQoS `lqos.conf` key it is about.
    pub fn about(mut self, key: ConfigKey) -> Problem {
        self.key = Some(key);
        self
    }

    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if let Some(c) = &self.circuit {
            write!(f, "circuit {c:?}: ")?;
        }
        if let Some(n) = &self.node {
            write!(f, "node {n:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in a set of inputs, in the order found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The problems.
    pub problems: Vec<Problem>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Report {
        Report::default()
    }

    /// Adds a problem.
    pub fn push(&mut self, problem: Problem) {
        self.problems.push(problem);
    }

    /// Appends all problems of `other`.
    pub fn extend(&mut self, other: Report) {
        self.problems.extend(other.problems);
    }

    /// True if any problem is an error.
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }

    /// True if there are no problems at all.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.is_error())
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| !p.is_error())
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.errors().count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.warnings().count()
    }
}

impl fmt::Display for Report {
    /// One problem per line, each prefixed with `error: ` or `warning: `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.problems {
            writeln!(f, "{}: {p}", p.severity)?;
        }
        Ok(())
    }
}
