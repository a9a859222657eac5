//! [`InputFile`]: which of LibreQoS's three input files (public in
//! [`crate::inputs`]).

/// One of the three input files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputFile {
    /// `network.json`.
    Network,
    /// `ShapedDevices.csv`.
    Devices,
    /// `lqos.conf`.
    Config,
}

impl InputFile {
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The file's usual name.
    pub fn name(self) -> &'static str {
        match self {
            InputFile::Network => "network.json",
            InputFile::Devices => "ShapedDevices.csv",
            InputFile::Config => "lqos.conf",
        }
    }

    /// What it is, in a message (`network file`).
    pub(crate) fn what(self) -> &'static str {
        match self {
            InputFile::Network => "network file",
            InputFile::Devices => "devices file",
            InputFile::Config => "config file",
        }
    }
}
