// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Fault injection on the wire side of the port: drop, duplicate, reorder, corrupt and delay
//! frames with given rates, from a seeded ChaCha8 stream so that a run with the same seed and
//! the same frame sequence injects the same faults. Configured by `serve` flags and the
//! control socket (`fault ...`); the engine applies it to the RoCE frames it sends and/or
//! receives, to all of them or, like a switch's match on the BTH opcode, to requests or to
//! responses only.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;

use super::frame;
use super::opcode::{self, flag};
use crate::capture::Direction;
use crate::trace::Tracer;

/// Which direction of the wire the faults apply to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum FaultDirection {
    /// Frames the engine sends and frames it receives.
    #[default]
    Both,
    /// Frames the engine sends.
    Tx,
    /// Frames the engine receives.
    Rx,
}

/// Which frames the faults apply to, by their BTH opcode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum FaultFrames {
    /// Every frame.
    #[default]
    All,
    /// Requests (SEND, WRITE, READ request, atomic): a lost request is resent by its
    /// requester, whose peer is still waiting for it. Losing the last ACK of a run instead can
    /// leave the requester retrying against a QP its peer has already destroyed.
    Requests,
    /// Responses (ACK and NAK, READ response, atomic ACK).
    Responses,
}

impl FaultFrames {
    /// Whether `frame` is one of these; a frame that is not RoCE is only in [`All`](Self::All).
    fn matches(self, frame: &[u8]) -> bool {
        let kind = || {
            let transport = frame::parse(frame).ok()?.transport;
            let info = opcode::lookup(*transport.first()?)?;
            Some(if info.has(flag::RESP) {
                Self::Responses
            } else {
                Self::Requests
            })
        };
        self == Self::All || kind() == Some(self)
    }
}

/// Fault rates (probabilities per frame, 0.0 to 1.0) and the seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct FaultConfig {
    /// Drop the frame.
    pub drop: f64,
    /// Deliver it twice.
    pub duplicate: f64,
    /// Hold it back until the next frame has passed (or 1 ms).
    pub reorder: f64,
    /// Flip one bit after the Ethernet header.
    pub corrupt: f64,
    /// Hold it for `delay_us`.
    pub delay: f64,
    /// Delay in microseconds.
    pub delay_us: u64,
    /// Seed of the fault stream.
    pub seed: u64,
    /// Directions affected.
    pub direction: FaultDirection,
    /// Frames affected.
    pub frames: FaultFrames,
}

impl FaultConfig {
    /// Whether any fault is enabled.
    pub fn active(&self) -> bool {
        self.drop > 0.0
            || self.duplicate > 0.0
            || self.reorder > 0.0
            || self.corrupt > 0.0
            || self.delay > 0.0
    }

    /// Whether faults apply to the transmit (`true`) or receive direction.
    pub fn applies(&self, transmit: bool) -> bool {
        match self.direction {
            FaultDirection::Both => true,
            FaultDirection::Tx => transmit,
            FaultDirection::Rx => !transmit,
        }
    }

    /// Applies one `fault` control command (without the word `fault`): `drop|duplicate|reorder|
    /// corrupt RATE`, `delay RATE [US]`, `seed N`, `direction both|tx|rx`,
    /// `frames all|requests|responses`, `off` (the rates; seed, direction and frames stay).
    pub fn apply_command(&mut self, words: &[&str]) -> Result<(), String> {
        let rate = |w: Option<&&str>| -> Result<f64, String> {
            let text = w.ok_or("missing rate")?;
            let value: f64 = text.parse().map_err(|e| format!("rate {text:?}: {e}"))?;
            if (0.0..=1.0).contains(&value) {
                Ok(value)
            } else {
                Err(format!("rate {value} outside 0..=1"))
            }
        };
        match words.first().copied() {
            Some("drop") => self.drop = rate(words.get(1))?,
            Some("duplicate") | Some("dup") => self.duplicate = rate(words.get(1))?,
            Some("reorder") => self.reorder = rate(words.get(1))?,
            Some("corrupt") => self.corrupt = rate(words.get(1))?,
            Some("delay") => {
                self.delay = rate(words.get(1))?;
                if let Some(us) = words.get(2) {
                    self.delay_us = us.parse().map_err(|e| format!("delay {us:?}: {e}"))?;
                }
            }
            Some("seed") => {
                let text = words.get(1).ok_or("missing seed")?;
                self.seed = text.parse().map_err(|e| format!("seed {text:?}: {e}"))?;
            }
            Some("direction") => {
                self.direction = match words.get(1).copied() {
                    Some("both") => FaultDirection::Both,
                    Some("tx") => FaultDirection::Tx,
                    Some("rx") => FaultDirection::Rx,
                    other => return Err(format!("expected both|tx|rx, got {other:?}")),
                }
            }
            Some("frames") => {
                self.frames = match words.get(1).copied() {
                    Some("all") => FaultFrames::All,
                    Some("requests") => FaultFrames::Requests,
                    Some("responses") => FaultFrames::Responses,
                    other => return Err(format!("expected all|requests|responses, got {other:?}")),
                }
            }
            Some("off") => {
                *self = FaultConfig {
                    seed: self.seed,
                    direction: self.direction,
                    frames: self.frames,
                    ..FaultConfig::default()
                }
            }
            other => {
                return Err(format!(
                    "unknown fault setting {other:?}: drop|duplicate|reorder|corrupt RATE, \
                     delay RATE [US], seed N, direction both|tx|rx, frames all|requests|responses, \
                     off"
                ))
            }
        }
        Ok(())
    }
}

/// What the injectors did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FaultStats {
    /// Frames dropped (including those dropped because too many were held).
    pub dropped: u64,
    /// Frames duplicated.
    pub duplicated: u64,
    /// Frames reordered.
    pub reordered: u64,
    /// Frames corrupted.
    pub corrupted: u64,
    /// Frames delayed.
    pub delayed: u64,
}

/// Shared between the control socket and the engine.
#[derive(Default)]
pub struct FaultControl {
    config: Mutex<FaultConfig>,
    generation: AtomicU64,
    stats: Mutex<FaultStats>,
}

impl FaultControl {
    /// A control with `config`.
    pub fn new(config: FaultConfig) -> Arc<Self> {
        Arc::new(Self {
            config: Mutex::new(config),
            ..Self::default()
        })
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        *self.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the configuration; injectors pick it up (and reseed) at their next frame.
    pub fn set(&self, config: FaultConfig) {
        *self.config.lock().unwrap_or_else(|e| e.into_inner()) = config;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Applies a control command.
    pub fn command(&self, words: &[&str]) -> Result<FaultConfig, String> {
        let mut config = self.config();
        config.apply_command(words)?;
        self.set(config);
        Ok(config)
    }

    /// Totals so far.
    pub fn stats(&self) -> FaultStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, f: impl FnOnce(&mut FaultStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Most frames an injector holds back; beyond this they are dropped (bounded memory).
pub const MAX_HELD_FRAMES: usize = 1024;
/// Longest a reordered frame waits for a successor.
const REORDER_HOLD: Duration = Duration::from_millis(1);

/// Applies the faults to one direction of frames.
pub struct FaultInjector {
    control: Arc<FaultControl>,
    generation: u64,
    config: FaultConfig,
    transmit: bool,
    stream: u64,
    rng: ChaCha8Rng,
    held: VecDeque<(Instant, Vec<u8>)>,
    reorder_slot: Option<(Instant, Vec<u8>)>,
    /// Where the frames that pass are captured, with what the faults did to them.
    capture: Option<(Arc<Tracer>, Direction)>,
}

impl FaultInjector {
    /// An injector for the transmit (`true`) or receive direction.
    pub fn new(control: Arc<FaultControl>, transmit: bool) -> Self {
        // Each direction gets its own stream from the one seed.
        Self::with_stream(control, transmit, if transmit { 0x7478 } else { 0x7278 })
    }

    /// An injector for the receive direction of the frames the engine loops back to itself,
    /// with a stream of its own (the wire's receive stream is not disturbed by them).
    pub fn loopback(control: Arc<FaultControl>) -> Self {
        Self::with_stream(control, false, 0x6c62)
    }

    fn with_stream(control: Arc<FaultControl>, transmit: bool, stream: u64) -> Self {
        let mut injector = Self {
            generation: u64::MAX,
            config: FaultConfig::default(),
            transmit,
            stream,
            rng: ChaCha8Rng::seed_from_u64(0),
            held: VecDeque::new(),
            reorder_slot: None,
            capture: None,
            control,
        };
        injector.refresh();
        injector
    }

    /// Captures every frame this injector passes (going `dir` at the port), each as it comes
    /// out of the faults, when it is decided: a dropped frame too, and each with a comment
    /// saying what the faults did (`fault: dropped`, `corrupted`, `duplicate`, `delayed`,
    /// `reordered`).
    pub fn capturing(mut self, trace: Arc<Tracer>, dir: Direction) -> Self {
        self.capture = Some((trace, dir));
        self
    }

    fn note(&self, frame: &[u8], faults: &[&str]) {
        if let Some((trace, dir)) = &self.capture {
            let comment = (!faults.is_empty()).then(|| format!("fault: {}", faults.join(", ")));
            trace.capture.frame(*dir, frame, comment.as_deref());
        }
    }

    fn refresh(&mut self) {
        let generation = self.control.generation.load(Ordering::Acquire);
        if generation != self.generation {
            self.generation = generation;
            self.config = self.control.config();
            self.rng = ChaCha8Rng::seed_from_u64(self.config.seed ^ self.stream);
        }
    }

    /// Whether a fault is configured for this injector's direction.
    fn acts(&self) -> bool {
        self.config.active() && self.config.applies(self.transmit)
    }

    fn chance(&mut self, rate: f64) -> bool {
        // 53 random bits make a uniform f64 in [0, 1).
        rate > 0.0 && ((self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < rate
    }

    /// Passes `frame` through the faults, as [`process`](Self::process) at the time `now`
    /// reads (the device's clock); it is read only when a fault may act or frames are held
    /// (a wall clock read per frame costs the fault-free path).
    pub fn pass(
        &mut self,
        frame: Vec<u8>,
        now: impl FnOnce() -> Instant,
        deliver: &mut dyn FnMut(Vec<u8>),
    ) {
        self.refresh();
        if !self.holding() && !self.acts() {
            self.note(&frame, &[]);
            deliver(frame);
            return;
        }
        self.process(frame, now(), deliver);
    }

    /// Passes `frame` through the faults; frames to deliver now go to `deliver`. A frame the
    /// faults do not apply to takes no draw from the stream: the faults of the frames they
    /// apply to are the same whatever else passes between them.
    pub fn process(&mut self, frame: Vec<u8>, now: Instant, deliver: &mut dyn FnMut(Vec<u8>)) {
        self.refresh();
        if !self.acts() || !self.config.frames.matches(&frame) {
            self.note(&frame, &[]);
            deliver(frame);
            self.release(now, deliver);
            return;
        }
        let mut frame = frame;
        if self.chance(self.config.drop) {
            self.control.record(|s| s.dropped += 1);
            self.note(&frame, &["dropped"]);
            return;
        }
        let mut faults: Vec<&str> = Vec::new();
        if self.chance(self.config.corrupt) && frame.len() > 14 {
            faults.push("corrupted");
            let bits = (frame.len() - 14) as u64 * 8;
            let bit = 14 * 8 + self.rng.next_u64() % bits;
            if let Some(byte) = frame.get_mut((bit / 8) as usize) {
                *byte ^= 1 << (bit % 8);
            }
            self.control.record(|s| s.corrupted += 1);
        }
        let copies = if self.chance(self.config.duplicate) {
            self.control.record(|s| s.duplicated += 1);
            2
        } else {
            1
        };
        for copy in 0..copies {
            let f = if copy + 1 == copies {
                std::mem::take(&mut frame)
            } else {
                frame.clone()
            };
            let mut these = faults.clone();
            if copy > 0 {
                these.push("duplicate");
            }
            if self.chance(self.config.delay) {
                self.control.record(|s| s.delayed += 1);
                these.push("delayed");
                self.note(&f, &these);
                self.hold(now + Duration::from_micros(self.config.delay_us), f);
            } else if self.reorder_slot.is_none() && self.chance(self.config.reorder) {
                self.control.record(|s| s.reordered += 1);
                these.push("reordered");
                self.note(&f, &these);
                self.reorder_slot = Some((now + REORDER_HOLD, f));
            } else {
                self.note(&f, &these);
                deliver(f);
                // The held-back frame goes right after its successor.
                if let Some((_, held)) = self.reorder_slot.take() {
                    deliver(held);
                }
            }
        }
        self.release(now, deliver);
    }

    fn hold(&mut self, until: Instant, frame: Vec<u8>) {
        if self.held.len() >= MAX_HELD_FRAMES {
            self.control.record(|s| s.dropped += 1);
            return;
        }
        // Kept sorted by release time (delays are equal, so this is an append in practice).
        let at = self.held.partition_point(|(t, _)| *t <= until);
        self.held.insert(at, (until, frame));
    }

    /// Delivers held frames whose time has come.
    pub fn release(&mut self, now: Instant, deliver: &mut dyn FnMut(Vec<u8>)) {
        while self.held.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = self.held.pop_front() {
                deliver(f);
            }
        }
        if self.reorder_slot.as_ref().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = self.reorder_slot.take() {
                deliver(f);
            }
        }
    }

    /// When the next held frame is due: the first delayed one (they are kept in order) or the
    /// reordered one, whichever is earlier.
    pub fn next_release(&self) -> Option<Instant> {
        let delayed = self.held.front().map(|(t, _)| *t);
        let reordered = self.reorder_slot.as_ref().map(|(t, _)| *t);
        delayed.into_iter().chain(reordered).min()
    }

    /// Whether frames are held.
    pub fn holding(&self) -> bool {
        self.next_release().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: FaultConfig, frames: u32) -> (Vec<Vec<u8>>, FaultStats) {
        let control = FaultControl::new(config);
        let mut injector = FaultInjector::new(control.clone(), true);
        let mut out = Vec::new();
        let now = Instant::now();
        for i in 0..frames {
            let mut frame = vec![0u8; 64];
            frame[20..24].copy_from_slice(&i.to_le_bytes());
            injector.process(frame, now, &mut |f| out.push(f));
        }
        injector.release(now + Duration::from_secs(1), &mut |f| out.push(f));
        (out, control.stats())
    }

    #[test]
    fn same_seed_same_faults() {
        let config = FaultConfig {
            drop: 0.1,
            duplicate: 0.1,
            reorder: 0.1,
            corrupt: 0.05,
            delay: 0.05,
            delay_us: 100,
            seed: 7,
            ..FaultConfig::default()
        };
        let (a, sa) = run(config, 2000);
        let (b, sb) = run(config, 2000);
        assert_eq!(a, b);
        assert_eq!(sa, sb);
        let (c, _) = run(FaultConfig { seed: 8, ..config }, 2000);
        assert_ne!(a, c);
        // Rates are roughly honoured.
        assert!((150..250).contains(&sa.dropped), "{sa:?}");
        assert!((130..230).contains(&sa.duplicated), "{sa:?}");
        assert!(sa.corrupted > 40 && sa.reordered > 100, "{sa:?}");
    }

    #[test]
    fn no_faults_passes_everything_in_order() {
        let (out, stats) = run(FaultConfig::default(), 100);
        assert_eq!(out.len(), 100);
        assert_eq!(stats, FaultStats::default());
        assert!(out.windows(2).all(|w| w[0][20] < w[1][20] || w[1][20] == 0));
    }

    /// A RoCE v2 frame of `opcode` (64 bytes of payload where it has one).
    fn roce(opcode: u8, psn: u32) -> Vec<u8> {
        let mut gid = [0u8; 16];
        gid[10..12].copy_from_slice(&[0xff, 0xff]);
        let route = frame::Route {
            smac: [2, 0, 0, 0, 0, 1],
            dmac: [2, 0, 0, 0, 0, 2],
            vlan: None,
            v1: false,
            sgid: gid,
            dgid: gid,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        };
        let headers = super::super::headers::Headers::new(opcode, 17, psn);
        let payload = if opcode::lookup(opcode).is_some_and(|i| i.has(flag::PAYLOAD)) {
            &[7u8; 64][..]
        } else {
            &[]
        };
        let mut transport = Vec::new();
        headers.write(payload, &mut transport);
        let mut out = Vec::new();
        frame::build(&route, &transport, &mut out);
        out
    }

    /// What `frames` of the given opcodes come to through `config`: the PSNs passed.
    fn psns_through(config: FaultConfig, frames: &[(u8, u32)]) -> (Vec<(u8, u32)>, FaultStats) {
        let control = FaultControl::new(config);
        let mut injector = FaultInjector::new(control.clone(), true);
        let mut out = Vec::new();
        for &(op, psn) in frames {
            injector.process(roce(op, psn), Instant::now(), &mut |f| out.push(f));
        }
        let passed = out
            .iter()
            .map(|f| {
                let transport = frame::parse(f).expect("a RoCE frame").transport;
                let bth = super::super::headers::Packet::parse(transport)
                    .expect("headers")
                    .bth;
                (bth.opcode, bth.psn)
            })
            .collect();
        (passed, control.stats())
    }

    #[test]
    fn requests_only_never_touches_an_ack() {
        let frames: Vec<(u8, u32)> = (0..50)
            .flat_map(|psn| {
                [
                    (opcode::op::RC_SEND_ONLY, psn),
                    (opcode::op::RC_ACKNOWLEDGE, psn),
                ]
            })
            .collect();
        let all_dropped = FaultConfig {
            drop: 1.0,
            frames: FaultFrames::Requests,
            ..FaultConfig::default()
        };
        let (passed, stats) = psns_through(all_dropped, &frames);
        assert_eq!(stats.dropped, 50);
        assert_eq!(passed.len(), 50);
        assert!(
            passed
                .iter()
                .all(|(op, _)| *op == opcode::op::RC_ACKNOWLEDGE),
            "{passed:?}"
        );
        let responses = FaultConfig {
            frames: FaultFrames::Responses,
            ..all_dropped
        };
        let (passed, _) = psns_through(responses, &frames);
        assert!(
            passed.iter().all(|(op, _)| *op == opcode::op::RC_SEND_ONLY),
            "{passed:?}"
        );
        // A frame that is not RoCE is no request.
        let control = FaultControl::new(all_dropped);
        let mut injector = FaultInjector::new(control.clone(), true);
        let mut out = Vec::new();
        injector.process(vec![0xff; 60], Instant::now(), &mut |f| out.push(f));
        assert_eq!((out.len(), control.stats().dropped), (1, 0));
    }

    #[test]
    fn frames_the_faults_skip_take_no_draw_from_the_stream() {
        let sends: Vec<(u8, u32)> = (0..200)
            .map(|psn| (opcode::op::RC_SEND_ONLY, psn))
            .collect();
        let with_acks: Vec<(u8, u32)> = sends
            .iter()
            .flat_map(|&(op, psn)| [(op, psn), (opcode::op::RC_ACKNOWLEDGE, psn)])
            .collect();
        let config = FaultConfig {
            drop: 0.3,
            seed: 5,
            frames: FaultFrames::Requests,
            ..FaultConfig::default()
        };
        let (alone, _) = psns_through(config, &sends);
        let (between, _) = psns_through(config, &with_acks);
        let sends_between: Vec<_> = between
            .into_iter()
            .filter(|(op, _)| *op == opcode::op::RC_SEND_ONLY)
            .collect();
        assert_eq!(alone, sends_between);
        assert!((100..180).contains(&alone.len()), "{}", alone.len());
    }

    /// trace-pictures drops 30 % of the requests a's NIC sends (seed 0), and ibv_rc_pingpong's
    /// QPs send a request at most 8 times (retry_cnt 7): with requests only, a run's drops are
    /// the stream's first draws, whatever the timing, and the stream never has 8 in a row.
    #[test]
    fn the_trace_pictures_stream_never_drops_a_request_eight_times_running() {
        let config = FaultConfig {
            drop: 0.3,
            direction: FaultDirection::Tx,
            frames: FaultFrames::Requests,
            ..FaultConfig::default()
        };
        let control = FaultControl::new(config);
        let mut injector = FaultInjector::new(control.clone(), true);
        let send = roce(opcode::op::RC_SEND_ONLY, 1);
        let (mut run, mut longest) = (0, 0);
        for _ in 0..1000 {
            let mut passed = false;
            injector.process(send.clone(), Instant::now(), &mut |_| passed = true);
            run = if passed { 0 } else { run + 1 };
            longest = longest.max(run);
        }
        assert!(longest < 8, "{longest} drops in a row");
    }

    #[test]
    fn commands_parse() {
        let mut c = FaultConfig::default();
        c.apply_command(&["drop", "0.05"]).expect("drop");
        c.apply_command(&["delay", "0.5", "250"]).expect("delay");
        c.apply_command(&["seed", "3"]).expect("seed");
        assert_eq!((c.drop, c.delay, c.delay_us, c.seed), (0.05, 0.5, 250, 3));
        assert!(c.apply_command(&["drop", "2"]).is_err());
        assert!(c.apply_command(&["bogus"]).is_err());
        c.apply_command(&["frames", "requests"]).expect("frames");
        assert!(c.apply_command(&["frames", "acks"]).is_err());
        c.apply_command(&["off"]).expect("off");
        assert!(!c.active());
        assert_eq!((c.seed, c.frames), (3, FaultFrames::Requests));
    }
}
