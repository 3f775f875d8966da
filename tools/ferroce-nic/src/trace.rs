// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Optional JSON-lines trace of MMIO accesses, doorbells, DMA, CQEs, EQEs, commands and
//! interrupts, each with a timestamp in microseconds since the device started; and, on the
//! same clock, the optional packet capture of the port ([`Capture`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::capture::Capture;

/// The trace sink. Cheap when disabled: callers build events lazily.
pub struct Tracer {
    start: Instant,
    enabled: AtomicBool,
    out: Mutex<Option<BufWriter<File>>>,
    /// The port's packet capture, timed from the same start.
    pub capture: Capture,
}

impl Default for Tracer {
    fn default() -> Self {
        let start = Instant::now();
        Self {
            start,
            enabled: AtomicBool::new(false),
            out: Mutex::new(None),
            capture: Capture::new(start),
        }
    }
}

impl Tracer {
    /// A disabled tracer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts writing to `path` (truncated). The first record, `clock`, has the wall-clock time
    /// at its `t_us` (`unix_us`), so that the traces of several NICs share one time base.
    pub fn start(&self, path: &Path) -> std::io::Result<()> {
        let file = File::create(path)?;
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        *out = Some(BufWriter::new(file));
        drop(out);
        self.enabled.store(true, Ordering::Release);
        let unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros() as u64;
        self.event("clock", || serde_json::json!({"unix_us": unix_us}));
        Ok(())
    }

    /// Stops tracing and flushes.
    pub fn stop(&self) -> std::io::Result<()> {
        self.enabled.store(false, Ordering::Release);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match out.take() {
            Some(mut writer) => writer.flush(),
            None => Ok(()),
        }
    }

    /// Whether events are recorded.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Records event `kind` with the fields `build` returns, if enabled.
    pub fn event(&self, kind: &str, build: impl FnOnce() -> Value) {
        if !self.enabled() {
            return;
        }
        let mut record = Map::new();
        record.insert(
            "t_us".into(),
            Value::from(self.start.elapsed().as_micros() as u64),
        );
        record.insert("ev".into(), Value::from(kind));
        if let Value::Object(fields) = build() {
            record.extend(fields);
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(writer) = out.as_mut() {
            // A trace write error must not disturb the device; the trace just ends short.
            let _ = serde_json::to_writer(&mut *writer, &Value::Object(record));
            let _ = writer.write_all(b"\n");
        }
    }

    /// Flushes buffered events and captured frames.
    pub fn flush(&self) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(writer) = out.as_mut() {
            let _ = writer.flush();
        }
        drop(out);
        self.capture.flush();
    }
}
