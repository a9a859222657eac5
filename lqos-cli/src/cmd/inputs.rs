//! Shared input options: `--network`, `--devices`, `--config`.
