// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! The ferroce emulated RDMA NIC.
//!
//! The device model ([`device::Device`]) is independent of vfio-user: it has a BAR0 read/write
//! API, reaches guest memory through [`memory::GuestMemory`] and raises interrupts through
//! [`interrupts::InterruptSink`]. [`server`] wires it to QEMU through the `vfio_user` crate; the
//! tests drive it directly.
//!
//! # A map for a newcomer
//!
//! Threads. Each PCI function ([`function::Function`], the PF and any VFs) has a vfio-user
//! thread ([`server`]); the NIC has one device thread ([`device_thread`]) for all its functions
//! and one thread per port side ([`port`]). The device thread sleeps on events ([`wake`]: an
//! epoll set of one eventfd, which every other thread signals, and a timerfd armed to the
//! device's next deadline) and polls nothing but doorbell records ([`records`]: for a while
//! after activity, or for ever on a core of its own, [`poll_cpu`]).
//!
//! Where a doorbell goes. The guest's store to a doorbell page reaches [`server::Backend`] as a
//! vfio-user region write, then [`function::Function::bar0_write`], which puts it in the
//! function's [`mailbox`] without taking the device's lock and wakes the device thread. The
//! device thread's round starts by taking the lock, which applies the mailbox in order:
//! [`bar0`] decodes the offset and [`doorbell`] the register (QID translation, index checks).
//! A send queue doorbell queues the QP as work ([`device::Work`]); the round fetches its WQEs
//! ([`qp`]: from guest memory or the push window), types each once into a
//! [`engine::SendWork`] (`ferroce_hw::SendOp::parse`), and hands it to the engine.
//!
//! Where a frame goes. The engine's requester ([`engine::requester`]) builds packets into
//! frames ([`engine::io::Io`]: headers from [`engine::headers::Headers`], the payload read from
//! guest memory straight into the frame, ICRC, transmit faults) and hands them to the port,
//! which puts them on the wire. A frame from the wire goes from the
//! port's thread to the function's [`engine::wire::RxQueue`] and wakes the device thread; the
//! engine ([`engine::roce::RoceEngine`]) checks it (MAC, ICRC, GID, P_Key, QP state and peer)
//! and hands it to the QP's responder ([`engine::responder`], a state machine of
//! `RespState`s) or, for a response, to its completer ([`engine::completer`]). Payload is
//! written to guest memory through the MRs ([`objects`]), completions become CQEs ([`cq`]),
//! CQEs events ([`eq`]), events interrupts ([`interrupts`]).
//!
//! Who owns what. [`device::DeviceCore`] owns the function's registers, command queue
//! ([`cmdq`], [`commands`]), object tables ([`objects::Objects`]: QPs, CQs, MRs, SRQs, AHs,
//! GIDs, contexts), the doorbell decoder ([`doorbell::Doorbells`]) and its [`bus::Bus`]:
//! guest memory, MSI-X, counters, trace and clock, the only way out of the function. An
//! object's own rules are methods of the object taking the bus where they touch memory (an
//! [`eq::Eq`] writes its EQEs and applies its doorbells; a QP takes its SQ doorbells,
//! [`objects::Qp::ring_sq`]); `DeviceCore` keeps what involves several parts. Each QP object
//! ([`objects::Qp`]) owns everything of its QP, its transport state included
//! ([`engine::roce::QpTransport`]: requester, completer and responder, PSNs, WQEs in flight,
//! timers), as rxe's `rxe_qp` does: the engine borrows a QP for a turn
//! ([`engine::EngineHost::check_out`], a [`engine::roce::QpCtx`]) and gives it back, and keeps
//! only the set of QPs that have work, which is all a round visits. The engine reaches the
//! device only through [`engine::EngineHost`].

#![warn(missing_docs)]

pub mod bar0;
pub mod bus;
pub mod capture;
pub mod clock;
pub mod cmdq;
pub mod commands;
pub mod config_space;
pub mod control;
pub mod counters;
pub mod cq;
pub mod device;
pub mod device_thread;
pub mod dma;
pub mod doorbell;
pub mod engine;
pub mod eq;
pub mod function;
pub mod functions;
pub mod interrupts;
pub mod latency;
pub mod lies;
pub mod mailbox;
pub mod mcast;
pub mod memory;
pub mod objects;
pub mod poll_cpu;
pub mod port;
pub mod qp;
pub mod records;
pub mod schedule;
pub mod server;
pub mod trace;
pub mod wake;
