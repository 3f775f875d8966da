// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The shared-memory cable (`--wire shm:MEMFD,NOTIFY,SIDE`): two NICs on one host pass their
//! frames through two rings in a memfd they share, one each way, as vhost-user's virtqueues and
//! VPP's memif do. A frame costs a copy into the ring and one out, and no system call: the unix
//! datagram cable's `sendmmsg` and `recvmmsg` (an skb allocated, charged and freed per frame)
//! took two thirds of the NICs' CPU in a 64 KiB write stream. The receiver is told of new frames
//! only when it sleeps: it sets its ring's `asleep` word, looks at the ring once more and waits
//! on NOTIFY (one end of a datagram socketpair); the sender publishes its frames, then reads
//! `asleep`, and sends NOTIFY a byte if it is set. A full barrier on each side between the
//! write and the read (the store-load pattern of the doorbell records, and of virtio's
//! notification suppression) means that no frame waits for a receiver that sleeps.
//!
//! The rings are bounded and the sender never waits: a frame that finds its ring full (the
//! peer stopped reading, or is gone) is lost and counted by the caller, as a frame to an
//! unplugged cable is. The peer is another process, so nothing it writes is trusted: a length
//! beyond a slot loses that frame, and indexes that cannot be (more frames than slots) are
//! skipped, never read past the ring; both are counted ([`CableStats`], in the NIC's `status`),
//! and a well-behaved peer makes neither.
//!
//! The harness makes an empty memfd and a socketpair and hands each NIC the memfd and one end:
//! both size the memfd to [`CABLE_BYTES`] themselves, so that its layout lives here alone.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::str::FromStr;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context as _};
use memmap2::{MmapOptions, MmapRaw};
use serde::Serialize;

use super::batch::{RecvBatch, BATCH};

/// Frames a ring holds.
pub const SLOTS: u64 = 512;
/// Bytes a slot takes: its frame's length (`u32`, then 4 bytes of padding) and the frame.
pub const SLOT_BYTES: usize = 16 << 10;
/// Offset of a slot's frame.
const SLOT_FRAME: usize = 8;
/// The longest frame a slot carries (a jumbo frame of MTU 9000 and more).
pub const MAX_FRAME: usize = SLOT_BYTES - SLOT_FRAME;
/// A ring's control page: the producer's index, the consumer's index and the consumer's
/// `asleep` word, each on a cache line of its own.
const CONTROL_BYTES: usize = 4096;
const HEAD: usize = 0;
const TAIL: usize = 64;
const ASLEEP: usize = 128;
/// Bytes of one ring: its control page and its slots.
const RING_BYTES: usize = CONTROL_BYTES + SLOTS as usize * SLOT_BYTES;
/// Bytes of the cable: ring 0 carries side a's frames to b, ring 1 b's to a.
pub const CABLE_BYTES: usize = 2 * RING_BYTES;
/// How long a receiver sleeps at most before it looks at its ring again (a wake-up lost to a
/// full socket buffer, or a peer gone).
const NAP: Duration = Duration::from_millis(100);

/// Which end of the cable a NIC is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Sends on ring 0, receives on ring 1.
    A,
    /// Sends on ring 1, receives on ring 0.
    B,
}

impl FromStr for Side {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "a" => Ok(Self::A),
            "b" => Ok(Self::B),
            _ => bail!("a side is a or b, not '{s}'"),
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::A => "a",
            Self::B => "b",
        })
    }
}

/// One end of a shared-memory cable.
pub struct ShmCable {
    map: MmapRaw,
    /// Offset of the ring this end sends on, and of the one it receives on.
    tx: usize,
    rx: usize,
    /// The producer index of the ring this end sends on (the netdev's thread and the device
    /// thread both send).
    head: Mutex<u64>,
    /// The consumer index of the ring this end receives on (its wire thread alone receives).
    tail: Mutex<u64>,
    notify: UnixDatagram,
    /// How long the receiver sleeps at most ([`NAP`]).
    nap: Duration,
    stats: Arc<CableStats>,
}

/// What one end of a cable counted.
#[derive(Debug, Default)]
pub struct CableStats {
    /// Wake-ups sent to a sleeping peer.
    wakeups: AtomicU64,
    /// Indexes from the peer that could not be (more frames announced than slots), skipped.
    bad_indexes: AtomicU64,
    /// Slots whose length was beyond a slot's room: their frames skipped.
    bad_lengths: AtomicU64,
}

/// [`CableStats`] read at one time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CableCounts {
    /// Wake-ups sent to a sleeping peer.
    pub wakeups: u64,
    /// Indexes from the peer that could not be, skipped.
    pub bad_indexes: u64,
    /// Slots with a length beyond a slot's room, skipped.
    pub bad_lengths: u64,
}

impl CableStats {
    /// The counts now.
    pub fn counts(&self) -> CableCounts {
        CableCounts {
            wakeups: self.wakeups.load(Ordering::Relaxed),
            bad_indexes: self.bad_indexes.load(Ordering::Relaxed),
            bad_lengths: self.bad_lengths.load(Ordering::Relaxed),
        }
    }
}

/// Buffers a receiver copies frames into, out of the ring.
trait Receiving {
    /// The buffer of the `n`th frame of this call (empty past the last).
    fn buffer(&mut self, n: usize) -> &mut [u8];
    /// The `n`th frame took `len` bytes of its buffer.
    fn set_len(&mut self, n: usize, len: usize);
}

impl Receiving for RecvBatch {
    fn buffer(&mut self, n: usize) -> &mut [u8] {
        RecvBatch::buffer(self, n)
    }

    fn set_len(&mut self, n: usize, len: usize) {
        RecvBatch::set_len(self, n, len);
    }
}

/// One frame into the caller's buffer.
struct One<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Receiving for One<'_> {
    fn buffer(&mut self, n: usize) -> &mut [u8] {
        if n == 0 {
            self.buf
        } else {
            &mut []
        }
    }

    fn set_len(&mut self, _: usize, len: usize) {
        self.len = len;
    }
}

impl fmt::Debug for ShmCable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmCable")
            .field("tx", &self.tx)
            .field("rx", &self.rx)
            .finish_non_exhaustive()
    }
}

/// Takes descriptor `fd`, given on the command line, if it is open.
fn inherited(fd: RawFd, what: &str) -> anyhow::Result<OwnedFd> {
    // SAFETY: F_GETFD reads a descriptor's flags and changes nothing.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        bail!("wire shm: {what} {fd} is not an open descriptor of this process");
    }
    // SAFETY: the descriptor is open (above), and the command line hands it to the wire: the
    // process owns it and nothing else in it does (a wire is opened once).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl ShmCable {
    /// Opens side `side` of the cable in memfd `memfd`, woken through socket `notify`.
    ///
    /// # Errors
    ///
    /// A descriptor that is not open, a memfd of another size than the cable's or one that
    /// cannot be mapped, or a NOTIFY that is not a datagram socket.
    pub fn open(memfd: RawFd, notify: RawFd, side: Side) -> anyhow::Result<Self> {
        let file = File::from(inherited(memfd, "MEMFD")?);
        let notify = inherited(notify, "NOTIFY")?;
        let size = file.metadata().context("wire shm: MEMFD")?.len();
        if size == 0 {
            // Both ends size it: the same length, whichever comes first.
            file.set_len(CABLE_BYTES as u64)
                .context("wire shm: sizing MEMFD")?;
        } else if size != CABLE_BYTES as u64 {
            bail!("wire shm: MEMFD has {size} bytes, a cable {CABLE_BYTES}: not a cable's");
        }
        let map = MmapOptions::new()
            .len(CABLE_BYTES)
            .map_raw(&file)
            .context("wire shm: mapping MEMFD")?;
        let mut kind: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `kind` and `len` are valid for writes of the sizes given.
        let rc = unsafe {
            libc::getsockopt(
                notify.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&raw mut kind).cast(),
                &mut len,
            )
        };
        if rc != 0 || kind != libc::SOCK_DGRAM {
            bail!("wire shm: NOTIFY is not a datagram socket (one end of a socketpair)");
        }
        let notify = UnixDatagram::from(notify);
        notify.set_read_timeout(Some(NAP))?;
        let (tx, rx) = match side {
            Side::A => (0, RING_BYTES),
            Side::B => (RING_BYTES, 0),
        };
        let cable = Self {
            map,
            tx,
            rx,
            head: Mutex::new(0),
            tail: Mutex::new(0),
            notify,
            nap: NAP,
            stats: Arc::default(),
        };
        // Where the rings stand (a NIC that restarted takes up the ring where it was).
        *cable.head.lock().unwrap_or_else(|e| e.into_inner()) =
            cable.word64(cable.tx + HEAD).load(Ordering::Acquire);
        *cable.tail.lock().unwrap_or_else(|e| e.into_inner()) =
            cable.word64(cable.rx + TAIL).load(Ordering::Acquire);
        Ok(cable)
    }

    /// What this end counts.
    pub fn stats(&self) -> Arc<CableStats> {
        self.stats.clone()
    }

    fn word64(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= CABLE_BYTES);
        // SAFETY: the offset is one of the control words, 8-aligned inside the mapping (a page
        // aligned one), which lives as long as `self`; the words are only ever accessed
        // atomically.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    fn word32(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= CABLE_BYTES);
        // SAFETY: as in `word64`.
        unsafe { &*self.map.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// The offset of slot `index` of the ring at `ring`.
    fn slot(ring: usize, index: u64) -> usize {
        ring + CONTROL_BYTES + (index % SLOTS) as usize * SLOT_BYTES
    }

    /// Sends `frames` in order; how many went (the others found the ring full or were too
    /// long, and are lost).
    pub fn send(&self, frames: &[&[u8]]) -> usize {
        let mut head = self.head.lock().unwrap_or_else(|e| e.into_inner());
        let tail = self.word64(self.tx + TAIL).load(Ordering::Acquire);
        let mut sent = 0;
        for frame in frames {
            // Wrapping: a peer's tail ahead of our head reads as a full ring.
            if head.wrapping_sub(tail) >= SLOTS || frame.len() > MAX_FRAME {
                continue;
            }
            let slot = Self::slot(self.tx, *head);
            // SAFETY: the slot lies inside the mapping and the frame fits it (checked); the
            // peer does not read the slot until the head below publishes it.
            unsafe {
                let base = self.map.as_mut_ptr().add(slot);
                base.cast::<u32>().write(frame.len() as u32);
                std::ptr::copy_nonoverlapping(frame.as_ptr(), base.add(SLOT_FRAME), frame.len());
            }
            *head += 1;
            sent += 1;
        }
        if sent > 0 {
            self.word64(self.tx + HEAD).store(*head, Ordering::Release);
            // The store-load barrier: the head is visible before `asleep` is read.
            fence(Ordering::SeqCst);
            if self.word32(self.tx + ASLEEP).load(Ordering::Relaxed) != 0 {
                // Never waiting: a full socket queue holds wake-ups enough (the receiver answers
                // them all with one look), and a peer gone takes none.
                self.stats.wakeups.fetch_add(1, Ordering::Relaxed);
                // SAFETY: one byte from a live buffer; MSG_DONTWAIT never blocks.
                unsafe {
                    libc::send(
                        self.notify.as_raw_fd(),
                        [1u8].as_ptr().cast(),
                        1,
                        libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                    )
                };
            }
        }
        sent
    }

    /// Receives one frame or more into `batch`, waiting for the first; how many.
    ///
    /// # Errors
    ///
    /// Waiting on NOTIFY failed for good.
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.recv_up_to(batch, BATCH)
    }

    /// Receives one frame into `buf`, waiting for it; its length. A longer frame is cut to
    /// `buf`, as `recv` cuts a datagram.
    ///
    /// # Errors
    ///
    /// As [`ShmCable::recv_batch`].
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut one = One { buf, len: 0 };
        self.recv_up_to(&mut one, 1)?;
        Ok(one.len)
    }

    /// Receives one frame and at most `max` into `into`'s buffers, waiting for the first; how
    /// many.
    fn recv_up_to(&self, into: &mut dyn Receiving, max: usize) -> io::Result<usize> {
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let head = self.word64(self.rx + HEAD).load(Ordering::Acquire);
            let ready = head.wrapping_sub(*tail);
            if ready > SLOTS {
                // Not a ring's state: skip to the peer's head, counted.
                self.stats.bad_indexes.fetch_add(1, Ordering::Relaxed);
                *tail = head;
                self.word64(self.rx + TAIL).store(*tail, Ordering::Release);
                continue;
            }
            if ready > 0 {
                let mut n = 0;
                for _ in 0..ready.min(max.max(1) as u64) {
                    let slot = Self::slot(self.rx, *tail);
                    *tail += 1;
                    // SAFETY: the slot lies inside the mapping; the head published it.
                    let len = unsafe { self.map.as_ptr().add(slot).cast::<u32>().read() } as usize;
                    if len > MAX_FRAME {
                        self.stats.bad_lengths.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let buf = into.buffer(n);
                    let len = len.min(buf.len());
                    // SAFETY: `len` bytes lie inside the slot (at most its frame room) and
                    // inside `buf`, a buffer of ours.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.map.as_ptr().add(slot + SLOT_FRAME),
                            buf.as_mut_ptr(),
                            len,
                        );
                    }
                    into.set_len(n, len);
                    n += 1;
                }
                // The slots are copied out: the peer may fill them again.
                self.word64(self.rx + TAIL).store(*tail, Ordering::Release);
                if n > 0 {
                    return Ok(n);
                }
                continue;
            }
            self.sleep(*tail)?;
        }
    }

    /// Waits for the peer's next frame after `tail`, having told it so.
    fn sleep(&self, tail: u64) -> io::Result<()> {
        let asleep = self.word32(self.rx + ASLEEP);
        asleep.store(1, Ordering::Relaxed);
        // The store-load barrier: `asleep` is visible before the head is read again.
        fence(Ordering::SeqCst);
        if self.word64(self.rx + HEAD).load(Ordering::Acquire) == tail {
            let mut byte = [0u8; 64];
            match self.notify.recv(&mut byte) {
                // The peer closed its end: it is gone, and wakes no one.
                Ok(0) => std::thread::sleep(self.nap),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    asleep.store(0, Ordering::Relaxed);
                    return Err(e);
                }
            }
            // Wake-ups that came meanwhile: one look at the ring answers them all.
            // SAFETY: `byte` is writable for its length; MSG_DONTWAIT never blocks.
            while unsafe {
                libc::recv(
                    self.notify.as_raw_fd(),
                    byte.as_mut_ptr().cast(),
                    byte.len(),
                    libc::MSG_DONTWAIT,
                )
            } > 0
            {}
        }
        asleep.store(0, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd as _;
    use std::sync::Arc;
    use std::time::Instant;

    impl ShmCable {
        /// The cable with a receiver that sleeps at most `nap`.
        fn napping(mut self, nap: Duration) -> Self {
            self.notify.set_read_timeout(Some(nap)).expect("timeout");
            self.nap = nap;
            self
        }
    }

    /// Both ends of a cable in one memfd, and a mapping of it to forge what a peer writes.
    fn cable() -> (ShmCable, ShmCable, MmapRaw) {
        // SAFETY: the name is a valid C string; the result is checked.
        let fd = unsafe { libc::memfd_create(c"ferroce-cable-test".as_ptr(), 0) };
        assert!(fd >= 0, "memfd_create");
        // SAFETY: a fresh descriptor of ours.
        let file = unsafe { File::from_raw_fd(fd) };
        let (a, b) = UnixDatagram::pair().expect("socketpair");
        let dup = |f: &File| f.try_clone().expect("dup").into_raw_fd();
        let end_a = ShmCable::open(dup(&file), a.into_raw_fd(), Side::A).expect("side a");
        let end_b = ShmCable::open(dup(&file), b.into_raw_fd(), Side::B).expect("side b");
        let map = MmapOptions::new()
            .len(CABLE_BYTES)
            .map_raw(&file)
            .expect("map");
        (end_a, end_b, map)
    }

    fn received(batch: &RecvBatch, n: usize) -> Vec<Vec<u8>> {
        batch.frames(n).map(<[u8]>::to_vec).collect()
    }

    /// A thread that receives on `end` once, and returns what it got.
    fn receive_in_a_thread(end: &Arc<ShmCable>) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
        let end = end.clone();
        std::thread::spawn(move || {
            let mut batch = RecvBatch::new(MAX_FRAME);
            let n = end.recv_batch(&mut batch).expect("recv");
            received(&batch, n)
        })
    }

    /// What side a's peer forges on ring 0: `frames` in slots from `at`, then the head.
    fn forge(map: &MmapRaw, at: u64, frames: &[(u32, &[u8])]) {
        for (i, (len, bytes)) in frames.iter().enumerate() {
            let slot = ShmCable::slot(0, at + i as u64);
            // SAFETY: inside the test's mapping; `bytes` fits a slot.
            unsafe {
                let base = map.as_mut_ptr().add(slot);
                base.cast::<u32>().write(*len);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(SLOT_FRAME), bytes.len());
            }
        }
        // SAFETY: ring 0's head, 8-aligned in the mapping.
        let head = unsafe { &*map.as_ptr().add(HEAD).cast::<AtomicU64>() };
        head.store(at + frames.len() as u64, Ordering::Release);
    }

    #[test]
    fn frames_cross_both_ways_in_order() {
        let (a, b, _) = cable();
        let frames: [&[u8]; 3] = [b"one", &[7; 1500], &[9; MAX_FRAME]];
        assert_eq!(a.send(&frames), 3);
        let mut batch = RecvBatch::new(MAX_FRAME);
        assert_eq!(b.recv_batch(&mut batch).expect("recv"), 3);
        assert_eq!(received(&batch, 3), frames.map(<[u8]>::to_vec));
        assert_eq!(b.send(&[b"back"]), 1);
        assert_eq!(a.recv_batch(&mut batch).expect("recv"), 1);
        assert_eq!(received(&batch, 1), [b"back".to_vec()]);
        assert_eq!(a.stats().counts().wakeups, 0, "nobody slept");
    }

    #[test]
    fn a_full_ring_loses_frames_and_never_waits() {
        let (a, b, _) = cable();
        let frame = [1u8; 64];
        let many = vec![&frame[..]; SLOTS as usize + 5];
        assert_eq!(a.send(&many), SLOTS as usize, "the ring's worth, then lost");
        assert_eq!(a.send(&[&frame]), 0, "full: lost at once");
        assert_eq!(a.send(&[&[0u8; MAX_FRAME + 1]]), 0, "too long for a slot");
        let mut batch = RecvBatch::new(MAX_FRAME);
        assert_eq!(b.recv_batch(&mut batch).expect("recv"), BATCH);
        assert_eq!(a.send(&many), BATCH, "room for what was read");
    }

    #[test]
    fn a_sleeping_receiver_is_woken_once() {
        let (a, b, map) = cable();
        // Its nap never ends in the test: the frame reaches it by the wake-up alone, and the
        // sender sees it asleep however long the test waits between looking and sending.
        let b = Arc::new(b.napping(Duration::from_secs(24 * 3600)));
        let receiver = receive_in_a_thread(&b);
        // SAFETY: ring 0's asleep word, 4-aligned in the test's mapping.
        let asleep = unsafe { &*map.as_ptr().add(ASLEEP).cast::<AtomicU32>() };
        let deadline = Instant::now() + Duration::from_secs(10);
        while asleep.load(Ordering::Acquire) == 0 {
            assert!(Instant::now() < deadline, "the receiver never slept");
            std::thread::yield_now();
        }
        assert_eq!(a.send(&[b"wake"]), 1);
        assert_eq!(receiver.join().expect("receiver"), [b"wake".to_vec()]);
        assert_eq!(a.stats().counts().wakeups, 1);
        assert_eq!(asleep.load(Ordering::Acquire), 0, "awake again");
    }

    #[test]
    fn a_receiver_that_never_wakes_does_not_make_the_sender_wait() {
        let (a, _b, map) = cable();
        // SAFETY: ring 0's asleep word in the test's mapping: b says it sleeps, and never reads.
        let asleep = unsafe { &*map.as_ptr().add(ASLEEP).cast::<AtomicU32>() };
        asleep.store(1, Ordering::Release);
        for _ in 0..SLOTS {
            assert_eq!(a.send(&[b"x"]), 1);
        }
        assert_eq!(
            a.stats().counts().wakeups,
            SLOTS,
            "a wake-up per send, none waited"
        );
        assert_eq!(a.send(&[b"x"]), 0, "full");
    }

    #[test]
    fn what_a_peer_forges_is_skipped_never_read_past_its_slot() {
        let (_a, b, map) = cable();
        let mut batch = RecvBatch::new(MAX_FRAME);
        let too_long = (MAX_FRAME as u32 + 1, &b""[..]);
        forge(&map, 0, &[too_long, (4, b"good"), (u32::MAX, b"")]);
        assert_eq!(b.recv_batch(&mut batch).expect("recv"), 1);
        assert_eq!(received(&batch, 1), [b"good".to_vec()]);
        assert_eq!(
            b.stats().counts().bad_lengths,
            2,
            "both lengths beyond a slot counted"
        );
        // A head more than a ring ahead: skipped to, counted, and the next frame taken.
        let b = Arc::new(b);
        let receiver = receive_in_a_thread(&b);
        let bogus = 3 + SLOTS + 100;
        forge(&map, 3, &[]);
        // SAFETY: ring 0's head in the test's mapping.
        let head = unsafe { &*map.as_ptr().add(HEAD).cast::<AtomicU64>() };
        head.store(bogus, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(10);
        while b.stats().counts().bad_indexes == 0 {
            assert!(Instant::now() < deadline, "the bogus head was never seen");
            std::thread::yield_now();
        }
        forge(&map, bogus, &[(5, b"after")]);
        assert_eq!(receiver.join().expect("receiver"), [b"after".to_vec()]);
        assert_eq!(b.stats().counts().bad_indexes, 1);
    }

    #[test]
    fn one_frame_at_a_time_into_the_callers_buffer_cut_as_recv_cuts() {
        let (a, b, _map) = cable();
        let frames: [&[u8]; 3] = [b"first", &[5; 100], b"third"];
        assert_eq!(a.send(&frames), 3);
        let mut buf = [0u8; 64];
        assert_eq!(b.recv(&mut buf).expect("recv"), 5);
        assert_eq!(&buf[..5], b"first");
        assert_eq!(b.recv(&mut buf).expect("recv"), 64, "cut to the buffer");
        assert_eq!(buf, [5; 64]);
        assert_eq!(b.recv(&mut buf).expect("recv"), 5);
        assert_eq!(&buf[..5], b"third");
        assert_eq!(
            b.stats().counts(),
            CableCounts::default(),
            "nothing bad, nobody woken"
        );
    }

    #[test]
    fn a_memfd_of_another_size_or_a_closed_descriptor_is_refused() {
        // SAFETY: as in `cable`.
        let fd = unsafe { libc::memfd_create(c"ferroce-cable-test".as_ptr(), 0) };
        // SAFETY: a fresh descriptor of ours.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(4096).expect("set_len");
        let (a, _b) = UnixDatagram::pair().expect("socketpair");
        let err = ShmCable::open(file.into_raw_fd(), a.into_raw_fd(), Side::A)
            .expect_err("a page is no cable");
        assert!(err.to_string().contains("MEMFD has 4096 bytes"), "{err}");
        let err = ShmCable::open(1 << 20, 1 << 20, Side::B).expect_err("no such descriptor");
        assert!(err.to_string().contains("not an open descriptor"), "{err}");
    }
}
