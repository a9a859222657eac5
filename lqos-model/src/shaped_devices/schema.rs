//! The file's schema: the header LibreQoS writes (current and legacy),
//! the columns lqos reads, matched by name, and a row's fields by column.

/// The columns lqos writes, in LibreQoS's current order (16 with `sqm`).
pub const CURRENT_HEADER: [&str; 16] = [
    "Circuit ID",
    "Circuit Name",
    "Device ID",
    "Device Name",
    "Parent Node",
    "Parent Node ID",
    "Anchor Node ID",
    "MAC",
    "IPv4",
    "IPv6",
    "Download Min Mbps",
    "Upload Min Mbps",
    "Download Max Mbps",
    "Upload Max Mbps",
    "Comment",
    "sqm",
];

/// The legacy 13-column order (which older LibreQoS read positionally).
pub const LEGACY_HEADER: [&str; 13] = [
    "Circuit ID",
    "Circuit Name",
    "Device ID",
    "Device Name",
    "Parent Node",
    "MAC",
    "IPv4",
    "IPv6",
    "Download Min Mbps",
    "Upload Min Mbps",
    "Download Max Mbps",
    "Upload Max Mbps",
    "Comment",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Col {
    CircuitId,
    CircuitName,
    DeviceId,
    DeviceName,
    ParentNode,
    ParentNodeId,
    AnchorNodeId,
    Mac,
    Ipv4,
    Ipv6,
    DownMin,
    UpMin,
    DownMax,
    UpMax,
    Comment,
    Sqm,
}

pub(super) const ALL_COLS: [Col; 16] = [
    Col::CircuitId,
    Col::CircuitName,
    Col::DeviceId,
    Col::DeviceName,
    Col::ParentNode,
    Col::ParentNodeId,
    Col::AnchorNodeId,
    Col::Mac,
    Col::Ipv4,
    Col::Ipv6,
    Col::DownMin,
    Col::UpMin,
    Col::DownMax,
    Col::UpMax,
    Col::Comment,
    Col::Sqm,
];

pub(super) const LEGACY_COLS: [Col; 13] = [
    Col::CircuitId,
    Col::CircuitName,
    Col::DeviceId,
    Col::DeviceName,
    Col::ParentNode,
    Col::Mac,
    Col::Ipv4,
    Col::Ipv6,
    Col::DownMin,
    Col::UpMin,
    Col::DownMax,
    Col::UpMax,
    Col::Comment,
];

impl Col {
    pub(super) fn name(self) -> &'static str {
        CURRENT_HEADER[ALL_COLS.iter().position(|&c| c == self).unwrap_or(0)]
    }

    pub(super) fn optional(self) -> bool {
        matches!(
            self,
            Col::ParentNodeId | Col::AnchorNodeId | Col::Comment | Col::Sqm
        )
    }

    pub(super) fn from_header(text: &str) -> Option<Col> {
        let norm: String = text
            .chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect();
        let norm = norm.strip_suffix("mbps").unwrap_or(&norm);
        Some(match norm {
            "circuitid" => Col::CircuitId,
            "circuitname" => Col::CircuitName,
            "deviceid" => Col::DeviceId,
            "devicename" => Col::DeviceName,
            "parentnode" => Col::ParentNode,
            "parentnodeid" => Col::ParentNodeId,
            "anchornodeid" => Col::AnchorNodeId,
            "mac" => Col::Mac,
            "ipv4" => Col::Ipv4,
            "ipv6" => Col::Ipv6,
            "downloadmin" => Col::DownMin,
            "uploadmin" => Col::UpMin,
            "downloadmax" => Col::DownMax,
            "uploadmax" => Col::UpMax,
            "comment" | "comments" => Col::Comment,
            "sqm" => Col::Sqm,
            _ => return None,
        })
    }
}

/// One row, its fields by column.
pub(super) struct Row<'a> {
    pub(super) fields: [&'a str; 16],
}

impl<'a> Row<'a> {
    pub(super) fn get(&self, col: Col) -> &'a str {
        self.fields[col as usize]
    }
}
