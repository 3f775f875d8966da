// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `ferroce-nic`: the emulated ferroce RDMA NIC as a vfio-user server, and its control client.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use ferroce_nic::control;
use ferroce_nic::device::DeviceConfig;
use ferroce_nic::engine::faults::{FaultConfig, FaultControl};
use ferroce_nic::engine::wire::{FrameSink, NullSink};
use ferroce_nic::port::{Port, PortConfig, PortStats, WireSpec};
use ferroce_nic::server::{self, Nic};
use std::sync::Arc;

#[derive(Parser)]
#[command(
    version,
    about = "Emulated ferroce RoCEv2 NIC (vfio-user device for QEMU)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the device on a vfio-user socket (QEMU: -device vfio-user-pci).
    Serve(Box<ServeArgs>),
    /// Send a host control command to a running device and print the JSON reply.
    Ctl {
        /// Control socket of the device.
        #[arg(long)]
        control: PathBuf,
        /// Command and arguments: counters | gids | objects | status | stall on|off |
        /// hang on|off | bogus-version on|off | lie KIND [COUNT] | lie off | port up|down | fatal |
        /// trace start PATH | trace stop | trace mark NAME | pcap start PATH | pcap stop |
        /// fault | fault drop|duplicate|reorder|corrupt RATE |
        /// fault delay RATE [US] | fault seed N | fault direction both|tx|rx | fault off.
        #[arg(required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Show a running device's counters per second (doorbells, WQE fetches and pushes, CQEs,
    /// interrupts, packets, retransmits, drops, NAKs), like top.
    Watch {
        /// Control socket of the device.
        #[arg(long)]
        control: PathBuf,
        /// Seconds between two lines.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Stop after this many lines (default: until the device goes away).
        #[arg(long)]
        count: Option<u64>,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// vfio-user socket path (a stale socket is removed).
    #[arg(long)]
    socket: PathBuf,
    /// Host control socket path.
    #[arg(long)]
    control: Option<PathBuf>,
    /// Write a JSON-lines trace of MMIO, doorbells, DMA, CQEs, EQEs and interrupts here.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write a pcapng capture of every frame the port sends and receives here (Wireshark).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// MAC address of the companion virtio-net NIC, reported by QUERY_PORT.
    #[arg(long, default_value = "52:54:00:12:34:56", value_parser = parse_mac)]
    mac: [u8; 6],
    /// Number of MSI-X vectors (EQ 0 async, EQ 1 commands, completion EQs).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(2..=64))]
    msix_vectors: u16,
    /// Command timeout reported to the driver (`REG_CMD_TIMEOUT_MS`), in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=60_000))]
    cmd_timeout_ms: u32,
    /// Local QIDs per context (`REG_QID_TABLE_LEN`).
    #[arg(long, default_value_t = ferroce_hw::QID_TABLE_LEN as u32, value_parser = clap::value_parser!(u32).range(1..=ferroce_hw::QID_TABLE_LEN as i64))]
    qid_table_len: u32,
    /// Hand out the lowest free QP number, so that a destroyed QP's number is reused at once
    /// (the scenarios that prove a reused number gets nothing of its former owner); by
    /// default numbers are handed out in turn, as RNICs do.
    #[arg(long)]
    qpn_lowest_free: bool,
    /// Do not offer doorbell records polled by the device (`CAP_DB_RECORD`): QPs then need
    /// doorbell writes.
    #[arg(long)]
    no_db_record: bool,
    /// Polling doorbell records: after activity, poll without sleeping for this long (µs),
    /// then sleep until a doorbell.
    #[arg(long, default_value_t = ferroce_nic::records::PollWindow::SPIN.as_micros() as u32, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    poll_spin_us: u32,
    /// Start stalled (commands and doorbells are not processed).
    #[arg(long)]
    stall: bool,
    /// Start reporting a bogus interface version.
    #[arg(long)]
    bogus_version: bool,
    /// Lie in every CQE or EQE of this kind (well-formed falsehoods the driver must catch).
    #[arg(long, value_enum)]
    lie: Option<ferroce_nic::lies::Lie>,
    /// Start with the port down.
    #[arg(long)]
    port_down: bool,
    /// Converged port: bind this datagram socket for the virtio-net side (QEMU's
    /// `-netdev dgram` sends here).
    #[arg(long)]
    netdev_socket: Option<PathBuf>,
    /// Converged port: QEMU's netdev socket; non-RoCE frames from the segment go there.
    #[arg(long)]
    netdev_peer: Option<PathBuf>,
    /// Converged port: the segment side. `unix:SOCKET,PEER` (bind SOCKET, send to PEER: the
    /// harness's switch, QEMU's `-netdev dgram` with unix addresses), `tap:NAME` (a Linux TAP
    /// device, created if missing, for a bridge, Open vSwitch or VXLAN) or `udp:LOCAL,REMOTE`
    /// (`IP:PORT` each: one frame per UDP datagram, as QEMU's `-netdev dgram` with inet
    /// addresses).
    #[arg(long, value_name = "SPEC")]
    wire: Option<WireSpec>,
    /// Fault injection on the wire side: drop rate (0..=1).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_drop: f64,
    /// Duplicate rate.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_duplicate: f64,
    /// Reorder rate (a frame is held back until the next one passed).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_reorder: f64,
    /// Corrupt rate (one bit flipped after the Ethernet header).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_corrupt: f64,
    /// Delay rate.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    fault_delay: f64,
    /// Delay of delayed frames, in microseconds.
    #[arg(long, default_value_t = 1000)]
    fault_delay_us: u64,
    /// Seed of the fault stream (same seed and traffic, same faults).
    #[arg(long, default_value_t = 0)]
    fault_seed: u64,
    /// Directions faults apply to: both, tx (frames the engine sends) or rx.
    #[arg(long, default_value = "both", value_parser = ["both", "tx", "rx"])]
    fault_direction: String,
}

fn parse_rate(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|e| format!("{text}: {e}"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not a rate in 0..=1"))
    }
}

fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    let bytes: Vec<u8> = text
        .split(':')
        .map(|part| u8::from_str_radix(part, 16).map_err(|e| format!("{text}: {e}")))
        .collect::<Result<_, _>>()?;
    bytes
        .try_into()
        .map_err(|_| format!("{text}: expected 6 bytes"))
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    use std::sync::atomic::Ordering;
    let config = DeviceConfig {
        mac: args.mac,
        msix_vectors: args.msix_vectors,
        cmd_timeout_ms: args.cmd_timeout_ms,
        qid_table_len: args.qid_table_len,
        db_record: !args.no_db_record,
        poll_spin_us: args.poll_spin_us,
        qpn_lowest_free: args.qpn_lowest_free,
        ..DeviceConfig::default()
    };
    let mut faults = FaultConfig {
        drop: args.fault_drop,
        duplicate: args.fault_duplicate,
        reorder: args.fault_reorder,
        corrupt: args.fault_corrupt,
        delay: args.fault_delay,
        delay_us: args.fault_delay_us,
        seed: args.fault_seed,
        ..FaultConfig::default()
    };
    faults
        .apply_command(&["direction", &args.fault_direction])
        .map_err(anyhow::Error::msg)?;
    let stats = Arc::new(PortStats::default());
    let port = Port::bind(
        PortConfig {
            netdev_socket: args.netdev_socket.clone(),
            netdev_peer: args.netdev_peer.clone(),
            wire: args.wire.clone(),
        },
        stats.clone(),
    )?;
    let sink: Box<dyn FrameSink> = match port.sink()? {
        Some(sink) => Box::new(sink),
        None => Box::new(NullSink),
    };
    let nic = Nic::with_port(config, sink, FaultControl::new(faults), stats);
    port.spawn(nic.clone())?;
    nic.host.stall.store(args.stall, Ordering::Relaxed);
    nic.host
        .bogus_version
        .store(args.bogus_version, Ordering::Relaxed);
    nic.host.lies.arm(args.lie, u32::MAX);
    if args.port_down {
        nic.lock().set_initial_port_state(false);
    }
    if let Some(path) = &args.trace {
        nic.trace
            .start(path)
            .with_context(|| format!("trace file {}", path.display()))?;
    }
    if let Some(path) = &args.pcap {
        nic.trace
            .capture
            .start(path, args.mac)
            .with_context(|| format!("capture file {}", path.display()))?;
    }
    if let Some(path) = &args.control {
        control::spawn_control_server(nic.clone(), path)?;
    }
    nic.spawn_device_thread()?;
    server::serve(nic, &args.socket, args.msix_vectors)
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve(args) => serve(*args),
        Command::Ctl { control, command } => {
            let reply = control::request(&control, &command.join(" "))?;
            println!("{}", serde_json::to_string_pretty(&reply)?);
            if reply.get("ok").and_then(|v| v.as_bool()) != Some(true) {
                // The reply already says why.
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Watch {
            control,
            interval,
            count,
        } => {
            let interval = std::time::Duration::try_from_secs_f64(interval)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| anyhow::anyhow!("--interval {interval}: not a positive number"))?;
            control::watch(&control, interval, count, &mut std::io::stdout())
        }
    }
}
