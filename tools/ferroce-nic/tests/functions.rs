// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! One NIC, many functions: the host sets each function's limits within its slice of the NIC.

mod common;

use std::sync::Arc;

use ferroce_hw::*;

const MAC_B: [u8; 6] = [0x52, 0x54, 0, 0, 0, 2];

#[test]
fn the_host_sets_a_functions_limits_within_its_slice() {
    use ferroce_nic::device::DeviceConfig;
    use ferroce_nic::function::Function;
    use ferroce_nic::functions::{lay_out, Functions};

    let mut configs = vec![DeviceConfig::default(); 2];
    configs[1].mac = MAC_B;
    configs[1].max_qp = 64;
    lay_out(&mut configs);
    let nics: Vec<Arc<Function>> = configs
        .iter()
        .map(|c| Function::new(c.clone()).expect("a function"))
        .collect();
    let host = Functions {
        nics: nics.clone(),
        slices: configs,
    };
    let reg = |n: usize, offset: usize| {
        let mut value = [0u8; 4];
        nics[n].lock().bar0_read(offset as u64, &mut value);
        u32::from_le_bytes(value)
    };
    assert_eq!(reg(1, REG_MAX_QP), 64);
    let ok = |line: &str| {
        let reply = host.execute(line).expect("a functions command");
        assert_eq!(reply["ok"], true, "{line}: {reply}");
        reply
    };
    // Not enabled: at once, in the capability registers.
    let reply = ok("vf 1 limits qp=32 cq=8 db_rate=500");
    assert_eq!(reply["function"]["limits"]["qp"], 32);
    assert_eq!((reg(1, REG_MAX_QP), reg(1, REG_MAX_CQ)), (32, 8));
    assert_eq!(nics[1].schedule.stats().db_rate, 500);
    assert_eq!(reg(0, REG_MAX_QP), 1024, "the PF's changed too");
    // Beyond the slice, or no such function: refused, nothing changed.
    let reply = host.execute("vf 1 limits qp=65").expect("reply");
    assert_eq!(reply["ok"], false);
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("holds 64")),
        "{reply}"
    );
    assert_eq!(reg(1, REG_MAX_QP), 32);
    for bad in ["vf 2 counters", "vf x", "vf 1 limits size=3"] {
        assert_eq!(host.execute(bad).expect("reply")["ok"], false, "{bad}");
    }
    // The list, and any other command on one function.
    let list = ok("functions");
    let kinds: Vec<_> = list["functions"]
        .as_array()
        .expect("list")
        .iter()
        .map(|f| {
            (
                f["kind"].clone(),
                f["device_id"].clone(),
                f["slot"]["qpn_base"].clone(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("pf".into(), "0xfe01".into(), 0.into()),
            ("vf".into(), "0xfe02".into(), 1024.into())
        ]
    );
    assert!(ok("vf 1 counters")["counters"]["doorbells"].is_u64());
    assert_eq!(host.execute("counters"), None, "not a functions command");
}

#[test]
fn limits_of_an_enabled_function_wait_for_its_reset() {
    let mut g = common::Guest::with_config(|c| c.max_cq = 8);
    g.bring_up();
    let mut config = g.dev.core.config().clone();
    config.max_cq = 4;
    g.dev.core.set_limits(config);
    assert_eq!(g.r32(REG_MAX_CQ), 8, "while the driver holds the function");
    assert_eq!(g.dev.core.pending_limits().map(|c| c.max_cq), Some(4));
    g.reset();
    assert_eq!(g.r32(REG_MAX_CQ), 4);
    assert!(g.dev.core.pending_limits().is_none());
}

/// A guest steers its own function's wire faults (`ctl fault ...`, which the harness relays
/// from the guest), never another function's.
#[test]
fn wire_faults_are_each_functions_own() {
    use ferroce_nic::device::DeviceConfig;
    use ferroce_nic::engine::faults::FaultConfig;
    use ferroce_nic::engine::wire::NullSink;
    use ferroce_nic::functions::{lay_out, make_functions};
    use ferroce_nic::port::PortStats;

    let mut configs = vec![DeviceConfig::default(); 3];
    configs[1].mac = MAC_B;
    configs[2].mac = [0x52, 0x54, 0, 0, 0, 3];
    lay_out(&mut configs);
    let stats: Vec<Arc<PortStats>> = configs.iter().map(|_| Arc::default()).collect();
    let start = FaultConfig {
        duplicate: 0.5,
        ..FaultConfig::default()
    };
    let nics = make_functions(&configs, start, &stats, |_| Box::new(NullSink)).unwrap();
    let reply = ferroce_nic::control::execute(&nics[1], "fault drop 1");
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(nics[1].faults.config().drop, 1.0);
    for k in [0, 2] {
        let config = nics[k].faults.config();
        assert_eq!(
            (config.drop, config.duplicate),
            (0.0, 0.5),
            "function {k}'s faults changed with function 1's"
        );
    }
}

/// `ctl cpu`: the NIC process's CPU time, user and system, which only grows (a benchmark reads
/// it around a run, for the NICs' CPU per GiB moved).
#[test]
fn the_nics_cpu_time_is_read_and_grows() {
    use ferroce_nic::device::DeviceConfig;
    use ferroce_nic::engine::faults::FaultConfig;
    use ferroce_nic::engine::wire::NullSink;
    use ferroce_nic::functions::make_functions;
    use ferroce_nic::port::PortStats;

    let configs = vec![DeviceConfig::default()];
    let stats: Vec<Arc<PortStats>> = vec![Arc::default()];
    let nics = make_functions(&configs, FaultConfig::default(), &stats, |_| {
        Box::new(NullSink)
    })
    .unwrap();
    let total = |reply: &serde_json::Value| {
        assert_eq!(reply["ok"], true, "{reply}");
        let cpu = &reply["cpu"];
        cpu["user_us"].as_u64().expect("user_us") + cpu["system_us"].as_u64().expect("system_us")
    };
    let before = total(&ferroce_nic::control::execute(&nics[0], "cpu"));
    // Work of this process's own until the figure moves: it never goes back, and within a
    // bound no machine's load reaches, it grows.
    let start = std::time::Instant::now();
    let mut x = 0u64;
    let after = loop {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let now = total(&ferroce_nic::control::execute(&nics[0], "cpu"));
        assert!(
            now >= before,
            "cpu time went back: {before} us, then {now} us"
        );
        if now > before || start.elapsed() > std::time::Duration::from_secs(60) {
            break now;
        }
    };
    assert!(
        after > before,
        "cpu time still {before} us after a minute of work"
    );
}
