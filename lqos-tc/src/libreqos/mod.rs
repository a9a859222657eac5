//! LibreQoS as it runs: its state files, its tc text, and how lqos's plan
//! compares with (and adopts) the tree a LibreQoS box built.
//!
//! - [`LibreQosState`]: the allocation LibreQoS records in its state
//!   directory (`shaping/queuingStructure.json`,
//!   `stats/statsByCircuit.json`): every node's and circuit's classids.
//! - [`compare()`]: LibreQoS's tc text (`linux_tc.txt` or the bakery's
//!   `linux_tc_rust.txt`) against an lqos [`crate::Plan`], by name, field
//!   by field, with the expected differences noted.
//!
//! ```
//! use lqos_tc::libreqos::{compare, libreqos_trees, LibreQosState};
//! let tc = "qdisc replace dev ens19 root handle 7FFF: mq\n\
//!           qdisc add dev ens19 parent 7FFF:0x1 handle 0x1: htb default 2\n\
//!           class add dev ens19 parent 0x1: classid 0x1:1 htb rate 1.0gbit ceil 1.0gbit quantum 59980\n";
//! let trees = libreqos_trees("linux_tc.txt", tc).unwrap();
//! assert_eq!(trees["ens19"].classes.len(), 1);
//! ```

mod adopt;
mod compare;
mod state;

pub use compare::{
    compare, libreqos_printed, libreqos_trees, CompareError, Comparison, Difference, Dir, Entity,
    Note,
};
pub use state::{parse_classid, LibreQosState, StateCircuit, StateError, StateNode};
