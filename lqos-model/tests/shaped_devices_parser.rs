//! ShapedDevices.csv parsing: every accepted form and every row-level
//! problem, with its exact message.

use lqos_model::shaped_devices::parse_shaped_devices;
use lqos_model::{ModelError, Rate, Severity, SqmOverride};

const H13: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment";
const H16: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm";

fn parse(text: &str) -> lqos_model::shaped_devices::ShapedDevices {
    parse_shaped_devices("SD.csv", text.as_bytes()).unwrap()
}

fn messages(text: &str) -> Vec<String> {
    parse(text)
        .report
        .problems
        .iter()
        .map(|p| format!("{}: {p}", p.severity))
        .collect()
}

#[test]
fn current_16_column_file_with_sqm_pair() {
    let sd = parse(&format!(
        "{H16}\n1,Home,d1,Router,AP_A,ap-a,core,AA:bb:cc:dd:ee:ff,100.64.0.1,2001:db8::/56,2,1,20,5,hi,cake/fq_codel\n"
    ));
    assert!(sd.report.is_clean(), "{}", sd.report);
    let c = &sd.circuits[0];
    assert_eq!(c.comment, "hi");
    assert_eq!(c.sqm, Some(SqmOverride::new("cake", "fq_codel")));
    assert_eq!(c.sqm.as_ref().unwrap().line, 2);
    assert_eq!(c.devices[0].mac, "AA:bb:cc:dd:ee:ff");
}

#[test]
fn single_sqm_applies_to_both_directions() {
    let sd = parse(&format!(
        "{H16}\n1,Home,d1,Router,,,,,100.64.0.1,,2,1,20,5,,fq_codel\n"
    ));
    let s = sd.circuits[0].sqm.clone().unwrap();
    assert_eq!(
        (s.download.as_str(), s.upload.as_str()),
        ("fq_codel", "fq_codel")
    );
}

#[test]
fn headers_are_matched_by_name_in_any_order_and_case() {
    let sd = parse(
        "  upload max mbps ,DOWNLOAD_MAX_MBPS,circuit id,Circuit Name,device id,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min,Upload Min\n\
         5,20,c1,n,d1,dn,,,10.0.0.1,,2,1\n",
    );
    assert!(sd.report.is_clean(), "{}", sd.report);
    let c = &sd.circuits[0];
    assert_eq!(c.id, "c1");
    assert_eq!(c.download_max, Rate::from_mbps(20));
    assert_eq!(c.upload_max, Rate::from_mbps(5));
    assert_eq!(c.comment, "");
}

#[test]
fn bom_crlf_comments_anywhere_and_quoted_commas() {
    let text = format!(
        "\u{feff}# top comment\r\n{H13}\r\n# middle\r\n1,\"Main St, 5 \"\"A\"\"\",d1,R,,,\"10.0.0.1, 10.0.1.0/24 ,\",\"2001:db8::1, 2001:db8:1::/48\",1,1,2,2,\"a,b\"\r\n\r\n#end\r\n2,x,d2,R,,,10.0.0.2,,1,1,2,2,\r\n"
    );
    let sd = parse(&text);
    assert!(sd.report.is_clean(), "{}", sd.report);
    let c = &sd.circuits[0];
    assert_eq!(c.name, "Main St, 5 \"A\"");
    assert_eq!(c.comment, "a,b");
    assert_eq!(c.devices[0].ipv4.len(), 2);
    assert_eq!(c.devices[0].ipv6[0].to_string(), "2001:db8::1/128");
    assert_eq!(c.devices[0].ipv6[1].to_string(), "2001:db8:1::/48");
    assert_eq!(c.devices[0].line, 4);
    assert_eq!(sd.circuits[1].devices[0].line, 7);
}

#[test]
fn quoted_field_spanning_lines_keeps_line_numbers_right() {
    let sd = parse(&format!(
        "{H13}\n1,\"two\nlines\",d1,R,,,10.0.0.1,,1,1,2,2,\n2,x,d2,R,,,10.0.0.2,,1,1,2,2,\n"
    ));
    assert_eq!(sd.circuits[0].name, "two\nlines");
    assert_eq!(sd.circuits[1].devices[0].line, 4);
    assert_eq!(
        sd.report.problems[0].to_string(),
        "SD.csv:2: circuit \"1\": Circuit Name \"two\\nlines\" contains control characters (kept as written)"
    );
}

#[test]
fn several_rows_of_one_circuit_are_its_devices() {
    let sd = parse(&format!(
        "{H13}\n7,Home,d1,Router,,,10.0.0.1,,1,1,2,2,\n8,Shop,d3,R,,,10.0.0.3,,1,1,2,2,\n7,Home,d2,Phone,,,10.0.0.2,,1,1,2,2,\n"
    ));
    assert_eq!(sd.circuits.len(), 2);
    assert_eq!(sd.circuits[0].devices.len(), 2);
    assert_eq!(sd.circuits[0].devices[1].name, "Phone");
    assert_eq!(sd.device_count(), 3);
}

#[test]
fn fractional_rates_are_exact() {
    let sd = parse(&format!(
        "{H13}\n1,a,d1,R,,,10.0.0.1,,0.0028,0.5,100.5,2.5,\n"
    ));
    let c = &sd.circuits[0];
    assert_eq!(c.download_min.bps(), 2800);
    assert_eq!(c.upload_min.bps(), 500_000);
    assert_eq!(c.download_max.bps(), 100_500_000);
    assert_eq!(c.upload_max.to_string(), "2.5");
}

#[test]
fn bad_rates_are_named_and_the_row_skipped() {
    assert_eq!(
        messages(&format!(
            "{H13}\n1,a,d1,R,,,10.0.0.1,,NaN,-1,,0.0000001,\n2,b,d2,R,,,10.0.0.2,,99999999999999999999,1,2,2,\n"
        )),
        [
            "error: SD.csv:2: circuit \"1\": download min \"NaN\" is not a number",
            "error: SD.csv:2: circuit \"1\": upload min \"-1\" is negative",
            "error: SD.csv:2: circuit \"1\": download max is empty",
            "error: SD.csv:2: circuit \"1\": upload max \"0.0000001\" has more than 6 decimal places (finer than 1 bit/s)",
            "error: SD.csv:2: circuit \"1\": row skipped because of its rates",
            "error: SD.csv:3: circuit \"2\": download min \"99999999999999999999\" is too large",
            "error: SD.csv:3: circuit \"2\": row skipped because of its rates",
        ]
    );
}

#[test]
fn bad_addresses_are_errors_and_host_bits_a_warning() {
    assert_eq!(
        messages(&format!(
            "{H13}\n1,a,d1,R,,,\"300.1.1.1, ::1, 10.0.0.1/33, 10.0.0.5/24\",zz,1,1,2,2,\n"
        )),
        [
            "error: SD.csv:2: circuit \"1\": IPv4 \"300.1.1.1\" is not a valid IPv4 address or CIDR range",
            "error: SD.csv:2: circuit \"1\": IPv4 \"::1\" is not a valid IPv4 address or CIDR range",
            "error: SD.csv:2: circuit \"1\": IPv4 \"10.0.0.1/33\" is not a valid IPv4 address or CIDR range",
            "warning: SD.csv:2: circuit \"1\": IPv4 \"10.0.0.5/24\" has host bits set after the prefix length",
            "error: SD.csv:2: circuit \"1\": IPv6 \"zz\" is not a valid IPv6 address or CIDR range",
        ]
    );
}

#[test]
fn mac_syntax_is_a_warning() {
    assert_eq!(
        messages(&format!(
            "{H13}\n1,a,d1,R,,aa-bb-cc-dd-ee-ff,10.0.0.1,,1,1,2,2,\n2,a,d2,R,,aa:bb:cc:dd:ee,10.0.0.2,,1,1,2,2,\n"
        )),
        ["warning: SD.csv:3: circuit \"2\": MAC \"aa:bb:cc:dd:ee\" is not a MAC address (kept as written)"]
    );
}

#[test]
fn missing_circuit_id_and_device_ids() {
    assert_eq!(
        messages(&format!(
            "{H13}\n ,a,d1,R,,,10.0.0.1,,1,1,2,2,\n1,a,,R,,,10.0.0.2,,1,1,2,2,\n2,b,d9,R,,,10.0.0.3,,1,1,2,2,\n3,c,d9,R,,,10.0.0.4,,1,1,2,2,\n"
        )),
        [
            "error: SD.csv:2: row has no Circuit ID; skipped",
            "warning: SD.csv:3: circuit \"1\": device has no Device ID",
            "error: SD.csv:5: circuit \"3\": Device ID \"d9\" is already used at line 4",
        ]
    );
}

#[test]
fn devices_of_one_circuit_that_disagree() {
    assert_eq!(
        messages(&format!(
            "{H13}\n1,a,d1,R,AP_A,,10.0.0.1,,1,1,20,20,\n1,b,d2,R,AP_B,,10.0.0.2,,2,1,20,20,\n"
        )),
        [
            "error: SD.csv:3: circuit \"1\": device \"d2\" has parent node \"AP_B\" but line 2 of this circuit has \"AP_A\"",
            "warning: SD.csv:3: circuit \"1\": device \"d2\" has rates 2/1/20/20 (down min/up min/down max/up max) but line 2 of this circuit has 1/1/20/20; using line 2's",
            "warning: SD.csv:3: circuit \"1\": device \"d2\" has circuit name \"b\" but line 2 of this circuit has \"a\"; using line 2's",
        ]
    );
    let sd = parse(&format!(
        "{H13}\n1,a,d1,R,AP_A,,10.0.0.1,,1,1,20,20,\n1,b,d2,R,AP_B,,10.0.0.2,,2,1,20,20,\n"
    ));
    assert_eq!(sd.circuits[0].download_min, Rate::from_mbps(1));
    assert_eq!(sd.circuits[0].devices.len(), 2);
}

#[test]
fn wrong_field_counts() {
    assert_eq!(
        messages(&format!(
            "{H13}\n1,a,d1,R,AP\n2,b,d2,R,,,10.0.0.2,,1,1,2,2,,extra\n3,c,d3,R,,,10.0.0.3,,1,1,2,2\n"
        )),
        [
            "error: SD.csv:2: row has 5 fields but the header has 13 columns; skipped",
            "error: SD.csv:3: row has 14 fields but the header has 13 columns; skipped",
        ]
    );
}

#[test]
fn unknown_columns_and_unknown_sqm_are_warnings() {
    assert_eq!(
        messages(&format!(
            "{H13},Color,sqm\n1,a,d1,R,,,10.0.0.1,,1,1,2,2,,red,cake/tbf\n"
        )),
        [
            "warning: SD.csv:1: unknown column \"Color\" ignored",
            "warning: SD.csv:2: circuit \"1\": sqm \"cake/tbf\": unknown qdisc \"tbf\" (expected one of cake, fq_codel, none, pfifo, bfifo)",
        ]
    );
}

#[test]
fn capitalised_sqm_values_are_known_as_libreqos_lowercases_them() {
    let text = format!("{H13},sqm\n1,a,d1,R,,,10.0.0.1,,1,1,2,2,,Cake / None\n2,b,d2,R,,,10.0.0.2,,1,1,2,2,,FQ_CODEL\n");
    assert!(messages(&text).is_empty(), "{:?}", messages(&text));
    // Kept as written; the planner reads it case-insensitively.
    assert_eq!(
        parse(&text).circuits[0].sqm,
        Some(SqmOverride::new("Cake", "None"))
    );
}

#[test]
fn unterminated_quote_in_a_row() {
    assert_eq!(
        messages(&format!("{H13}\n1,\"abc,d1,R,,,10.0.0.1,,1,1,2,2,\n2,b\n")),
        ["error: SD.csv:2: a quote opened on line 2 is never closed; the rest of the file is skipped"]
    );
}

#[test]
fn invalid_utf8_row_is_skipped() {
    let mut bytes = format!("{H13}\n").into_bytes();
    bytes.extend_from_slice(b"1,\xff,d1,R,,,10.0.0.1,,1,1,2,2,\n");
    let sd = parse_shaped_devices("SD.csv", bytes.as_slice()).unwrap();
    assert_eq!(
        sd.report.problems[0].to_string(),
        "SD.csv:2: row is not valid UTF-8; skipped"
    );
    assert_eq!(sd.report.problems[0].severity, Severity::Error);
}

#[test]
fn unreadable_input_is_an_error() {
    let err = |t: &str| {
        parse_shaped_devices("SD.csv", t.as_bytes())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(""),
        "SD.csv: no header row (expected a line starting with \"Circuit ID\")"
    );
    assert_eq!(
        err("# only\n#comments\n"),
        "SD.csv: no header row (expected a line starting with \"Circuit ID\")"
    );
    assert_eq!(
        err("1,a,d1,R,,,10.0.0.1,,1,1,2,2,\n"),
        "SD.csv: no header row (expected a line starting with \"Circuit ID\")"
    );
    assert_eq!(
        err("Circuit ID,Circuit Name\n"),
        "SD.csv:1: header has no \"Device ID\" column"
    );
    assert_eq!(
        err("\"Circuit ID,x\n"),
        "SD.csv:1: cannot read CSV: a quote opened on line 1 is never closed"
    );
    struct Broken;
    impl std::io::Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let e = parse_shaped_devices("SD.csv", Broken).unwrap_err();
    assert!(matches!(e, ModelError::Csv { .. }));
    assert_eq!(e.to_string(), "SD.csv: cannot read CSV: disk on fire");
}

#[test]
fn untrusted_text_is_kept_verbatim() {
    let sd = parse(&format!(
        "{H13}\n\"1; tc qdisc del dev eth0 root\",\"$(reboot) `id`\",d1,\"\u{202e}evil\",,,10.0.0.1,,1,1,2,2,\"# not a comment\"\n"
    ));
    let c = &sd.circuits[0];
    assert_eq!(c.id, "1; tc qdisc del dev eth0 root");
    assert_eq!(c.name, "$(reboot) `id`");
    assert_eq!(c.devices[0].name, "\u{202e}evil");
    assert_eq!(c.comment, "# not a comment");
}

#[test]
fn text_after_a_closing_quote_is_kept_like_python_csv() {
    let sd = parse(&format!(
        "{H13}\n1,\"Main\" St,d1,R,,,10.0.0.1,,1,1,2,2,\"\"\n"
    ));
    assert_eq!(sd.circuits[0].name, "Main St");
    assert_eq!(sd.circuits[0].comment, "");
}

#[test]
fn circuits_of_one_parent_share_its_name() {
    // A name longer than SmolStr's 23 inline bytes lives behind a shared
    // pointer: every circuit of that parent points at the same text.
    let long = "Tower_North_Ridge_Sector_7_AP";
    let sd = parse(&format!(
        "{H13}\n1,a,d1,R,{long},,10.0.0.1,,1,1,2,2,\n2,b,d2,R,{long},,10.0.0.2,,1,1,2,2,\n3,c,d3,R, {long} ,,10.0.0.3,,1,1,2,2,\n4,d,d4,R,AP_B,,10.0.0.4,,1,1,2,2,\n"
    ));
    assert!(sd.report.is_clean(), "{}", sd.report);
    let parents: Vec<&str> = sd
        .circuits
        .iter()
        .map(|c| c.parent.as_deref().unwrap())
        .collect();
    assert_eq!(parents, [long, long, long, "AP_B"]);
    assert!(sd.circuits[0].parent.as_ref().unwrap().is_heap_allocated());
    let p0 = parents[0].as_ptr();
    assert!(parents[1..3].iter().all(|p| p.as_ptr() == p0));
}

#[test]
fn macs_and_control_characters_and_unicode_whitespace() {
    let msgs = messages(&format!(
        "{H13}\n1,a,d1,R,,AA:BB:CC:DD:EE:F0,10.0.0.1,,1,1,2,2,\n2,a,d2,R,,aa:bb-cc:dd:ee:ff,10.0.0.2,,1,1,2,2,\n3,a,d3,R,,aa:bb:cc:dd:ee:fg,10.0.0.3,,1,1,2,2,\n4,a\u{85}b,d4,R\u{7f},,,10.0.0.4,,1,1,2,2,\n\u{a0}5\u{a0},a,d5,R,,,10.0.0.5,,\u{2003}1,1,2,2,\n"
    ));
    assert_eq!(
        msgs,
        [
            "warning: SD.csv:3: circuit \"2\": MAC \"aa:bb-cc:dd:ee:ff\" is not a MAC address (kept as written)",
            "warning: SD.csv:4: circuit \"3\": MAC \"aa:bb:cc:dd:ee:fg\" is not a MAC address (kept as written)",
            "warning: SD.csv:5: circuit \"4\": Circuit Name \"a\\u{85}b\" contains control characters (kept as written)",
            "warning: SD.csv:5: circuit \"4\": Device Name \"R\\u{7f}\" contains control characters (kept as written)",
        ]
    );
    // Unicode whitespace around an id or a rate is trimmed, as str::trim does.
    let sd = parse(&format!(
        "{H13}\n\u{a0}5\u{a0},a,d5,R,,,10.0.0.5,,\u{2003}1.5,1,2,2,\n"
    ));
    assert_eq!(sd.circuits[0].id, "5");
    assert_eq!(sd.circuits[0].download_min, Rate::from_bps(1_500_000));
}
