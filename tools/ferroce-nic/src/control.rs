// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Host control: a unix socket taking one command line per connection and answering one JSON
//! document, and the client the `ctl` subcommand uses.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context as _;
use ferroce_hw::*;
use serde_json::{json, Value};

use crate::device::Device;
use crate::function::Function;
use crate::functions::Functions;
use crate::lies::Lie;

/// Longest command line accepted.
const MAX_LINE: u64 = 4096;

/// The commands, for help texts.
pub const COMMANDS: &str = "counters | gids | latency [reset] | memory | cpu | objects | status | stall on|off | hang on|off | \
bogus-version on|off | lie KIND [COUNT] | lie off | port up|down | fatal | trace start PATH | trace stop | trace mark NAME | \
pcap start PATH | pcap stop | fault | fault drop|duplicate|reorder|corrupt RATE | fault delay RATE [US] | fault seed N | \
fault direction both|tx|rx | fault frames all|requests|responses | fault off; with VFs, on the PF's socket: functions | vf N limits KEY=VALUE... | \
vf N COMMAND";

fn on_off(arg: Option<&str>) -> Result<bool, String> {
    match arg {
        Some("on") | Some("1") | None => Ok(true),
        Some("off") | Some("0") => Ok(false),
        Some(other) => Err(format!("expected on|off, got {other:?}")),
    }
}

fn gid_text(gid: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*gid).to_string()
}

fn mac_text(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The GID table as JSON.
pub fn gids_json(device: &Device) -> Value {
    let entries: Vec<Value> = device
        .core
        .objects()
        .gids()
        .map(|(index, e)| {
            json!({
                "index": index,
                "gid": gid_text(&e.gid),
                "type": if e.gid_type == GID_TYPE_ROCE_V1 { "RoCEv1" } else { "RoCEv2" },
                "family": if e.family == GID_FAMILY_IPV4 { "ipv4" } else { "ipv6" },
                "mac": mac_text(&e.mac),
                "vlan": if e.vlan == VLAN_NONE { Value::Null } else { Value::from(e.vlan) },
            })
        })
        .collect();
    json!({ "gids": entries })
}

/// The object tables as JSON.
pub fn objects_json(nic: &Function, device: &Device) -> Value {
    let core = &device.core;
    let eqs: Vec<Value> = core
        .objects()
        .eqs()
        .iter()
        .map(|(n, eq)| eq.to_json(n))
        .collect();
    let cqs: Vec<Value> = core
        .objects().cqs()
        .iter()
        .map(|(n, cq)| json!({"cqn": n, "log_size": cq.buf.ring.log_size(), "pi": cq.pi, "eqn": cq.eqn, "arm": cq.arm, "error": cq.error, "moder_count": cq.moder_count, "moder_period_us": cq.moder_period_us, "users": cq.users}))
        .collect();
    let qps: Vec<Value> = core
        .objects().qps()
        .iter()
        .map(|(n, qp)| {
            json!({"qpn": n, "type": u8::from(qp.qp_type), "state": u8::from(qp.state), "pd": qp.pd, "sq_cqn": qp.sq_cqn, "rq_cqn": qp.rq_cqn,
                   "srqn": if qp.srqn == NONE { Value::Null } else { Value::from(qp.srqn) },
                   "sq": qp.sq.as_ref().map(|sq| json!({"pi": sq.pi, "fetch": sq.fetch, "ci": sq.ci})), "xrcd": qp.xrcd, "inflight": qp.inflight.len(),
                   "dest_qpn": qp.attrs.dest_qpn, "sgid_index": qp.attrs.sgid_index})
        })
        .collect();
    let mrs: Vec<Value> = core
        .objects().mrs()
        .iter()
        .map(|(_, mr)| json!({"key": mr.key, "pd": mr.pd, "access": mr.access, "iova": mr.iova, "length": mr.length, "fast_reg": mr.fast_reg_max_pages.is_some()}))
        .collect();
    let ahs: Vec<Value> = core
        .objects().ahs()
        .iter()
        .map(|(n, ah)| json!({"ah": n, "pd": ah.pd, "sgid_index": ah.sgid_index, "dgid": gid_text(&ah.dgid), "dmac": mac_text(&ah.dmac)}))
        .collect();
    let srqs: Vec<Value> = core
        .objects().srqs()
        .iter()
        .map(|(n, srq)| json!({"srqn": n, "log_size": srq.buf.ring.log_size(), "ci": srq.ci, "limit": srq.limit, "users": srq.users}))
        .collect();
    let contexts: Vec<Value> = core
        .objects()
        .contexts()
        .map(|(n, c)| {
            let qids: Vec<Value> = c
                .qids
                .iter()
                .enumerate()
                .filter_map(|(local, e)| {
                    e.map(|e| json!({"local": local, "kind": e.kind, "global": e.global}))
                })
                .collect();
            json!({"ctx": n, "qids": qids})
        })
        .collect();
    let engine = json!({
        "faults": nic.faults.config(), "fault_stats": nic.faults.stats(),
        "rx_queue": nic.port_rx.len(),
    });
    json!({
        "eqs": eqs, "cqs": cqs, "qps": qps, "mrs": mrs, "ahs": ahs, "srqs": srqs, "contexts": contexts,
        "cmdq": core.cmdq(), "registers": core.regs(), "port": core.port(), "dma_regions": nic.dma.regions(),
        "engine": engine,
    })
}

/// The NIC process's memory (from `/proc/self/status`, KiB: for every function it serves)
/// beside what this function's guest created: objects, registered bytes and the page-list
/// entries the NIC holds for them.
pub fn memory_json(device: &Device) -> Value {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let objects = device.core.objects();
    let registered: u64 = objects
        .mrs()
        .iter()
        .map(|(_, mr)| mr.length)
        .fold(0, u64::saturating_add);
    json!({
        "process_kib": {
            "vm_rss": kib("VmRSS"), "vm_hwm": kib("VmHWM"), "rss_anon": kib("RssAnon"),
            "rss_file": kib("RssFile"), "rss_shmem": kib("RssShmem"),
        },
        "objects": {
            "qps": objects.qps().iter().count(), "cqs": objects.cqs().iter().count(),
            "mrs": objects.mrs().iter().count(), "registered_bytes": registered,
            "translation_entries": objects.translation_entries(),
        },
    })
}

/// The CPU time the NIC process has used, every thread of it (for every function it serves),
/// in microseconds of user and system time (`getrusage`): a benchmark reads it around a run
/// for the NIC's CPU per byte moved.
fn cpu_json() -> Result<Value, String> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; RUSAGE_SELF names this process.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return Err(format!("getrusage: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: getrusage succeeded, so it wrote the whole struct (and zeroed is valid anyway).
    let usage = unsafe { usage.assume_init() };
    let us = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000 + t.tv_usec as u64;
    Ok(json!({ "cpu": { "user_us": us(usage.ru_utime), "system_us": us(usage.ru_stime) } }))
}

/// Executes one control command.
pub fn execute(nic: &Function, line: &str) -> Value {
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or("");
    let arg = words.next();
    let host = &nic.host;
    let result: Result<Value, String> = (|| match command {
        "counters" => {
            let map: serde_json::Map<String, Value> = nic
                .counters
                .named()
                .into_iter()
                .map(|(k, v)| (k.to_string(), Value::from(v)))
                .collect();
            Ok(json!({ "counters": map }))
        }
        "gids" => Ok(gids_json(&nic.lock())),
        "latency" => {
            let mut device = nic.lock();
            match arg {
                None => Ok(json!({ "latency": device.core.latency().summary() })),
                Some("reset") => {
                    device.core.latency_mut().reset();
                    Ok(Value::Null)
                }
                Some(other) => Err(format!("expected latency [reset], got {other:?}")),
            }
        }
        "objects" => Ok(objects_json(nic, &nic.lock())),
        "memory" => Ok(memory_json(&nic.lock())),
        "cpu" => cpu_json(),
        "status" => {
            let device = nic.lock();
            Ok(json!({
                "status": device.core.status(), "fatal_code": device.core.regs().fatal_code(),
                "stall": host.stall.load(Ordering::Relaxed), "hang": host.hang.load(Ordering::Relaxed),
                "bogus_version": host.bogus_version.load(Ordering::Relaxed),
                "lie": host.lies.armed().map(|(lie, left)| json!({"kind": lie.name(), "left": left})),
                "lies_told": host.lies.told(),
                "bus_master": nic.dma.bus_master(), "dma_blocked": nic.dma.blocked(),
                "port_state": device.core.port().state(), "mac": mac_text(&device.core.config().mac),
                "port": {
                    "to_engine": nic.port_stats.to_engine.load(Ordering::Relaxed),
                    "to_host": nic.port_stats.to_host.load(Ordering::Relaxed),
                    "from_host": nic.port_stats.from_host.load(Ordering::Relaxed),
                    "switched": nic.port_stats.switched.load(Ordering::Relaxed),
                    "lost": nic.port_stats.lost.load(Ordering::Relaxed),
                    "wire": nic.port_stats.wire.get(),
                    "cable": nic.port_stats.cable.get().map(|c| c.counts()),
                },
            }))
        }
        "lie" => {
            let lie = match arg {
                Some("off") => None,
                Some(name) => Some(Lie::parse(name).ok_or_else(|| {
                    let kinds: Vec<&str> = Lie::ALL.iter().map(|l| l.name()).collect();
                    format!("unknown lie {name:?}; kinds: {}", kinds.join(" "))
                })?),
                None => return Err("expected lie KIND [COUNT] | lie off".into()),
            };
            let count = match words.next() {
                Some(n) => n.parse::<u32>().map_err(|e| format!("count {n:?}: {e}"))?,
                None => 1,
            };
            host.lies.arm(lie, count);
            Ok(json!({ "lie": lie.map(Lie::name), "count": count, "told": host.lies.told() }))
        }
        "stall" | "hang" | "bogus-version" => {
            let flag = match command {
                "stall" => &host.stall,
                "hang" => &host.hang,
                _ => &host.bogus_version,
            };
            let on = on_off(arg)?;
            flag.store(on, Ordering::Relaxed);
            Ok(json!({ command: on }))
        }
        "port" => {
            let up = match arg {
                Some("up") => true,
                Some("down") => false,
                _ => return Err("expected port up|down".into()),
            };
            nic.lock().core.request_port_state(up);
            Ok(json!({ "port": if up { "up" } else { "down" } }))
        }
        "fault" => {
            let rest: Vec<&str> = line.split_whitespace().skip(1).collect();
            let config = if rest.is_empty() {
                nic.faults.config()
            } else {
                nic.faults.command(&rest)?
            };
            Ok(json!({ "faults": config, "stats": nic.faults.stats() }))
        }
        "fatal" => {
            nic.lock().core.request_fatal();
            Ok(json!({ "fatal": FATAL_INJECTED }))
        }
        "trace" => match (arg, words.next()) {
            (Some("start"), Some(path)) => {
                nic.trace
                    .start(Path::new(path))
                    .map_err(|e| format!("{path}: {e}"))?;
                Ok(json!({ "trace": path }))
            }
            (Some("stop"), _) => {
                nic.trace.stop().map_err(|e| e.to_string())?;
                Ok(json!({ "trace": Value::Null }))
            }
            // A named point in the trace, so that a picture can start there.
            (Some("mark"), Some(name)) => {
                nic.trace.event("mark", || json!({ "name": name }));
                Ok(json!({ "mark": name, "tracing": nic.trace.enabled() }))
            }
            _ => Err("expected trace start PATH | trace stop | trace mark NAME".into()),
        },
        "pcap" => match (arg, words.next()) {
            (Some("start"), Some(path)) => {
                let mac = nic.lock().core.config().mac;
                nic.trace
                    .capture
                    .start(Path::new(path), mac)
                    .map_err(|e| format!("{path}: {e}"))?;
                Ok(json!({ "pcap": path }))
            }
            (Some("stop"), _) => {
                nic.trace.capture.stop().map_err(|e| e.to_string())?;
                Ok(json!({ "pcap": Value::Null }))
            }
            _ => Err("expected pcap start PATH | pcap stop".into()),
        },
        _ => Err(format!("unknown command {command:?}; commands: {COMMANDS}")),
    })();
    nic.wake.signal();
    match result {
        Ok(Value::Object(mut map)) => {
            map.insert("ok".into(), Value::Bool(true));
            Value::Object(map)
        }
        Ok(other) => json!({ "ok": true, "result": other }),
        Err(error) => json!({ "ok": false, "error": error }),
    }
}

fn handle(
    nic: &Function,
    functions: Option<&Functions>,
    stream: UnixStream,
) -> std::io::Result<()> {
    // A client that connects and stays silent must not block the next one for long.
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_LINE)).read_line(&mut line)?;
    let line = line.trim();
    let reply = functions
        .and_then(|f| f.execute(line))
        .unwrap_or_else(|| execute(nic, line));
    let mut out = &stream;
    serde_json::to_writer(&mut out, &reply)?;
    out.write_all(b"\n")
}

/// Serves the control socket of function `nic` on a thread of its own; with `functions` (the
/// physical function's socket of a NIC with VFs) it also takes the host's commands about them.
pub fn spawn_control_server(
    nic: Arc<Function>,
    path: &Path,
    functions: Option<Arc<Functions>>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    if path.exists() {
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    let handle = std::thread::Builder::new()
        .name("ferroce-control".into())
        .spawn(move || {
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => {
                        if let Err(e) = handle(&nic, functions.as_deref(), stream) {
                            tracing::warn!("control connection: {e}");
                        }
                    }
                    Err(e) => tracing::warn!("control accept: {e}"),
                }
            }
        })?;
    Ok(handle)
}

/// Sends one command and returns the reply.
pub fn request(path: &Path, command: &str) -> anyhow::Result<Value> {
    let mut stream =
        UnixStream::connect(path).with_context(|| format!("connecting to {}", path.display()))?;
    stream.write_all(command.as_bytes())?;
    stream.write_all(b"\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    serde_json::from_str(&reply).with_context(|| format!("bad reply {reply:?}"))
}

/// The counters `watch` shows, per second.
pub const WATCHED: [&str; 10] = [
    "doorbells",
    "wqe_fetches",
    "wqe_pushes",
    "cqes",
    "interrupts",
    "tx_packets",
    "rx_packets",
    "retransmits",
    "drops",
    "naks_received",
];

/// Per-second rates of the [`WATCHED`] counters between two `counters` replies `interval`
/// apart; `None` for a reply without them (a device reset lowers a counter: rate 0).
pub fn rates(before: &Value, after: &Value, interval: std::time::Duration) -> Option<Vec<f64>> {
    let secs = interval.as_secs_f64().max(1e-6);
    WATCHED
        .iter()
        .map(|name| {
            let a = before.get("counters")?.get(name)?.as_u64()?;
            let b = after.get("counters")?.get(name)?.as_u64()?;
            Some(b.saturating_sub(a) as f64 / secs)
        })
        .collect()
}

/// Prints the [`WATCHED`] counters of the device at `path` per second, every `interval`,
/// `count` times (or until the device goes away): `ferroce-nic watch`, `tools/ferroce top`.
pub fn watch(
    path: &Path,
    interval: std::time::Duration,
    count: Option<u64>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let header: Vec<String> = WATCHED.iter().map(|n| format!("{n:>14}")).collect();
    writeln!(out, "{:>6} {}", "s", header.join(""))?;
    let start = std::time::Instant::now();
    let mut before = request(path, "counters")?;
    let mut taken = std::time::Instant::now();
    let mut shown = 0;
    while count.is_none_or(|n| shown < n) {
        std::thread::sleep(interval);
        let Ok(after) = request(path, "counters") else {
            writeln!(out, "the device is gone")?;
            return Ok(());
        };
        let now = std::time::Instant::now();
        let row = rates(&before, &after, now - taken)
            .ok_or_else(|| anyhow::anyhow!("bad counters reply {after}"))?;
        let cells: Vec<String> = row.iter().map(|r| format!("{r:>14.0}")).collect();
        writeln!(
            out,
            "{:>6.1} {}",
            (now - start).as_secs_f64(),
            cells.join("")
        )?;
        out.flush()?;
        (before, taken) = (after, now);
        shown += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_per_second_and_after_a_reset() {
        let before = json!({"counters": {"doorbells": 100, "wqe_fetches": 10, "wqe_pushes": 0,
            "cqes": 5, "interrupts": 1, "tx_packets": 50, "rx_packets": 40, "retransmits": 0,
            "drops": 3, "naks_received": 0}});
        let after = json!({"counters": {"doorbells": 300, "wqe_fetches": 20, "wqe_pushes": 4,
            "cqes": 9, "interrupts": 2, "tx_packets": 150, "rx_packets": 90, "retransmits": 1,
            "drops": 0, "naks_received": 0}});
        let rates = rates(&before, &after, std::time::Duration::from_millis(500)).expect("rates");
        assert_eq!(rates[..4], [400.0, 20.0, 8.0, 8.0]);
        // The drops went down (a reset): no negative rate.
        assert_eq!(rates[8], 0.0);
        assert!(super::rates(&json!({}), &after, std::time::Duration::from_secs(1)).is_none());
    }
}
