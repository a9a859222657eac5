//! Entry points shared by the cargo-fuzz targets (`fuzz/`) and the
//! stable-toolchain corpus replay: any bytes in, no panic out, and what
//! parses renders back to the same thing.

use crate::config::{CircuitSqm, LeafSpec};
use crate::parse::parse_batch;
use crate::text::render_line;

/// The `sqm` grammar (`default_sqm`, `--sqm` and the CSV's `sqm` column):
/// the text as a leaf spec, and as a circuit's `down/up` override. A spec
/// that parses renders to text that parses back to the same spec.
pub fn fuzz_sqm(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(spec) = text.parse::<LeafSpec>() {
        let again = spec.to_string().parse::<LeafSpec>();
        assert_eq!(again.as_ref(), Ok(&spec), "{text:?} rendered as {spec}");
    }
    let (down, up) = text.split_once('/').unwrap_or((&text, &text));
    let o = lqos_model::SqmOverride {
        download: down.trim().to_string(),
        upload: up.trim().to_string(),
        line: 2,
    };
    if let Err(e) = CircuitSqm::parse(&o, "fuzz") {
        let _ = e.to_string();
    }
}

/// The `tc -b` batch parser: every command that parses renders (as
/// [`render_line`] writes it) to a line that parses back to the same op.
pub fn fuzz_batch(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse_batch(&text) {
        Ok(ops) => {
            for (dev, op) in ops {
                if dev.contains(|c: char| c.is_whitespace() || c == '#') || dev == "tc" {
                    continue; // not a name tc would accept either
                }
                let line = render_line(&dev, &op);
                let back = parse_batch(&line);
                assert_eq!(
                    back.as_deref(),
                    Ok(&[(dev.clone(), op.clone())][..]),
                    "{line:?}"
                );
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
