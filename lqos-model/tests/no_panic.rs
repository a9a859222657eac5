//! Arbitrary input never panics the parsers (or validation behind them).

use lqos_model::config::parse_config;
use lqos_model::fuzzing::{fuzz_network_json, fuzz_shaped_devices};
use proptest::prelude::*;

const H16: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_never_panic_the_csv_parser(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_shaped_devices(&data);
        let mut with_header = H16.as_bytes().to_vec();
        with_header.extend_from_slice(&data);
        fuzz_shaped_devices(&with_header);
    }

    #[test]
    fn csv_like_text_never_panics(body in "([0-9a-f:./, \"#\r\n-]|1|AP|cake/fq_codel|10.0.0.1/8|::1|1e9|NaN){0,200}") {
        let text = format!("{H16}{body}");
        fuzz_shaped_devices(text.as_bytes());
    }

    #[test]
    fn any_bytes_never_panic_the_json_parser(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        fuzz_network_json(&data);
    }

    #[test]
    fn json_like_text_never_panics(body in "([{}:,\" \\[\\]]|\"a\"|\"b\"|\"children\"|\"downloadBandwidthMbps\"|\"uploadBandwidthMbps\"|\"virtual\"|true|null|1|0|-1|1e400|2.5){0,120}") {
        fuzz_network_json(body.as_bytes());
    }

    #[test]
    fn any_text_never_panics_the_config_parser(text in ".{0,300}") {
        let _ = parse_config("lqos.conf", &text);
    }
}
