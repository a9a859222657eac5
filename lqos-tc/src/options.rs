//! Option tables: for each enumerated qdisc option, one table that maps
//! the tc word, the typed value and the kernel number to one another.
//!
//! The renderer and parser (`tc -b` text) and `lqos-apply`'s netlink
//! encoder and decoder all read these tables, so a word or number is
//! written down once. As in smoltcp's `enum_with_unknown!`, a kernel number
//! without a name (a newer kernel's mode) is kept as `Unknown(n)` instead
//! of being dropped, so a readback never mistakes it for the default.

use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

/// Declares an option enum from `Variant = "tc-word" / kernel-number` rows
/// plus `Unknown(u32)`, with the conversions in both directions.
macro_rules! option_table {
    (
        $(#[$attr:meta])*
        pub enum $name:ident {
            $( $variant:ident = $word:literal / $num:literal, )+
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, Serialize, Deserialize)]
        pub enum $name {
            $(
                #[doc = concat!("`", $word, "` (", stringify!($num), ").")]
                $variant,
            )+
            /// A kernel number lqos has no tc word for.
            Unknown(u32),
        }

        impl $name {
            /// Every named value, in table order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The tc word (`None` for [`Self::Unknown`]).
            pub const fn tc_word(self) -> Option<&'static str> {
                match self {
                    $($name::$variant => Some($word),)+
                    $name::Unknown(_) => None,
                }
            }

            /// The value for a tc word.
            pub fn from_tc_word(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The kernel's number for the value.
            pub const fn kernel(self) -> u32 {
                match self {
                    $($name::$variant => $num,)+
                    $name::Unknown(n) => n,
                }
            }

            /// The value for a kernel number (`Unknown(n)` if unnamed).
            pub const fn from_kernel(n: u32) -> $name {
                match n {
                    $($num => $name::$variant,)+
                    n => $name::Unknown(n),
                }
            }
        }

        impl From<u32> for $name {
            fn from(n: u32) -> $name {
                $name::from_kernel(n)
            }
        }

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 {
                v.kernel()
            }
        }

        /// Values are equal when their kernel numbers are
        /// (`Unknown(1)` is the same mode as the one named 1).
        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                self.kernel() == other.kernel()
            }
        }

        impl Eq for $name {}

        impl Hash for $name {
            fn hash<H: Hasher>(&self, h: &mut H) {
                self.kernel().hash(h)
            }
        }

        /// The tc word, or `unknown(N)` for a number without one.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.tc_word() {
                    Some(w) => f.write_str(w),
                    None => write!(f, "unknown({})", self.kernel()),
                }
            }
        }
    };
}

option_table! {
    /// CAKE `diffserv` modes (`TCA_CAKE_DIFFSERV_MODE`, `enum
    /// cake_diffserv_mode`).
    pub enum CakeDiffserv {
        Diffserv3 = "diffserv3" / 0,
        Diffserv4 = "diffserv4" / 1,
        Diffserv8 = "diffserv8" / 2,
        Besteffort = "besteffort" / 3,
        Precedence = "precedence" / 4,
    }
}

option_table! {
    /// CAKE flow isolation modes (`TCA_CAKE_FLOW_MODE`, `enum
    /// cake_flow_mode`).
    pub enum CakeFlowMode {
        Flowblind = "flowblind" / 0,
        Srchost = "srchost" / 1,
        Dsthost = "dsthost" / 2,
        Hosts = "hosts" / 3,
        Flows = "flows" / 4,
        DualSrchost = "dual-srchost" / 5,
        DualDsthost = "dual-dsthost" / 6,
        TripleIsolate = "triple-isolate" / 7,
    }
}

option_table! {
    /// CAKE ACK filter (`TCA_CAKE_ACK_FILTER`, `enum cake_ack_filter`).
    pub enum CakeAckFilter {
        Off = "no-ack-filter" / 0,
        On = "ack-filter" / 1,
        Aggressive = "ack-filter-aggressive" / 2,
    }
}

/// A boolean option spelled as two tc words (`nat` / `nonat`); the kernel
/// number is 1 / 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoolWords {
    /// The word for `true`.
    pub on: &'static str,
    /// The word for `false`.
    pub off: &'static str,
}

impl BoolWords {
    /// The word for `v`.
    pub const fn word(self, v: bool) -> &'static str {
        if v {
            self.on
        } else {
            self.off
        }
    }

    /// `Some(v)` if `word` is one of the two words.
    pub fn parse(self, word: &str) -> Option<bool> {
        if word == self.on {
            Some(true)
        } else if word == self.off {
            Some(false)
        } else {
            None
        }
    }
}

/// cake `nat` / `nonat` (`TCA_CAKE_NAT`).
pub const CAKE_NAT: BoolWords = BoolWords {
    on: "nat",
    off: "nonat",
};
/// cake `wash` / `nowash` (`TCA_CAKE_WASH`).
pub const CAKE_WASH: BoolWords = BoolWords {
    on: "wash",
    off: "nowash",
};
/// cake `split-gso` / `no-split-gso` (`TCA_CAKE_SPLIT_GSO`).
pub const CAKE_SPLIT_GSO: BoolWords = BoolWords {
    on: "split-gso",
    off: "no-split-gso",
};
/// fq_codel `ecn` / `noecn` (`TCA_FQ_CODEL_ECN`).
pub const FQ_CODEL_ECN: BoolWords = BoolWords {
    on: "ecn",
    off: "noecn",
};

/// cake's RTT presets (`tc ... cake lan`): word and rtt in microseconds,
/// as iproute2's `q_cake.c` defines them. Parsed to `rtt_us`; rendered as
/// `rtt TIME`.
pub const CAKE_RTT_PRESETS: &[(&str, u32)] = &[
    ("datacentre", 100),
    ("lan", 1_000),
    ("metro", 10_000),
    ("regional", 30_000),
    ("internet", 100_000),
    ("oceanic", 300_000),
    ("satellite", 1_000_000),
    ("interplanetary", 3_600_000_000),
];

/// The rtt of a cake RTT preset word.
pub fn cake_rtt_preset(word: &str) -> Option<u32> {
    CAKE_RTT_PRESETS
        .iter()
        .find(|(w, _)| *w == word)
        .map(|&(_, us)| us)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + From<u32>,
        u32: From<T>,
        T: Named,
    {
        for &v in all {
            let word = v.word().expect("named values have a word");
            assert_eq!(T::from_word(word), Some(v), "{word}");
            assert_eq!(T::from(u32::from(v)), v, "{v:?}");
            assert_eq!(v.to_string(), word);
        }
        // Numbers and words are unique.
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(u32::from(*a), u32::from(*b));
                assert_ne!(a.word(), b.word());
            }
        }
    }

    trait Named: Sized {
        fn word(self) -> Option<&'static str>;
        fn from_word(w: &str) -> Option<Self>;
    }
    macro_rules! named {
        ($($t:ty),*) => {$(
            impl Named for $t {
                fn word(self) -> Option<&'static str> { self.tc_word() }
                fn from_word(w: &str) -> Option<Self> { <$t>::from_tc_word(w) }
            }
        )*};
    }
    named!(CakeDiffserv, CakeFlowMode, CakeAckFilter);

    #[test]
    fn every_table_round_trips_word_value_number() {
        round_trips(CakeDiffserv::ALL);
        round_trips(CakeFlowMode::ALL);
        round_trips(CakeAckFilter::ALL);
    }

    #[test]
    fn kernel_numbers_match_pkt_sched_h() {
        assert_eq!(CakeDiffserv::Diffserv4.kernel(), 1);
        assert_eq!(CakeDiffserv::Precedence.kernel(), 4);
        assert_eq!(CakeFlowMode::TripleIsolate.kernel(), 7);
        assert_eq!(CakeFlowMode::DualSrchost.kernel(), 5);
        assert_eq!(CakeAckFilter::Aggressive.kernel(), 2);
    }

    #[test]
    fn unknown_numbers_are_kept_and_compare_by_number() {
        let u = CakeDiffserv::from_kernel(9);
        assert_eq!(u, CakeDiffserv::Unknown(9));
        assert_ne!(u, CakeDiffserv::Diffserv3);
        assert_eq!(u.kernel(), 9);
        assert_eq!(u.tc_word(), None);
        assert_eq!(u.to_string(), "unknown(9)");
        assert_eq!(CakeDiffserv::Unknown(1), CakeDiffserv::Diffserv4);
        assert_eq!(CakeDiffserv::from_tc_word("diffserv5"), None);
    }

    #[test]
    fn bool_words_and_presets() {
        assert_eq!(CAKE_NAT.word(false), "nonat");
        assert_eq!(CAKE_SPLIT_GSO.parse("no-split-gso"), Some(false));
        assert_eq!(FQ_CODEL_ECN.parse("ecn"), Some(true));
        assert_eq!(CAKE_WASH.parse("nat"), None);
        assert_eq!(cake_rtt_preset("oceanic"), Some(300_000));
        assert_eq!(cake_rtt_preset("mars"), None);
    }
}
