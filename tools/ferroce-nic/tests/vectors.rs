// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Header and ICRC encoding against hand-checked vectors (tests/vectors/README.md).

use ferroce_hw::gid_from_mac;
use ferroce_nic::engine::frame::{self, Route};
use ferroce_nic::engine::headers::Packet;

const VECTORS: &str = include_str!("vectors/frames.txt");

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

struct Vector {
    name: String,
    fields: std::collections::HashMap<String, String>,
}

fn vectors() -> Vec<Vector> {
    let mut out: Vec<Vector> = Vec::new();
    for line in VECTORS.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.split_once(' ') else {
            continue;
        };
        if key == "name" {
            out.push(Vector {
                name: value.to_string(),
                fields: Default::default(),
            });
        } else if let Some(v) = out.last_mut() {
            v.fields.insert(key.to_string(), value.to_string());
        }
    }
    out
}

#[test]
fn frames_match_the_vectors_byte_for_byte() {
    let smac = [0x52, 0x54, 0, 0, 0, 1];
    let dmac = [0x52, 0x54, 0, 0, 0, 2];
    let all = vectors();
    assert_eq!(all.len(), 4);
    for v in all {
        let f = |k: &str| v.fields.get(k).cloned().unwrap_or_default();
        let num = |k: &str| f(k).parse::<u32>().expect("number");
        let kind = f("kind");
        let (sgid, dgid) = if kind == "v4" {
            let mut s = [0u8; 16];
            s[10] = 0xff;
            s[11] = 0xff;
            s[12..].copy_from_slice(&[10, 0, 0, 1]);
            let mut d = s;
            d[15] = 2;
            (s, d)
        } else {
            (gid_from_mac(smac), gid_from_mac(dmac))
        };
        let route = Route {
            smac,
            dmac,
            vlan: None,
            v1: kind == "v1",
            sgid,
            dgid,
            traffic_class: num("traffic_class") as u8,
            hop_limit: num("hop_limit") as u8,
            flow_label: num("flow_label"),
        };
        let transport = hex(&f("transport"));
        let expected = hex(&f("frame"));
        let mut built = Vec::new();
        frame::build(&route, &transport, &mut built);
        assert_eq!(built, expected, "{}: frame bytes", v.name);
        assert_eq!(
            &built[built.len() - 4..],
            &hex(&f("icrc"))[..],
            "{}: ICRC",
            v.name
        );
        let parsed = frame::parse(&expected).expect("parse");
        assert!(parsed.icrc_ok, "{}", v.name);
        assert_eq!(parsed.transport, &transport[..]);
        Packet::parse(parsed.transport).expect("transport headers");
        let mut corrupt = expected.clone();
        let last = corrupt.len() - 5;
        corrupt[last] ^= 0x40;
        assert!(
            !frame::parse(&corrupt).expect("parse").icrc_ok,
            "{}",
            v.name
        );
    }
}
