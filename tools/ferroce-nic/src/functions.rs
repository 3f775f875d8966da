// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! One NIC, many functions, as an SR-IOV RNIC: a physical function and up to
//! [`MAX_VFS`] virtual functions (`serve --functions N`), each a PCI function of its own on
//! its own vfio-user socket (its own device ID, BAR0, MSI-X vectors, MAC, GID table, command
//! queue and objects), all sharing the NIC's one port and one device thread.
//!
//! * **Numbers.** A function names its objects by its own numbers: doorbells and commands
//!   carry them, and it cannot name another function's (its tables hold only its own). Each
//!   function owns a slice of the NIC's QP, CQ, SRQ and MR numbers, fixed at start
//!   ([`FunctionSlot`]): the NIC's number of a function's local number `n` is the slice's base
//!   plus `n`. The trace of a VF's doorbell shows both.
//! * **Limits.** The host, in the part of a PF driver, sets what each function may use
//!   ([`Limits`]: QPs, CQs, MRs, SRQs, page-list entries, doorbell rate), on the command line
//!   (`--vf N:qp=64,...`) or through the control socket (`ctl vf N limits ...`), within the
//!   function's slice. The function reports them in its capability registers (`REG_MAX_QP`,
//!   ...) and refuses what exceeds them with `STATUS_NO_RESOURCES`. Object limits take effect
//!   at the function's next reset (its driver's next probe); the doorbell rate at once.
//! * **Sharing.** The port's embedded switch ([`crate::port::switch`]) carries frames between
//!   functions inside the NIC and to the wire. The device thread gives each function one
//!   budgeted round in turn ([`crate::schedule`]), so a function flooding doorbells or traffic
//!   gets its turn and no more.
//!
//! DMA is per function by construction: each function's vfio-user client maps its own VM's
//! memory, and a function's engine reaches only that.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use crate::device::{DeviceConfig, FunctionSlot};
use crate::engine::faults::{FaultConfig, FaultControl};
use crate::engine::wire::FrameSink;
use crate::function::{Function, FunctionParts};
use crate::port::PortStats;
use crate::wake::Wake;

/// Most virtual functions a NIC serves.
pub const MAX_VFS: usize = 7;

/// What the host lets a function use; unset fields keep the function's current value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// QP numbers (`REG_MAX_QP`).
    pub qp: Option<u32>,
    /// CQs (`REG_MAX_CQ`).
    pub cq: Option<u32>,
    /// MRs and windows (`REG_MAX_MR`).
    pub mr: Option<u32>,
    /// SRQs (`REG_MAX_SRQ`).
    pub srq: Option<u32>,
    /// Page-list entries of all MRs and rings: the memory the function may have the NIC map.
    pub pages: Option<u64>,
    /// Doorbells per second (0: no limit).
    pub db_rate: Option<u32>,
}

/// The keys of [`Limits`], for help texts.
pub const LIMIT_KEYS: &str = "qp=N,cq=N,mr=N,srq=N,pages=N,db_rate=N";

impl Limits {
    /// Parses one `key=value` into `self`; `Ok(false)` if `key` is not a limit.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let number = |what: &str| -> Result<u64, String> {
            value
                .parse::<u64>()
                .map_err(|e| format!("{what}={value}: {e}"))
        };
        let small = |what: &str| -> Result<u32, String> {
            u32::try_from(number(what)?).map_err(|_| format!("{what}={value}: too large"))
        };
        match key {
            "qp" => self.qp = Some(small(key)?),
            "cq" => self.cq = Some(small(key)?),
            "mr" => self.mr = Some(small(key)?),
            "srq" => self.srq = Some(small(key)?),
            "pages" => self.pages = Some(number(key)?),
            "db_rate" => self.db_rate = Some(small(key)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `config` with these limits.
    pub fn applied_to(&self, config: &DeviceConfig) -> DeviceConfig {
        let mut config = config.clone();
        config.max_qp = self.qp.unwrap_or(config.max_qp);
        config.max_cq = self.cq.unwrap_or(config.max_cq);
        config.max_mr = self.mr.unwrap_or(config.max_mr);
        config.max_srq = self.srq.unwrap_or(config.max_srq);
        config.max_translation_entries = self.pages.unwrap_or(config.max_translation_entries);
        config.db_rate = self.db_rate.unwrap_or(config.db_rate);
        config
    }

    /// Checks that `config`'s numbers fit the function's slice (the numbers it had at start).
    pub fn check_within(config: &DeviceConfig, slice: &DeviceConfig) -> Result<(), String> {
        for (what, value, max) in [
            ("qp", config.max_qp, slice.max_qp),
            ("cq", config.max_cq, slice.max_cq),
            ("mr", config.max_mr, slice.max_mr),
            ("srq", config.max_srq, slice.max_srq),
        ] {
            if value > max {
                return Err(format!(
                    "{what}={value}: the function's slice of the NIC holds {max} (set at start)"
                ));
            }
        }
        Ok(())
    }
}

impl FromStr for Limits {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut limits = Self::default();
        for item in text.split(',').filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected KEY=VALUE ({LIMIT_KEYS})"))?;
            if !limits.set(key, value)? {
                return Err(format!("{key:?}: not a limit ({LIMIT_KEYS})"));
            }
        }
        Ok(limits)
    }
}

/// A virtual function as `serve --vf K:SPEC` describes it; what SPEC leaves out is derived
/// from the physical function's options ([`VfSpec::derive`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VfSpec {
    /// Its vfio-user socket.
    pub socket: Option<PathBuf>,
    /// Its MAC (that of its VM's virtio-net).
    pub mac: Option<[u8; 6]>,
    /// Its netdev socket (bound by the NIC).
    pub netdev_socket: Option<PathBuf>,
    /// Its VM's netdev socket.
    pub netdev_peer: Option<PathBuf>,
    /// Its own control socket.
    pub control: Option<PathBuf>,
    /// Its trace.
    pub trace: Option<PathBuf>,
    /// Its packet capture.
    pub pcap: Option<PathBuf>,
    /// Its limits.
    pub limits: Limits,
}

/// The keys of a [`VfSpec`], for help texts.
pub const VF_KEYS: &str =
    "socket=PATH,mac=MAC,netdev-socket=PATH,netdev-peer=PATH,control=PATH,trace=PATH,pcap=PATH";

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    let bytes: Vec<u8> = text
        .split(':')
        .map(|part| u8::from_str_radix(part, 16).map_err(|e| format!("{text}: {e}")))
        .collect::<Result<_, _>>()?;
    bytes
        .try_into()
        .map_err(|_| format!("{text}: expected 6 bytes"))
}

/// `path` with `.vfK` appended.
fn with_vf(path: &std::path::Path, k: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".vf{k}"));
    PathBuf::from(name)
}

/// The physical function's options a VF's are derived from.
#[derive(Clone, Debug)]
pub struct PfPaths {
    /// vfio-user socket.
    pub socket: PathBuf,
    /// MAC.
    pub mac: [u8; 6],
    /// Netdev socket.
    pub netdev_socket: Option<PathBuf>,
    /// QEMU's netdev socket.
    pub netdev_peer: Option<PathBuf>,
}

impl VfSpec {
    /// Parses `K:key=value,...` into `(K, spec)`.
    pub fn parse(text: &str) -> Result<(usize, Self), String> {
        let (k, rest) = text
            .split_once(':')
            .ok_or_else(|| format!("{text:?}: expected K:{VF_KEYS},{LIMIT_KEYS}"))?;
        let k: usize = k.parse().map_err(|e| format!("VF {k:?}: {e}"))?;
        if k == 0 || k > MAX_VFS {
            return Err(format!("VF {k}: VFs are numbered 1..={MAX_VFS}"));
        }
        let mut spec = Self::default();
        for item in rest.split(',').filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected KEY=VALUE"))?;
            let path = || Some(PathBuf::from(value));
            match key {
                "socket" => spec.socket = path(),
                "mac" => spec.mac = Some(parse_mac(value)?),
                "netdev-socket" => spec.netdev_socket = path(),
                "netdev-peer" => spec.netdev_peer = path(),
                "control" => spec.control = path(),
                "trace" => spec.trace = path(),
                "pcap" => spec.pcap = path(),
                _ => {
                    if !spec.limits.set(key, value)? {
                        return Err(format!("{key:?}: not a VF key ({VF_KEYS},{LIMIT_KEYS})"));
                    }
                }
            }
        }
        Ok((k, spec))
    }

    /// Fills in what the spec of VF `k` leaves out: the PF's paths with `.vfK` appended, and
    /// the PF's MAC plus `k` in its last byte.
    pub fn derive(mut self, k: usize, pf: &PfPaths) -> Self {
        self.socket.get_or_insert_with(|| with_vf(&pf.socket, k));
        self.mac.get_or_insert_with(|| {
            let mut mac = pf.mac;
            mac[5] = mac[5].wrapping_add(k as u8);
            mac
        });
        if self.netdev_socket.is_none() {
            self.netdev_socket = pf.netdev_socket.as_deref().map(|p| with_vf(p, k));
        }
        if self.netdev_peer.is_none() {
            self.netdev_peer = pf.netdev_peer.as_deref().map(|p| with_vf(p, k));
        }
        self
    }
}

/// Gives each function its place in the NIC: `configs[0]` the PF, `configs[k]` VF `k`, each
/// slice as large as the function's limits at start.
pub fn lay_out(configs: &mut [DeviceConfig]) {
    let mut next = FunctionSlot::default();
    for (index, config) in configs.iter_mut().enumerate() {
        config.function = FunctionSlot {
            index: index as u16,
            ..next
        };
        next.qpn_base += config.max_qp;
        next.cqn_base += config.max_cq;
        next.srqn_base += config.max_srq;
        next.mr_base += config.max_mr;
    }
}

/// The functions of one NIC, `configs[0]` the PF: they share the device thread and its wake-up, and
/// each sends into `sink(k)` (the port's side of function `k`) and counts its pass-through
/// frames in `stats[k]`. Each starts with the wire faults of `faults` and has its own control of
/// them (`ctl fault ...` on its socket, which a guest may reach): one function's faults never
/// touch another's frames.
pub fn make_functions(
    configs: &[DeviceConfig],
    faults: FaultConfig,
    stats: &[Arc<PortStats>],
    mut sink: impl FnMut(usize) -> Box<dyn FrameSink>,
) -> std::io::Result<Vec<Arc<Function>>> {
    let wake = Arc::new(Wake::new()?);
    Ok(configs
        .iter()
        .zip(stats)
        .enumerate()
        .map(|(k, (config, stats))| {
            let parts = FunctionParts::new(wake.clone());
            Function::with_parts(
                config.clone(),
                sink(k),
                FaultControl::new(faults),
                stats.clone(),
                parts,
            )
        })
        .collect())
}

/// A NIC's functions, for the host's control of them (`ctl functions`, `ctl vf N ...`).
pub struct Functions {
    /// Function 0 is the PF, `k` VF `k`.
    pub nics: Vec<Arc<Function>>,
    /// Each function's configuration at start: the size of its slices.
    pub slices: Vec<DeviceConfig>,
}

/// What `ctl functions` shows of one function.
#[derive(Serialize)]
struct FunctionView {
    index: u16,
    kind: &'static str,
    device_id: String,
    mac: String,
    slot: FunctionSlot,
    limits: Value,
    pending_limits: Option<Value>,
    schedule: crate::schedule::ScheduleStats,
    port: Value,
    counters: Value,
}

fn limits_json(config: &DeviceConfig) -> Value {
    json!({
        "qp": config.max_qp, "cq": config.max_cq, "mr": config.max_mr, "srq": config.max_srq,
        "pages": config.max_translation_entries, "db_rate": config.db_rate,
    })
}

impl Functions {
    fn view(&self, nic: &Function) -> FunctionView {
        use std::sync::atomic::Ordering::Relaxed;
        let device = nic.lock();
        let config = device.core.config();
        let slot = config.function;
        let counter = |name: &str| {
            nic.counters
                .named()
                .into_iter()
                .find(|(k, _)| *k == name)
                .map_or(0, |(_, v)| v)
        };
        let stats = &nic.port_stats;
        FunctionView {
            index: slot.index,
            kind: if slot.is_vf() { "vf" } else { "pf" },
            device_id: format!("{:#06x}", slot.device_id()),
            mac: config
                .mac
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
            slot,
            limits: limits_json(config),
            pending_limits: device.core.pending_limits().map(limits_json),
            schedule: nic.schedule.stats(),
            port: json!({
                "to_engine": stats.to_engine.load(Relaxed), "to_host": stats.to_host.load(Relaxed),
                "from_host": stats.from_host.load(Relaxed), "switched": stats.switched.load(Relaxed),
                "lost": stats.lost.load(Relaxed),
            }),
            counters: json!({
                "doorbells": counter("doorbells"), "bad_doorbells": counter("bad_doorbells"),
                "tx_packets": counter("tx_packets"), "rx_packets": counter("rx_packets"),
                "dma_errors": counter("dma_errors"),
            }),
        }
    }

    /// Executes a host command about the functions: `functions`, `vf N limits KEY=VALUE...`
    /// or `vf N COMMAND` (any other control command, on function N). `None` if `line` is none
    /// of these.
    pub fn execute(&self, line: &str) -> Option<Value> {
        let mut words = line.split_whitespace();
        let result = match words.next()? {
            "functions" => Ok(json!({
                "functions": self.nics.iter().map(|nic| self.view(nic)).collect::<Vec<_>>(),
            })),
            "vf" => {
                let n = words.next().unwrap_or("");
                let rest: Vec<&str> = words.collect();
                match n.parse::<usize>() {
                    Ok(n) if n < self.nics.len() => match rest.split_first() {
                        Some((&"limits", items)) => self.set_limits(n, &items.join(",")),
                        Some(_) => {
                            return Some(crate::control::execute(&self.nics[n], &rest.join(" ")))
                        }
                        None => Ok(json!({ "function": self.view(&self.nics[n]) })),
                    },
                    _ => Err(format!(
                        "vf {n:?}: functions are 0 (the PF) to {}",
                        self.nics.len() - 1
                    )),
                }
            }
            _ => return None,
        };
        Some(match result {
            Ok(Value::Object(mut map)) => {
                map.insert("ok".into(), Value::Bool(true));
                Value::Object(map)
            }
            Ok(other) => json!({ "ok": true, "result": other }),
            Err(error) => json!({ "ok": false, "error": error }),
        })
    }

    fn set_limits(&self, n: usize, items: &str) -> Result<Value, String> {
        let limits: Limits = items.parse()?;
        let nic = &self.nics[n];
        let mut device = nic.lock();
        let base = device
            .core
            .pending_limits()
            .unwrap_or(device.core.config())
            .clone();
        let config = limits.applied_to(&base);
        Limits::check_within(&config, &self.slices[n])?;
        if let Some(rate) = limits.db_rate {
            nic.schedule.set_rate(rate);
        }
        device.core.set_limits(config);
        drop(device);
        Ok(json!({ "function": self.view(nic) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_apply_and_fit_the_slice() {
        let limits: Limits = "qp=64,cq=32,pages=4096,db_rate=1000"
            .parse()
            .expect("limits");
        assert_eq!(limits.qp, Some(64));
        assert_eq!(limits.mr, None);
        let slice = DeviceConfig::default();
        let config = limits.applied_to(&slice);
        assert_eq!(
            (config.max_qp, config.max_cq, config.max_mr),
            (64, 32, slice.max_mr)
        );
        assert_eq!(
            (config.max_translation_entries, config.db_rate),
            (4096, 1000)
        );
        assert!(Limits::check_within(&config, &slice).is_ok());
        let bigger = Limits::from_str("qp=5000")
            .expect("limits")
            .applied_to(&slice);
        let err = Limits::check_within(&bigger, &slice).expect_err("over the slice");
        assert!(err.contains("slice of the NIC holds 1024"), "{err}");
        for bad in ["qp", "qp=x", "colour=red", "qp=99999999999"] {
            assert!(bad.parse::<Limits>().is_err(), "{bad}");
        }
    }

    #[test]
    fn vf_specs_and_what_they_derive() {
        let pf = PfPaths {
            socket: "/run/a.vfio".into(),
            mac: [2, 0, 0, 0, 0, 0x10],
            netdev_socket: Some("/run/a.net".into()),
            netdev_peer: None,
        };
        let (k, spec) = VfSpec::parse("2:mac=02:00:00:00:00:99,qp=16,trace=/t").expect("spec");
        assert_eq!(k, 2);
        assert_eq!(spec.limits.qp, Some(16));
        let spec = spec.derive(k, &pf);
        assert_eq!(
            spec.socket.as_deref(),
            Some(std::path::Path::new("/run/a.vfio.vf2"))
        );
        assert_eq!(spec.mac, Some([2, 0, 0, 0, 0, 0x99]));
        assert_eq!(spec.netdev_socket, Some(PathBuf::from("/run/a.net.vf2")));
        assert_eq!(spec.netdev_peer, None);
        let derived = VfSpec::default().derive(1, &pf);
        assert_eq!(derived.mac, Some([2, 0, 0, 0, 0, 0x11]));
        for bad in ["0:qp=1", "8:qp=1", "x:qp=1", "1:size=3", "1:mac=zz", "1"] {
            assert!(VfSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slices_follow_each_other() {
        let mut configs = vec![DeviceConfig::default(); 3];
        configs[1].max_qp = 64;
        lay_out(&mut configs);
        let slots: Vec<_> = configs
            .iter()
            .map(|c| (c.function.index, c.function.qpn_base))
            .collect();
        assert_eq!(slots, [(0, 0), (1, 1024), (2, 1088)]);
        assert_eq!(
            configs[2].function.device_id(),
            ferroce_hw::PCI_VF_DEVICE_ID
        );
        assert_eq!(configs[0].function.device_id(), ferroce_hw::PCI_DEVICE_ID);
    }
}
