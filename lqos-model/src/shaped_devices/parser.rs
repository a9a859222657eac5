//! The row validator: each row's columns checked in turn (rates, addresses,
//! MAC, sqm, text), then its circuit found or made, its Device ID checked
//! against the file's, and a later row of a circuit compared with its
//! first.

use hashbrown::{DefaultHashBuilder, HashTable};
use ipnet::{Ipv4Net, Ipv6Net};
use smol_str::SmolStr;
use std::hash::BuildHasher;

use super::cells::{has_control, is_mac, parse_ip_list, parse_sqm, rate_error_message, trim};
use super::records::StrFields;
use super::schema::{Col, Row, ALL_COLS, LEGACY_COLS};
use super::{ShapedDevices, KNOWN_SQM};
use crate::error::ModelError;
use crate::rate::Rate;
use crate::report::{Problem, Report};
use crate::types::{Circuit, Device, SqmOverride};

pub(crate) struct Parser<'f> {
    pub(super) file: &'f str,
    pub(super) report: Report,
    pub(super) circuits: Vec<Circuit>,
    pub(super) parent_node_ids: Vec<Option<String>>,
    /// One hasher for the three tables (each table must hash its keys the
    /// same way every time).
    hasher: DefaultHashBuilder,
    /// Index into `circuits` of each circuit ID (keyed by the circuit's own
    /// `id`: no second copy of the string).
    circuit_index: HashTable<usize>,
    /// `(circuit, device)` indices of the first device with each non-empty
    /// Device ID (keyed by that device's `id`).
    device_ids: HashTable<(usize, usize)>,
    /// Every Parent Node name seen, once: the circuits of one parent share
    /// its text (a few hundred parents for 10^5 circuits).
    parents: HashTable<SmolStr>,
    legacy_rows: usize,
    legacy_first_line: usize,
    pub(super) header_len: usize,
}

/// Where a row's problems point: file, line and circuit.
#[derive(Clone, Copy)]
struct At<'a> {
    file: &'a str,
    line: usize,
    circuit: &'a str,
}

impl At<'_> {
    fn error(&self, msg: String) -> Problem {
        Problem::error(self.file, msg)
            .at(self.line)
            .circuit(self.circuit)
    }

    fn warning(&self, msg: String) -> Problem {
        Problem::warning(self.file, msg)
            .at(self.line)
            .circuit(self.circuit)
    }
}

/// Download min, upload min, download max, upload max.
type Rates = [Rate; 4];

/// The four rate cells; `None` (with an error per bad cell and one saying
/// the row is skipped) if any is not a rate.
fn check_rates(row: &Row<'_>, at: At<'_>, report: &mut Report) -> Option<Rates> {
    let mut rates = [Rate::ZERO; 4];
    let mut ok = true;
    for (i, (col, label)) in [
        (Col::DownMin, "download min"),
        (Col::UpMin, "upload min"),
        (Col::DownMax, "download max"),
        (Col::UpMax, "upload max"),
    ]
    .into_iter()
    .enumerate()
    {
        match Rate::from_mbps_str(row.get(col)) {
            Ok(r) => rates[i] = r,
            Err(e) => {
                ok = false;
                report.push(at.error(rate_error_message(label, &e)));
            }
        }
    }
    if !ok {
        report.push(at.error("row skipped because of its rates".to_string()));
        return None;
    }
    Some(rates)
}

/// The IPv4 and IPv6 cells (bad entries are errors and dropped, host bits
/// after the prefix length are warnings).
fn check_addresses(row: &Row<'_>, at: At<'_>, report: &mut Report) -> (Vec<Ipv4Net>, Vec<Ipv6Net>) {
    let mut problems = Vec::new();
    let ipv4 = parse_ip_list::<Ipv4Net>(row.get(Col::Ipv4), "IPv4", &mut problems);
    let ipv6 = parse_ip_list::<Ipv6Net>(row.get(Col::Ipv6), "IPv6", &mut problems);
    for (is_error, msg) in problems {
        report.push(if is_error {
            at.error(msg)
        } else {
            at.warning(msg)
        });
    }
    (ipv4, ipv6)
}

/// The MAC cell, trimmed; text that is not a MAC is a warning and kept.
fn check_mac<'r>(row: &Row<'r>, at: At<'_>, report: &mut Report) -> &'r str {
    let mac = trim(row.get(Col::Mac));
    if !mac.is_empty() && !is_mac(mac) {
        report.push(at.warning(format!(
            "MAC {mac:?} is not a MAC address (kept as written)"
        )));
    }
    mac
}

/// The sqm cell; an unknown qdisc name in either half is a warning.
fn check_sqm(row: &Row<'_>, at: At<'_>, report: &mut Report) -> Option<SqmOverride> {
    let (unknown_down, unknown_up, sqm) = parse_sqm(row.get(Col::Sqm), at.line);
    for w in [&unknown_down, &unknown_up].into_iter().flatten() {
        report.push(at.warning(format!(
            "sqm {:?}: unknown qdisc {w:?} (expected one of {})",
            row.get(Col::Sqm),
            KNOWN_SQM.join(", ")
        )));
    }
    sqm
}

/// The text cells: control characters are a warning (kept as written).
fn check_text(row: &Row<'_>, at: At<'_>, report: &mut Report) {
    for col in [
        Col::CircuitId,
        Col::CircuitName,
        Col::DeviceId,
        Col::DeviceName,
        Col::ParentNode,
        Col::Comment,
    ] {
        if has_control(row.get(col)) {
            report.push(at.warning(format!(
                "{} {:?} contains control characters (kept as written)",
                col.name(),
                row.get(col)
            )));
        }
    }
}

impl<'f> Parser<'f> {
    pub(super) fn new(file: &'f str) -> Self {
        Parser {
            file,
            report: Report::new(),
            circuits: Vec::new(),
            parent_node_ids: Vec::new(),
            hasher: DefaultHashBuilder::default(),
            circuit_index: HashTable::new(),
            device_ids: HashTable::new(),
            parents: HashTable::new(),
            legacy_rows: 0,
            legacy_first_line: 0,
            header_len: 0,
        }
    }

    pub(super) fn reserve(&mut self, rows: usize) {
        self.circuits.reserve(rows);
        self.parent_node_ids.reserve(rows);
        let (circuits, h) = (&self.circuits, &self.hasher);
        self.circuit_index
            .reserve(rows, |&i| h.hash_one(circuits[i].id.as_str()));
        self.device_ids.reserve(rows, |&(c, d)| {
            h.hash_one(circuits[c].devices[d].id.as_str())
        });
    }

    pub(super) fn read_header(
        &mut self,
        fields: &[&str],
        line: usize,
    ) -> Result<(Vec<Option<Col>>, usize), ModelError> {
        let cols: Vec<Option<Col>> = fields.iter().map(|f| Col::from_header(f)).collect();
        if !cols.contains(&Some(Col::CircuitId)) {
            return Err(ModelError::NoHeader {
                file: self.file.to_string(),
            });
        }
        for col in ALL_COLS {
            if !col.optional() && !cols.contains(&Some(col)) {
                return Err(ModelError::MissingColumn {
                    file: self.file.to_string(),
                    line,
                    column: col.name().to_string(),
                });
            }
        }
        let mut seen = Vec::new();
        for (f, c) in fields.iter().zip(&cols) {
            match c {
                None => self.report.push(
                    Problem::warning(self.file, format!("unknown column {f:?} ignored")).at(line),
                ),
                Some(c) if seen.contains(c) => self.report.push(
                    Problem::warning(
                        self.file,
                        format!("column {f:?} appears twice; the first one is used"),
                    )
                    .at(line),
                ),
                Some(c) => seen.push(*c),
            }
        }
        self.header_len = fields.len();
        Ok((cols, line))
    }

    pub(super) fn read_row(&mut self, cols: &[Option<Col>], fields: StrFields<'_>, line: usize) {
        let mut row = Row { fields: [""; 16] };
        let n = fields.len();
        if n == cols.len()
            || (n < cols.len() && cols[n..].iter().all(|c| c.is_none_or(Col::optional)))
        {
            let mut set = [false; 16];
            for (f, c) in fields.iter().zip(cols) {
                if let Some(c) = c {
                    if !set[*c as usize] {
                        row.fields[*c as usize] = f;
                        set[*c as usize] = true;
                    }
                }
            }
        } else if n == LEGACY_COLS.len() && cols.len() > n {
            for (f, c) in fields.iter().zip(LEGACY_COLS) {
                row.fields[c as usize] = f;
            }
            if self.legacy_rows == 0 {
                self.legacy_first_line = line;
            }
            self.legacy_rows += 1;
        } else {
            self.report.push(
                Problem::error(
                    self.file,
                    format!(
                        "row has {n} fields but the header has {} columns; skipped",
                        cols.len()
                    ),
                )
                .at(line),
            );
            return;
        }
        self.add_row(&row, line);
    }

    /// Checks one row column by column and adds its device to its circuit
    /// (a new circuit on its first row).
    fn add_row(&mut self, row: &Row<'_>, line: usize) {
        let file = self.file;
        let circuit_id = trim(row.get(Col::CircuitId));
        if circuit_id.is_empty() {
            self.report
                .push(Problem::error(file, "row has no Circuit ID; skipped").at(line));
            return;
        }
        let at = At {
            file,
            line,
            circuit: circuit_id,
        };
        let report = &mut self.report;
        let Some(rates) = check_rates(row, at, report) else {
            return;
        };
        let (ipv4, ipv6) = check_addresses(row, at, report);
        let mac = check_mac(row, at, report);
        let sqm = check_sqm(row, at, report);
        check_text(row, at, report);

        let circuit_hash = self.hasher.hash_one(circuit_id);
        let existing = {
            let circuits = &self.circuits;
            self.circuit_index
                .find(circuit_hash, |&i| circuits[i].id == circuit_id)
                .copied()
        };
        // Where this device will be: its circuit's next device.
        let slot = match existing {
            Some(idx) => (idx, self.circuits[idx].devices.len()),
            None => (self.circuits.len(), 0),
        };
        let device_id = trim(row.get(Col::DeviceId));
        let new_device_id = self.check_device_id(device_id, at);
        let device = Device {
            id: device_id.into(),
            name: row.get(Col::DeviceName).into(),
            mac: mac.into(),
            ipv4,
            ipv6,
            line,
        };
        match existing {
            None => self.new_circuit(row, circuit_hash, rates, sqm, device),
            Some(idx) => self.add_device(idx, row, rates, sqm, device, at),
        }
        if let Some(hash) = new_device_id {
            let (circuits, h) = (&self.circuits, &self.hasher);
            self.device_ids.insert_unique(hash, slot, |&(c, d)| {
                h.hash_one(circuits[c].devices[d].id.as_str())
            });
        }
    }

    /// The Device ID: empty is a warning, one used before an error naming
    /// the line that used it; the hash to register it under when it is new.
    fn check_device_id(&mut self, device_id: &str, at: At<'_>) -> Option<u64> {
        if device_id.is_empty() {
            self.report
                .push(at.warning("device has no Device ID".to_string()));
            return None;
        }
        let hash = self.hasher.hash_one(device_id);
        let circuits = &self.circuits;
        match self
            .device_ids
            .find(hash, |&(c, d)| circuits[c].devices[d].id == device_id)
        {
            Some(&(c, d)) => {
                let first = circuits[c].devices[d].line;
                self.report.push(at.error(format!(
                    "Device ID {device_id:?} is already used at line {first}"
                )));
                None
            }
            None => Some(hash),
        }
    }

    /// A circuit's first row: the circuit, with its first device.
    fn new_circuit(
        &mut self,
        row: &Row<'_>,
        circuit_hash: u64,
        rates: Rates,
        sqm: Option<SqmOverride>,
        device: Device,
    ) {
        let (circuits, h) = (&self.circuits, &self.hasher);
        self.circuit_index
            .insert_unique(circuit_hash, circuits.len(), |&i| {
                h.hash_one(circuits[i].id.as_str())
            });
        let pid = trim(row.get(Col::ParentNodeId));
        self.parent_node_ids
            .push((!pid.is_empty()).then(|| pid.to_string()));
        let parent = Some(trim(row.get(Col::ParentNode)))
            .filter(|p| !p.is_empty())
            .map(|p| self.intern_parent(p));
        self.circuits.push(Circuit {
            id: trim(row.get(Col::CircuitId)).into(),
            name: row.get(Col::CircuitName).into(),
            parent,
            download_min: rates[0],
            upload_min: rates[1],
            download_max: rates[2],
            upload_max: rates[3],
            comment: row.get(Col::Comment).into(),
            sqm,
            devices: vec![device],
        });
    }

    /// A later row of circuit `idx`: another parent is an error; other
    /// rates, name or sqm are warnings (the first row wins, as in
    /// LibreQoS).
    fn add_device(
        &mut self,
        idx: usize,
        row: &Row<'_>,
        rates: Rates,
        sqm: Option<SqmOverride>,
        device: Device,
        at: At<'_>,
    ) {
        let device_id = device.id.as_str();
        let parent = Some(trim(row.get(Col::ParentNode))).filter(|p| !p.is_empty());
        let name = row.get(Col::CircuitName);
        let c = &mut self.circuits[idx];
        let first = c.devices.first().map(|d| d.line).unwrap_or(0);
        if c.parent.as_deref() != parent {
            self.report.push(at.error(format!(
                "device {device_id:?} has parent node {:?} but line {first} of this circuit has {:?}",
                parent.unwrap_or(""),
                c.parent.as_deref().unwrap_or("")
            )));
        }
        let theirs = [c.download_min, c.upload_min, c.download_max, c.upload_max];
        if theirs != rates {
            self.report.push(at.warning(format!(
                "device {device_id:?} has rates {}/{}/{}/{} (down min/up min/down max/up max) but line {first} of this circuit has {}/{}/{}/{}; using line {first}'s",
                rates[0], rates[1], rates[2], rates[3], theirs[0], theirs[1], theirs[2], theirs[3]
            )));
        }
        if c.name != name {
            self.report.push(at.warning(format!(
                "device {device_id:?} has circuit name {name:?} but line {first} of this circuit has {:?}; using line {first}'s",
                c.name
            )));
        }
        if c.sqm != sqm {
            self.report.push(at.warning(format!(
                "device {device_id:?} has sqm {:?} but line {first} of this circuit has another; using line {first}'s",
                row.get(Col::Sqm)
            )));
        }
        c.devices.push(device);
    }

    /// The shared text of parent node `name` (made on first sight).
    fn intern_parent(&mut self, name: &str) -> SmolStr {
        let h = &self.hasher;
        self.parents
            .entry(h.hash_one(name), |p| p == name, |p| h.hash_one(p.as_str()))
            .or_insert_with(|| SmolStr::new(name))
            .get()
            .clone()
    }

    pub(super) fn finish(mut self) -> ShapedDevices {
        if self.legacy_rows > 0 {
            self.report.push(
                Problem::warning(
                    self.file,
                    format!(
                        "{} row(s) have 13 fields but the header has {} columns; read them in the legacy 13-column order (Circuit ID, Circuit Name, Device ID, Device Name, Parent Node, MAC, IPv4, IPv6, rates, Comment), as older LibreQoS did (LibreQoS 1.5 refuses such a file)",
                        self.legacy_rows, self.header_len
                    ),
                )
                .at(self.legacy_first_line),
            );
        }
        ShapedDevices {
            parent_node_ids: self.parent_node_ids,
            circuits: self.circuits,
            report: self.report,
        }
    }
}
