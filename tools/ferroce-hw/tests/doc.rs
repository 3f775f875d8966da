// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Checks Documentation/infiniband/ferroce-hw.rst against hw.rs.

use ferroce_hw::*;

const DOC: &str = include_str!("../../../Documentation/infiniband/ferroce-hw.rst");

fn hex(text: &str) -> Option<usize> {
    usize::from_str_radix(text.trim_start_matches("0x"), 16).ok()
}

const REGISTERS: &[(&str, usize)] = &[
    ("REG_ID", REG_ID),
    ("REG_IF_VERSION", REG_IF_VERSION),
    ("REG_CAPS", REG_CAPS),
    ("REG_NUM_MSIX", REG_NUM_MSIX),
    ("REG_MAX_QP", REG_MAX_QP),
    ("REG_MAX_CQ", REG_MAX_CQ),
    ("REG_MAX_MR", REG_MAX_MR),
    ("REG_MAX_SRQ", REG_MAX_SRQ),
    ("REG_MAX_AH", REG_MAX_AH),
    ("REG_MAX_EQ", REG_MAX_EQ),
    ("REG_GID_TABLE_LEN", REG_GID_TABLE_LEN),
    ("REG_NUM_DB_PAGES", REG_NUM_DB_PAGES),
    ("REG_MAX_LOG_QUEUE", REG_MAX_LOG_QUEUE),
    ("REG_MAX_SGE", REG_MAX_SGE),
    ("REG_MAX_INLINE", REG_MAX_INLINE),
    ("REG_MAX_MR_PAGES", REG_MAX_MR_PAGES),
    ("REG_DB_AREA_OFFSET", REG_DB_AREA_OFFSET),
    ("REG_COUNTERS_OFFSET", REG_COUNTERS_OFFSET),
    ("REG_NUM_COUNTERS", REG_NUM_COUNTERS),
    ("REG_QID_TABLE_LEN", REG_QID_TABLE_LEN),
    ("REG_CMD_TIMEOUT_MS", REG_CMD_TIMEOUT_MS),
    ("REG_DEV_CTRL", REG_DEV_CTRL),
    ("REG_DEV_STATUS", REG_DEV_STATUS),
    ("REG_FATAL_CODE", REG_FATAL_CODE),
    ("REG_SCRATCH", REG_SCRATCH),
    ("REG_CMDQ_SQ_BASE_LO", REG_CMDQ_SQ_BASE_LO),
    ("REG_CMDQ_SQ_BASE_HI", REG_CMDQ_SQ_BASE_HI),
    ("REG_CMDQ_CQ_BASE_LO", REG_CMDQ_CQ_BASE_LO),
    ("REG_CMDQ_CQ_BASE_HI", REG_CMDQ_CQ_BASE_HI),
    ("REG_CMDQ_LOG_SIZE", REG_CMDQ_LOG_SIZE),
    ("REG_CMDQ_CTRL", REG_CMDQ_CTRL),
    ("REG_CMDQ_DB", REG_CMDQ_DB),
    ("REG_CMDQ_CI", REG_CMDQ_CI),
    ("REG_CMDQ_STATUS", REG_CMDQ_STATUS),
    ("REG_EQ_SETUP_BASE_LO", REG_EQ_SETUP_BASE_LO),
    ("REG_EQ_SETUP_BASE_HI", REG_EQ_SETUP_BASE_HI),
    ("REG_EQ_SETUP_LOG_SIZE", REG_EQ_SETUP_LOG_SIZE),
    ("REG_EQ_SETUP_VECTOR", REG_EQ_SETUP_VECTOR),
    ("REG_EQ_SETUP_CTRL", REG_EQ_SETUP_CTRL),
    ("REG_EQ_SETUP_STATUS", REG_EQ_SETUP_STATUS),
    ("REG_EQ_DB", REG_EQ_DB),
];

#[test]
fn register_table_matches() {
    let rows: Vec<(&str, usize)> = DOC
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let offset = hex(words.next()?)?;
            name.starts_with("REG_").then_some((name, offset))
        })
        .collect();
    assert_eq!(
        rows, REGISTERS,
        "the register table of ferroce-hw.rst differs from hw.rs"
    );
}

#[test]
fn doorbell_page_table_matches() {
    for (name, offset) in [
        ("DB_SQ", DB_SQ),
        ("DB_RQ", DB_RQ),
        ("DB_SRQ", DB_SRQ),
        ("DB_CQ_ARM", DB_CQ_ARM),
        ("DB_PUSH", DB_PUSH),
        ("push", PUSH_WINDOW_OFFSET),
    ] {
        let row = DOC
            .lines()
            .find(|line| line.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(
            row.split_whitespace().next().and_then(hex),
            Some(offset),
            "{name}"
        );
    }
}

#[test]
fn counter_table_matches() {
    for (index, name) in COUNTER_NAMES
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
    {
        let name = name.to_str().expect("counter names are ASCII");
        let row = format!("{index:>2}  {name:<20}");
        assert!(
            DOC.lines().any(|line| line.starts_with(&row)),
            "counter {index} {name} not documented"
        );
    }
}

#[test]
fn command_table_matches() {
    for opcode in CMD_OPCODES {
        let row = format!("{opcode:#06x}  {:<18}", command_name(opcode).to_uppercase());
        assert!(
            DOC.lines().any(|line| line.starts_with(&row)),
            "command {row:?} not documented"
        );
    }
}

#[test]
fn identity_and_layout_constants_are_documented() {
    for needle in [
        format!("``{PCI_VENDOR_ID:#06x}``"),
        format!("``{PCI_DEVICE_ID:#06x}``"),
        format!("``{PCI_VF_DEVICE_ID:#06x}`` for a virtual function"),
        format!("``{PCI_CLASS_CODE:#08x}``"),
        format!("``{ID_MAGIC:#010x}``"),
        format!("``{IF_VERSION:#010x}``"),
        format!("{} KiB", BAR0_SIZE / 1024),
        format!("{} doorbell pages of 4 KiB", NUM_DB_PAGES),
        format!("A CQE is {} bytes", Cqe::SIZE),
        format!("An EQE is {} bytes", Eqe::SIZE),
        format!("({CMD_ENTRY_SIZE}-byte entries"),
        format!("payload, {CMD_PAYLOAD_SIZE} bytes"),
        "63 u8 owner".to_string(),
    ] {
        assert!(DOC.contains(&needle), "{needle:?} not in ferroce-hw.rst");
    }
}
