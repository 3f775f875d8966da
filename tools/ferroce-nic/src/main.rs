// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! `ferroce-nic`: the emulated ferroce RDMA NIC as a vfio-user server, and its control client.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use ferroce_nic::control;
use ferroce_nic::device::DeviceConfig;
use ferroce_nic::device_thread::spawn_device_thread;
use ferroce_nic::engine::faults::FaultConfig;
use ferroce_nic::function::Function;
use ferroce_nic::functions::{self, parse_mac, Functions, Limits, PfPaths, VfSpec};
use ferroce_nic::poll_cpu::PollCpu;
use ferroce_nic::port::{Port, PortConfig, PortStats, WireSpec};
use ferroce_nic::server;
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
        /// fault delay RATE [US] | fault seed N | fault direction both|tx|rx |
        /// fault frames all|requests|responses | fault off; on the
        /// PF's socket of a NIC with VFs also functions | vf N limits KEY=VALUE... | vf N COMMAND.
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
    /// Do not offer XRC (`CAP_XRC`): XRC QPs and SRQs are refused.
    #[arg(long)]
    no_xrc: bool,
    /// Do not offer on-demand paging (`CAP_ODP`): on-demand MRs are refused.
    #[arg(long)]
    no_odp: bool,
    /// Polling doorbell records: after activity, poll without sleeping for this long (µs),
    /// then sleep until a doorbell.
    #[arg(long, default_value_t = ferroce_nic::records::PollWindow::SPIN.as_micros() as u32, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    poll_spin_us: u32,
    /// Pin the device thread to this CPU and, while any QP's doorbell record is watched, poll
    /// the records there without pause, never yielding or sleeping: record-mode WRs then cost
    /// no MMIO write at all. Only worth it where the CPU has nothing else to run (the vCPUs
    /// elsewhere, e.g. QEMU under `taskset`). Overrides --poll-spin-us.
    #[arg(long, value_name = "CPU", value_parser = PollCpu::parse)]
    poll_cpu: Option<PollCpu>,
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
    /// Virtual functions besides the physical one (each a PCI function of its own on its own
    /// vfio-user socket, sharing this NIC's port and device thread). Unless `--vf` says
    /// otherwise, VF K serves on SOCKET.vfK with MAC + K in its last byte, and its netdev
    /// sockets are the PF's with `.vfK` appended.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=ferroce_nic::functions::MAX_VFS as i64))]
    functions: u16,
    /// A virtual function's options and limits: `K:KEY=VALUE,...`, keys socket, mac,
    /// netdev-socket, netdev-peer, control, trace, pcap and the limits qp, cq, mr, srq, pages
    /// (page-list entries of its MRs and rings) and db_rate (doorbells per second).
    #[arg(long, value_name = "K:SPEC", value_parser = VfSpec::parse)]
    vf: Vec<(usize, VfSpec)>,
    /// The physical function's limits (`qp=N,cq=N,mr=N,srq=N,pages=N,db_rate=N`).
    #[arg(long, value_name = "LIMITS")]
    limits: Option<Limits>,
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
    /// Frames faults apply to, by their BTH opcode: all, requests or responses (ACKs, NAKs,
    /// READ responses, atomic ACKs).
    #[arg(long, default_value = "all", value_parser = ["all", "requests", "responses"])]
    fault_frames: String,
}

fn parse_rate(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|e| format!("{text}: {e}"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not a rate in 0..=1"))
    }
}

/// Every function's configuration and options: the PF's first, then VF 1..=N.
fn functions_of(
    args: &ServeArgs,
    pf: DeviceConfig,
) -> anyhow::Result<(Vec<DeviceConfig>, Vec<VfSpec>)> {
    let count = usize::from(args.functions);
    let mut specs = vec![VfSpec::default(); count];
    for (k, spec) in &args.vf {
        anyhow::ensure!(
            *k <= count,
            "--vf {k}: the NIC has {count} VFs (--functions)"
        );
        specs[k - 1] = spec.clone();
    }
    let paths = PfPaths {
        socket: args.socket.clone(),
        mac: args.mac,
        netdev_socket: args.netdev_socket.clone(),
        netdev_peer: args.netdev_peer.clone(),
    };
    let specs: Vec<VfSpec> = specs
        .into_iter()
        .enumerate()
        .map(|(i, spec)| spec.derive(i + 1, &paths))
        .collect();
    let pf = args.limits.unwrap_or_default().applied_to(&pf);
    let mut configs = vec![pf.clone()];
    for spec in &specs {
        let mut config = spec.limits.applied_to(&pf);
        config.mac = spec.mac.unwrap_or(pf.mac);
        configs.push(config);
    }
    let mut macs: Vec<[u8; 6]> = configs.iter().map(|c| c.mac).collect();
    macs.sort();
    macs.dedup();
    anyhow::ensure!(
        macs.len() == configs.len(),
        "two functions have the same MAC"
    );
    functions::lay_out(&mut configs);
    Ok((configs, specs))
}

/// Starts a function's trace, capture and control socket.
fn observe(
    nic: &Arc<Function>,
    trace: Option<&PathBuf>,
    pcap: Option<&PathBuf>,
    control: Option<&PathBuf>,
    functions: Option<Arc<Functions>>,
) -> anyhow::Result<()> {
    let mac = nic.lock().core.config().mac;
    if let Some(path) = trace {
        nic.trace
            .start(path)
            .with_context(|| format!("trace file {}", path.display()))?;
    }
    if let Some(path) = pcap {
        nic.trace
            .capture
            .start(path, mac)
            .with_context(|| format!("capture file {}", path.display()))?;
    }
    if let Some(path) = control {
        control::spawn_control_server(nic.clone(), path, functions)?;
    }
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    use std::sync::atomic::Ordering;
    let config = DeviceConfig {
        mac: args.mac,
        msix_vectors: args.msix_vectors,
        cmd_timeout_ms: args.cmd_timeout_ms,
        qid_table_len: args.qid_table_len,
        db_record: !args.no_db_record,
        xrc: !args.no_xrc,
        odp: !args.no_odp,
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
        .and_then(|()| faults.apply_command(&["frames", &args.fault_frames]))
        .map_err(anyhow::Error::msg)?;
    let (configs, specs) = functions_of(&args, config)?;
    let stats: Vec<Arc<PortStats>> = configs.iter().map(|_| Arc::default()).collect();
    let mut port = Port::bind(
        PortConfig {
            netdev_socket: args.netdev_socket.clone(),
            netdev_peer: args.netdev_peer.clone(),
            wire: args.wire.clone(),
        },
        stats[0].clone(),
    )?;
    for spec in &specs {
        port.add_function(spec.netdev_socket.as_deref(), spec.netdev_peer.clone())?;
    }
    let nics = functions::make_functions(&configs, faults, &stats, |k| Box::new(port.sink(k)))
        .context("the device thread's wake-up")?;
    port.spawn(&nics)?;
    let pf = nics[0].clone();
    pf.host.stall.store(args.stall, Ordering::Relaxed);
    pf.host
        .bogus_version
        .store(args.bogus_version, Ordering::Relaxed);
    pf.host.lies.arm(args.lie, u32::MAX);
    if args.port_down {
        nics.iter()
            .for_each(|nic| nic.lock().set_initial_port_state(false));
    }
    let functions = (nics.len() > 1).then(|| {
        Arc::new(Functions {
            nics: nics.clone(),
            slices: configs.clone(),
        })
    });
    observe(
        &pf,
        args.trace.as_ref(),
        args.pcap.as_ref(),
        args.control.as_ref(),
        functions,
    )?;
    for (nic, spec) in nics[1..].iter().zip(&specs) {
        observe(
            nic,
            spec.trace.as_ref(),
            spec.pcap.as_ref(),
            spec.control.as_ref(),
            None,
        )?;
    }
    spawn_device_thread(nics.clone(), args.poll_cpu)?;
    for (nic, spec) in nics[1..].iter().zip(specs) {
        let nic = nic.clone();
        let socket = spec.socket.unwrap_or_default();
        let vectors = args.msix_vectors;
        std::thread::Builder::new()
            .name(format!(
                "ferroce-vfio-vf{}",
                nic.lock().core.config().function.index
            ))
            .spawn(move || {
                if let Err(e) = server::serve(nic, &socket, vectors) {
                    tracing::error!("VF on {}: {e:#}", socket.display());
                    std::process::exit(1);
                }
            })?;
    }
    server::serve(pf, &args.socket, args.msix_vectors)
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
