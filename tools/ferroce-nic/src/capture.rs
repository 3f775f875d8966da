// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Packet capture: every frame the port sends and receives, as a pcapng file that Wireshark
//! and tshark open. One Ethernet interface (the port, with its MAC); each frame's timestamp is
//! the NIC's clock (the trace's `t_us`, from the same start, plus the wall time the device
//! started), in nanoseconds, and its direction is in the block's flags. What fault injection did
//! to a frame is its comment (`fault: dropped`, `fault: corrupted`, ...): a dropped frame is
//! captured although it never left (or never reached the engine).

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

/// A frame's direction at the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// From the wire (to the engine or the host).
    In,
    /// To the wire (from the engine or the host), or looped back by the engine.
    Out,
}

impl Direction {
    /// The pcapng `epb_flags` inbound/outbound bits.
    fn flags(self) -> u32 {
        match self {
            Direction::In => 0b01,
            Direction::Out => 0b10,
        }
    }
}

/// The capture sink. Cheap when disabled.
pub struct Capture {
    start: Instant,
    /// Wall time at `start`, since the Unix epoch.
    wall: Duration,
    enabled: AtomicBool,
    out: Mutex<Option<PcapNgWriter<BufWriter<File>>>>,
}

impl Capture {
    /// A disabled capture whose clock starts at `start`.
    pub fn new(start: Instant) -> Self {
        let wall = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(start.elapsed());
        Self {
            start,
            wall,
            enabled: AtomicBool::new(false),
            out: Mutex::new(None),
        }
    }

    /// Starts writing the capture of the port with MAC `mac` to `path` (truncated).
    pub fn start(&self, path: &Path, mac: [u8; 6]) -> std::io::Result<()> {
        let to_io = |e: pcap_file::PcapError| std::io::Error::other(e.to_string());
        let mut writer = PcapNgWriter::new(BufWriter::new(File::create(path)?)).map_err(to_io)?;
        writer
            .write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: 0,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Borrowed("ferroce-port")),
                    InterfaceDescriptionOption::IfMacAddr(Cow::Owned(mac.to_vec())),
                    // Nanoseconds: the resolution EnhancedPacketBlock writes.
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            })
            .map_err(to_io)?;
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = Some(writer);
        self.enabled.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops capturing and flushes.
    pub fn stop(&self) -> std::io::Result<()> {
        self.enabled.store(false, Ordering::Release);
        match self.out.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(writer) => writer.into_inner().flush(),
            None => Ok(()),
        }
    }

    /// Whether frames are captured.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Captures `frame` going `dir`, with an optional comment.
    pub fn frame(&self, dir: Direction, frame: &[u8], comment: Option<&str>) {
        if !self.enabled() {
            return;
        }
        let mut options = vec![EnhancedPacketOption::Flags(dir.flags())];
        if let Some(comment) = comment {
            options.push(EnhancedPacketOption::Comment(Cow::Borrowed(comment)));
        }
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: self.wall + self.start.elapsed(),
            original_len: frame.len() as u32,
            data: Cow::Borrowed(frame),
            options,
        };
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(writer) = out.as_mut() {
            // A capture write error must not disturb the device; the capture just ends short.
            let _ = writer.write_pcapng_block(block);
        }
    }

    /// Flushes buffered frames.
    pub fn flush(&self) {
        if let Some(writer) = self.out.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let _ = writer.get_mut().flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcapng::{Block, PcapNgReader};

    #[test]
    fn frames_come_back_with_direction_comment_and_order() {
        let path =
            std::env::temp_dir().join(format!("ferroce-capture-{}.pcapng", std::process::id()));
        let capture = Capture::new(Instant::now());
        capture.frame(Direction::Out, &[9; 60], None);
        capture.start(&path, [2, 0, 0, 0, 0, 1]).expect("start");
        capture.frame(Direction::Out, &[1; 60], None);
        capture.frame(Direction::In, &[2; 64], Some("fault: dropped"));
        capture.stop().expect("stop");
        capture.frame(Direction::In, &[3; 60], None);

        let mut reader = PcapNgReader::new(File::open(&path).expect("open")).expect("reader");
        let mut packets = Vec::new();
        while let Some(block) = reader.next_block() {
            if let Block::EnhancedPacket(epb) = block.expect("block") {
                let comment = epb.options.iter().find_map(|o| match o {
                    EnhancedPacketOption::Comment(c) => Some(c.to_string()),
                    _ => None,
                });
                let flags = epb.options.iter().find_map(|o| match o {
                    EnhancedPacketOption::Flags(f) => Some(*f),
                    _ => None,
                });
                packets.push((epb.data[0], epb.data.len(), flags, comment, epb.timestamp));
            }
        }
        let _ = std::fs::remove_file(&path);
        assert_eq!(packets.len(), 2, "only frames between start and stop");
        assert_eq!(
            (
                packets[0].0,
                packets[0].1,
                packets[0].2,
                packets[0].3.clone()
            ),
            (1, 60, Some(2), None)
        );
        assert_eq!(
            (
                packets[1].0,
                packets[1].1,
                packets[1].2,
                packets[1].3.clone()
            ),
            (2, 64, Some(1), Some("fault: dropped".into()))
        );
        assert!(packets[0].4 <= packets[1].4);
        // Wall-clock timestamps (after 2020).
        assert!(packets[0].4 > Duration::from_secs(1_577_836_800));
    }
}
