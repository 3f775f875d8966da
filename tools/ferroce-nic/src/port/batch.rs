// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! Frames in batches: many per system call on a unix datagram socket (`sendmmsg`, `recvmmsg`),
//! and the buffer an engine's frames wait in until its round ends ([`Frames`]).
//!
//! A frame per `sendto` and per `recv` was half of the device thread's time and most of the
//! port thread's in a profile of ib_write_bw at MTU 1500 (each call also wakes the thread at
//! the other end). In a batch the receiver wakes once for what the sender queued in one call.

use std::io;
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixDatagram;

/// Most frames in one system call.
pub const BATCH: usize = 64;

/// Frames waiting to leave together, each in its own buffer, and the buffers of frames that
/// left, for the engine's next frames: a frame the engine hands over is not copied, and in a
/// steady stream no buffer is allocated.
#[derive(Debug, Default)]
pub struct Frames {
    waiting: Vec<Vec<u8>>,
    free: Vec<Vec<u8>>,
}

impl Frames {
    /// Adds `frame`.
    pub fn push(&mut self, frame: Vec<u8>) {
        self.waiting.push(frame);
    }

    /// Adds a copy of `frame`.
    pub fn push_copy(&mut self, frame: &[u8]) {
        let mut buffer = self.take_free().unwrap_or_default();
        buffer.clear();
        buffer.extend_from_slice(frame);
        self.push(buffer);
    }

    /// The buffer of a frame that left, if there is one.
    pub fn take_free(&mut self) -> Option<Vec<u8>> {
        self.free.pop()
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no frame waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The frames, in the order they were pushed.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.waiting.iter().map(Vec::as_slice)
    }

    /// Forgets the frames: they left. Their buffers are kept for the next ones, up to two
    /// batches' worth.
    pub fn clear(&mut self) {
        let room = (2 * BATCH).saturating_sub(self.free.len());
        let Self { waiting, free } = self;
        // Dropping the drain empties `waiting`, past `room` too.
        free.extend(waiting.drain(..).take(room));
    }
}

/// Buffers for up to [`BATCH`] received frames.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
}

impl RecvBatch {
    /// [`BATCH`] buffers of `size` bytes each (a longer datagram is cut, as `recv` cuts it).
    pub fn new(size: usize) -> Self {
        Self {
            bufs: (0..BATCH).map(|_| vec![0; size]).collect(),
            lens: vec![0; BATCH],
        }
    }

    /// The first `n` frames received.
    pub fn frames(&self, n: usize) -> impl Iterator<Item = &[u8]> {
        self.bufs
            .iter()
            .zip(&self.lens)
            .take(n)
            .filter_map(|(buf, &len)| buf.get(..len))
    }

    /// Buffer `i` (empty past the batch), for a cable that fills buffers itself.
    pub fn buffer(&mut self, i: usize) -> &mut [u8] {
        self.bufs.get_mut(i).map_or(&mut [], |b| b.as_mut_slice())
    }

    /// Says that buffer `i` holds a frame of `len` bytes.
    pub fn set_len(&mut self, i: usize, len: usize) {
        if let Some(l) = self.lens.get_mut(i) {
            *l = len;
        }
    }

    /// The first buffer, for a cable that receives a frame at a time.
    pub fn first(&mut self) -> &mut [u8] {
        self.bufs.first_mut().map_or(&mut [], |b| b.as_mut_slice())
    }

    /// Says that the first buffer holds a frame of `len` bytes.
    pub fn set_first(&mut self, len: usize) {
        if let Some(l) = self.lens.first_mut() {
            *l = len;
        }
    }
}

/// Sends up to [`BATCH`] of `frames`, in order, in one `sendmmsg` on `sock` (connected);
/// returns how many went. A blocking socket waits for room for the first; an error on the
/// first frame is returned, one on a later frame ends the batch early (the caller sends the
/// rest again and meets the error then).
pub fn send_many(sock: &UnixDatagram, frames: &[&[u8]]) -> io::Result<usize> {
    let frames = frames.get(..BATCH.min(frames.len())).unwrap_or_default();
    let mut iovs: Vec<libc::iovec> = frames
        .iter()
        .map(|f| libc::iovec {
            iov_base: f.as_ptr().cast_mut().cast(),
            iov_len: f.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iovs.iter_mut().map(message).collect();
    loop {
        // SAFETY: `msgs` holds `msgs.len()` headers, each pointing at one iovec of `iovs`,
        // which points at a frame of `frames`; all of them outlive the call, and the kernel
        // only reads the frames.
        let n = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                0,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives up to [`BATCH`] frames into `batch` in one `recvmmsg` on `sock`: waits for the
/// first, then takes what else is queued without waiting (`MSG_WAITFORONE`). Returns how many.
pub fn recv_many(sock: &UnixDatagram, batch: &mut RecvBatch) -> io::Result<usize> {
    let mut iovs: Vec<libc::iovec> = batch
        .bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    let mut msgs: Vec<libc::mmsghdr> = iovs.iter_mut().map(message).collect();
    let n = loop {
        // SAFETY: `msgs` holds `msgs.len()` headers, each pointing at one iovec of `iovs`,
        // which points at a buffer of `batch` of the iovec's length; all of them outlive the
        // call, and nothing else uses the buffers meanwhile. No timeout.
        let n = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    for (len, msg) in batch.lens.iter_mut().zip(&msgs).take(n) {
        *len = msg.msg_len as usize;
    }
    Ok(n)
}

/// A message header of one buffer, no address, no control data.
fn message(iov: &mut libc::iovec) -> libc::mmsghdr {
    // SAFETY: `mmsghdr` is a plain C struct of integers and pointers, for which all zeroes
    // is a valid value (no address, no control data, no flags).
    let mut msg: libc::mmsghdr = unsafe { std::mem::zeroed() };
    msg.msg_hdr.msg_iov = iov;
    msg.msg_hdr.msg_iovlen = 1;
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_in_order() {
        let mut f = Frames::default();
        assert!(f.is_empty());
        f.push_copy(&[1; 60]);
        f.push(vec![2; 1514]);
        f.push_copy(&[]);
        f.push(vec![3; 9000]);
        let lens: Vec<(usize, u8)> = f
            .iter()
            .map(|x| (x.len(), x.first().copied().unwrap_or(0)))
            .collect();
        assert_eq!(lens, [(60, 1), (1514, 2), (0, 0), (9000, 3)]);
        f.clear();
        assert_eq!(f.len(), 0);
        assert_eq!(f.iter().count(), 0);
        // The buffers stay for the next frames.
        let reused = f.take_free().expect("a buffer that left");
        assert!(reused.capacity() >= 60);
        f.push_copy(&[4; 100]);
        assert_eq!(f.iter().next(), Some(&[4u8; 100][..]));
    }

    #[test]
    fn a_batch_crosses_in_order_and_is_taken_in_one_call() {
        let (a, b) = UnixDatagram::pair().expect("pair");
        let frames: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let mut sent = 0;
        while sent < refs.len() {
            sent += send_many(&a, &refs[sent..]).expect("send");
        }
        let mut batch = RecvBatch::new(2048);
        let mut got = Vec::new();
        let first = recv_many(&b, &mut batch).expect("recv");
        assert_eq!(
            first, BATCH,
            "all that was queued, up to a batch, in one call"
        );
        got.extend(batch.frames(first).map(<[u8]>::to_vec));
        while got.len() < frames.len() {
            let n = recv_many(&b, &mut batch).expect("recv");
            got.extend(batch.frames(n).map(<[u8]>::to_vec));
        }
        assert_eq!(got, frames);
    }

    #[test]
    fn a_batch_to_nobody_is_an_error() {
        let sock = UnixDatagram::unbound().expect("socket");
        let e = send_many(&sock, &[&[0u8; 60]]).expect_err("not connected");
        assert_eq!(e.raw_os_error(), Some(libc::ENOTCONN));
    }
}
