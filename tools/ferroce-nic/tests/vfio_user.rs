// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause

//! End to end over a real vfio-user socket, with the `vfio_user` crate's client standing in for
//! QEMU: config space, DMA_MAP of a memfd, SET_IRQS with an eventfd, BAR0 bring-up, a command
//! completing with an MSI-X interrupt raised by the device thread, and the control socket.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferroce_hw::*;
use ferroce_nic::device::DeviceConfig;
use ferroce_nic::device_thread::spawn_device_thread;
use ferroce_nic::function::Function;
use ferroce_nic::server::serve;
use vfio_bindings::bindings::vfio::*;
use vfio_user::Client;

const IOVA: u64 = 0x10_0000;
const MEM_SIZE: u64 = 1 << 20;

fn memfd(size: u64) -> File {
    // SAFETY: the name is a valid C string; the result is checked.
    let fd = unsafe { libc::memfd_create(c"ferroce-test".as_ptr(), libc::MFD_ALLOW_SEALING) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: `fd` is a fresh descriptor we own.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(size).expect("set_len");
    file
}

fn eventfd() -> File {
    // SAFETY: eventfd returns a new descriptor or -1 (checked).
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd");
    // SAFETY: `fd` is a fresh descriptor we own.
    unsafe { File::from_raw_fd(fd) }
}

fn wait_for_event(file: &File, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 8];
    while Instant::now() < deadline {
        // SAFETY: reading 8 bytes into a buffer of 8 bytes from an eventfd we own.
        let n = unsafe { libc::read(file.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        if n == 8 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

struct Qemu {
    client: Client,
}

impl Qemu {
    fn w32(&mut self, offset: usize, value: u32) {
        self.client
            .region_write(
                VFIO_PCI_BAR0_REGION_INDEX,
                offset as u64,
                &value.to_le_bytes(),
            )
            .expect("bar write");
    }

    fn r32(&mut self, offset: usize) -> u32 {
        let mut data = [0u8; 4];
        self.client
            .region_read(VFIO_PCI_BAR0_REGION_INDEX, offset as u64, &mut data)
            .expect("bar read");
        u32::from_le_bytes(data)
    }

    fn poll32(&mut self, offset: usize, mask: u32, want: u32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.r32(offset) & mask == want {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }
}

#[test]
fn qemu_like_client_end_to_end() {
    let dir = std::env::temp_dir().join(format!("ferroce-vfio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let socket: PathBuf = dir.join("nic.sock");
    let control = dir.join("nic.ctl");
    let nic = Function::new(DeviceConfig::default()).expect("a function");
    ferroce_nic::control::spawn_control_server(nic.clone(), &control, None).expect("control");
    spawn_device_thread(vec![nic.clone()], None).expect("device thread");
    {
        let nic = nic.clone();
        let socket = socket.clone();
        std::thread::spawn(move || serve(nic, &socket, 8));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let client = Client::new(&socket).expect("connect");
    let mut qemu = Qemu { client };

    // Config space: identity and class.
    let mut id = [0u8; 12];
    qemu.client
        .region_read(VFIO_PCI_CONFIG_REGION_INDEX, 0, &mut id)
        .expect("config read");
    assert_eq!(u16::from_le_bytes([id[0], id[1]]), PCI_VENDOR_ID);
    assert_eq!(u16::from_le_bytes([id[2], id[3]]), PCI_DEVICE_ID);
    assert_eq!(
        u32::from_le_bytes([id[9], id[10], id[11], 0]),
        PCI_CLASS_CODE
    );
    let irq = qemu
        .client
        .get_irq_info(VFIO_PCI_MSIX_IRQ_INDEX)
        .expect("irq info");
    assert_eq!(irq.count, 8);

    // Guest RAM as a memfd, mapped for DMA; a second, fd-less map like QEMU's ROM.
    let ram = memfd(MEM_SIZE);
    qemu.client
        .dma_map(0, IOVA, MEM_SIZE, ram.as_raw_fd())
        .expect("dma map");
    assert_eq!(nic.dma.regions().len(), 1);

    // MSI-X vector 1 wired to an eventfd; MSI-X enabled in config space.
    let vector1 = eventfd();
    let flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    qemu.client
        .set_irqs(VFIO_PCI_MSIX_IRQ_INDEX, flags, 1, 1, &[vector1.as_raw_fd()])
        .expect("set irqs");
    qemu.client
        .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 0x43, &[0x80])
        .expect("msix enable");
    // Memory space and bus mastering on (pci_enable_device_mem, pci_set_master).
    qemu.client
        .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 0x04, &[0x06])
        .expect("bus master enable");

    // Bring-up through BAR0.
    assert_eq!(qemu.r32(REG_ID), ID_MAGIC);
    qemu.w32(REG_DEV_CTRL, CTRL_RESET);
    assert!(
        qemu.poll32(REG_DEV_STATUS, STATUS_READY, STATUS_READY),
        "reset completes"
    );
    let (eq, sq, cq) = (IOVA, IOVA + 0x1000, IOVA + 0x2000);
    qemu.w32(REG_EQ_SETUP_BASE_LO, eq as u32);
    qemu.w32(REG_EQ_SETUP_BASE_HI, 0);
    qemu.w32(REG_EQ_SETUP_LOG_SIZE, 4);
    qemu.w32(REG_EQ_SETUP_VECTOR, 1);
    qemu.w32(REG_EQ_SETUP_CTRL, EQN_CMD | EQ_SETUP_CREATE);
    assert_eq!(qemu.r32(REG_EQ_SETUP_STATUS), u32::from(STATUS_OK));
    qemu.w32(REG_CMDQ_SQ_BASE_LO, sq as u32);
    qemu.w32(REG_CMDQ_CQ_BASE_LO, cq as u32);
    qemu.w32(REG_CMDQ_LOG_SIZE, 3);
    qemu.w32(REG_CMDQ_CTRL, CMDQ_CTRL_ENABLE);
    qemu.w32(REG_DEV_CTRL, CTRL_ENABLE);
    qemu.w32(
        REG_EQ_DB,
        EqDoorbell {
            eqn: EQN_CMD as u8,
            ci: 0,
            arm: true,
        }
        .encode(),
    );

    // One QUERY_PORT command: the device thread executes it, writes the completion into the
    // memfd and raises vector 1.
    let header = CmdHeader {
        opcode: CMD_QUERY_PORT,
        token: 77,
        ..CmdHeader::default()
    };
    let entry = encode_command(&header, &QueryPortCmd { port: 1, rsvd: 0 }.to_payload());
    ram.write_all_at(&entry, sq - IOVA).expect("write command");
    qemu.w32(REG_CMDQ_DB, 1);
    assert!(
        wait_for_event(&vector1, Duration::from_secs(5)),
        "MSI-X vector 1 fired"
    );
    let mut bytes = [0u8; CmdCompletion::SIZE];
    ram.read_exact_at(&mut bytes, cq - IOVA)
        .expect("read completion");
    let completion = CmdCompletion::decode(&bytes);
    assert_eq!(
        (completion.token, completion.status, completion.owner),
        (77, STATUS_OK, 1)
    );
    let port = completion.reply::<QueryPortCmd>().expect("port info");
    assert_eq!(port.mac, DeviceConfig::default().mac);
    let mut eqe = [0u8; Eqe::SIZE];
    ram.read_exact_at(&mut eqe, eq - IOVA).expect("read eqe");
    assert_eq!(
        EventType::try_from(Eqe::decode(&eqe).event_type),
        Ok(EventType::CmdDone)
    );

    // The host sees the MMIO writes.
    let reply = ferroce_nic::control::request(&control, "counters").expect("ctl");
    assert!(
        reply["counters"]["mmio_writes"].as_u64().unwrap_or(0) >= 12,
        "{reply}"
    );
    assert_eq!(reply["counters"]["interrupts"].as_u64(), Some(1));
    let reply = ferroce_nic::control::request(&control, "objects").expect("ctl");
    assert_eq!(reply["dma_regions"].as_array().map(Vec::len), Some(1));
    // ... and what the NIC process holds, beside what the guest created (nothing yet).
    let reply = ferroce_nic::control::request(&control, "memory").expect("ctl");
    assert!(
        reply["process_kib"]["rss_anon"].as_u64().unwrap_or(0) > 0,
        "{reply}"
    );
    assert_eq!(reply["objects"]["qps"].as_u64(), Some(0), "{reply}");
    assert_eq!(
        reply["objects"]["registered_bytes"].as_u64(),
        Some(0),
        "{reply}"
    );

    // Masking: a masked vector leaves its pending bit set (read through the PBA) until unmasked.
    qemu.client
        .set_irqs(
            VFIO_PCI_MSIX_IRQ_INDEX,
            VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK,
            1,
            1,
            &[],
        )
        .expect("mask");
    qemu.w32(
        REG_EQ_DB,
        EqDoorbell {
            eqn: EQN_CMD as u8,
            ci: 1,
            arm: true,
        }
        .encode(),
    );
    let entry = encode_command(
        &CmdHeader {
            opcode: CMD_NOP,
            token: 78,
            ..CmdHeader::default()
        },
        &[],
    );
    ram.write_all_at(&entry, sq - IOVA + 128)
        .expect("write command");
    qemu.w32(REG_CMDQ_DB, 2);
    assert!(
        qemu.poll32(MSIX_PBA_OFFSET, 1 << 1, 1 << 1),
        "pending bit set while masked"
    );
    assert!(!wait_for_event(&vector1, Duration::from_millis(50)));
    qemu.client
        .set_irqs(
            VFIO_PCI_MSIX_IRQ_INDEX,
            VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK,
            1,
            1,
            &[],
        )
        .expect("unmask");
    assert!(
        wait_for_event(&vector1, Duration::from_secs(5)),
        "delivered on unmask"
    );
    assert_eq!(qemu.r32(MSIX_PBA_OFFSET) & (1 << 1), 0);

    // DMA_UNMAP, then a command: the ring is gone, so the device goes fatal instead of crashing.
    qemu.client.dma_unmap(IOVA, MEM_SIZE).expect("unmap");
    assert!(nic.dma.regions().is_empty());
    qemu.w32(REG_CMDQ_DB, 3);
    assert!(qemu.poll32(REG_DEV_STATUS, STATUS_FATAL, STATUS_FATAL));
    assert_eq!(qemu.r32(REG_FATAL_CODE), FATAL_CMDQ_DMA);
    let _ = std::fs::remove_dir_all(&dir);
}

// --- Hostile clients -----------------------------------------------------------------------
//
// The backend is driven directly (as the `vfio_user` crate's server loop calls it): every
// refused request must return an error, which the crate turns into an error reply, and must
// leave the device as it was. The last test checks the error replies on a real socket.

use ferroce_nic::interrupts::{InterruptSink, IrqOutcome};
use ferroce_nic::memory::GuestMemory;
use ferroce_nic::server::Backend;
use std::sync::Arc;
use vfio_user::{DmaMapFlags, DmaUnmapFlags, ServerBackend};

const VECTORS: u16 = 8;

fn backend() -> (Arc<Function>, Backend) {
    let nic = Function::new(DeviceConfig {
        msix_vectors: VECTORS,
        ..DeviceConfig::default()
    })
    .expect("a function");
    let backend = Backend::new(nic.clone(), VECTORS);
    (nic, backend)
}

/// Vector 1 wired to an eventfd and delivering, as a booted guest has it.
fn wire_vector1(nic: &Function, backend: &mut Backend) -> File {
    let fd = eventfd();
    let reader = fd.try_clone().expect("clone");
    backend
        .set_irqs(
            VFIO_PCI_MSIX_IRQ_INDEX,
            VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
            1,
            1,
            vec![fd],
        )
        .expect("wire vector 1");
    nic.msix.set_control(true, false);
    assert_eq!(nic.msix.raise(1), IrqOutcome::Delivered);
    assert!(wait_for_event(&reader, Duration::from_secs(1)));
    reader
}

#[test]
fn hostile_set_irqs_are_refused_and_change_nothing() {
    let (nic, mut backend) = backend();
    let vector1 = wire_vector1(&nic, &mut backend);
    let trigger = VFIO_IRQ_SET_ACTION_TRIGGER;
    let (none, eventfd_data) = (VFIO_IRQ_SET_DATA_NONE, VFIO_IRQ_SET_DATA_EVENTFD);
    let (mask, unmask) = (VFIO_IRQ_SET_ACTION_MASK, VFIO_IRQ_SET_ACTION_UNMASK);
    let msix = VFIO_PCI_MSIX_IRQ_INDEX;
    // (what, index, flags, start, count, fds)
    let cases: Vec<(&str, u32, u32, u32, u32, usize)> = vec![
        (
            "eventfds past the last vector",
            msix,
            eventfd_data | trigger,
            1,
            8,
            0,
        ),
        (
            "start past the last vector",
            msix,
            eventfd_data | trigger,
            8,
            1,
            1,
        ),
        (
            "start + count wraps",
            msix,
            eventfd_data | trigger,
            1,
            u32::MAX,
            0,
        ),
        ("more fds than count", msix, eventfd_data | trigger, 1, 1, 2),
        (
            "fewer fds than count",
            msix,
            eventfd_data | trigger,
            0,
            2,
            1,
        ),
        ("fds without DATA_EVENTFD", msix, none | trigger, 1, 1, 1),
        (
            "two data types",
            msix,
            none | eventfd_data | trigger,
            1,
            1,
            1,
        ),
        ("no data type", msix, trigger, 1, 1, 0),
        ("two actions", msix, eventfd_data | trigger | mask, 1, 1, 1),
        ("no action", msix, none, 1, 1, 0),
        (
            "undefined flag bits",
            msix,
            eventfd_data | trigger | 1 << 8,
            1,
            1,
            1,
        ),
        (
            "software trigger past the vectors",
            msix,
            none | trigger,
            0,
            u32::MAX,
            0,
        ),
        ("mask past the vectors", msix, none | mask, 1, u32::MAX, 0),
        (
            "mask with start past the vectors",
            msix,
            none | mask,
            8,
            1,
            0,
        ),
        ("unmask past the vectors", msix, none | unmask, 7, 2, 0),
        ("mask by eventfd", msix, eventfd_data | mask, 1, 1, 1),
        ("count 0 with start", msix, none | trigger, 1, 0, 0),
        ("count 0 masking", msix, none | mask, 0, 0, 0),
        (
            "INTx past its one line",
            VFIO_PCI_INTX_IRQ_INDEX,
            eventfd_data | trigger,
            0,
            2,
            2,
        ),
        (
            "INTx start 1",
            VFIO_PCI_INTX_IRQ_INDEX,
            none | unmask,
            1,
            1,
            0,
        ),
        (
            "MSI (not offered)",
            VFIO_PCI_MSI_IRQ_INDEX,
            eventfd_data | trigger,
            0,
            1,
            1,
        ),
        (
            "ERR (not offered)",
            VFIO_PCI_ERR_IRQ_INDEX,
            eventfd_data | trigger,
            0,
            1,
            1,
        ),
        (
            "REQ (not offered)",
            VFIO_PCI_REQ_IRQ_INDEX,
            none | trigger,
            0,
            0,
            0,
        ),
    ];
    for (what, index, flags, start, count, fds) in cases {
        let fds: Vec<File> = (0..fds).map(|_| eventfd()).collect();
        let result = backend.set_irqs(index, flags, start, count, fds);
        assert!(
            result.is_err(),
            "{what}: SET_IRQS index {index} flags {flags:#x} start {start} count {count} accepted"
        );
        // Nothing changed: vector 1 is still wired, unmasked and delivering.
        assert_eq!(nic.msix.raise(1), IrqOutcome::Delivered, "{what}");
        assert!(wait_for_event(&vector1, Duration::from_secs(1)), "{what}");
        assert_eq!(nic.msix.pending_bits(), 0, "{what}");
    }
    // What QEMU sends is still accepted: INTx wiring and unmask, an MSI-X mask round trip and
    // disabling every vector.
    let intx = VFIO_PCI_INTX_IRQ_INDEX;
    backend
        .set_irqs(intx, eventfd_data | trigger, 0, 1, vec![eventfd()])
        .expect("INTx eventfd");
    backend
        .set_irqs(intx, none | unmask, 0, 1, vec![])
        .expect("INTx unmask");
    backend
        .set_irqs(msix, none | mask, 1, 1, vec![])
        .expect("mask");
    assert_eq!(nic.msix.raise(1), IrqOutcome::Pending);
    backend
        .set_irqs(msix, none | unmask, 1, 1, vec![])
        .expect("unmask");
    assert!(wait_for_event(&vector1, Duration::from_secs(1)));
    backend
        .set_irqs(msix, eventfd_data | trigger, 0, 2, vec![])
        .expect("disable vectors 0 and 1");
    assert_eq!(nic.msix.raise(1), IrqOutcome::Pending);
    backend
        .set_irqs(msix, none | trigger, 0, 0, vec![])
        .expect("disable all");
}

#[test]
fn hostile_dma_maps_and_unmaps_are_refused_and_change_nothing() {
    let (nic, mut backend) = backend();
    let ram = memfd(MEM_SIZE);
    let rw = DmaMapFlags::READ_WRITE;
    let map = |backend: &mut Backend, flags, offset, iova, size, fd: Option<&File>| {
        let fd = fd.map(|f| f.try_clone().expect("clone"));
        backend.dma_map(flags, offset, iova, size, fd)
    };
    map(&mut backend, rw, 0, IOVA, MEM_SIZE, Some(&ram)).expect("map RAM");
    let before = format!("{:?}", nic.dma.regions());
    let page = 0x1000;
    // (what, flags, file offset, iova, size, with fd)
    let cases: Vec<(&str, DmaMapFlags, u64, u64, u64, bool)> = vec![
        ("zero size", rw, 0, 0x100_0000, 0, true),
        (
            "iova + size wraps",
            rw,
            0,
            u64::MAX - 0xfff,
            2 * page,
            false,
        ),
        (
            "iova + size wraps, with fd",
            rw,
            0,
            u64::MAX - 0xfff,
            2 * page,
            true,
        ),
        ("size past the file", rw, 0, 0x100_0000, 2 * MEM_SIZE, true),
        ("huge size", rw, 0, 0x1000_0000, 1 << 62, true),
        (
            "offset past the file",
            rw,
            2 * MEM_SIZE,
            0x100_0000,
            page,
            true,
        ),
        (
            "offset + size wraps",
            rw,
            u64::MAX - 0xfff,
            0x100_0000,
            2 * page,
            true,
        ),
        ("overlapping the start", rw, 0, IOVA - page, 2 * page, true),
        (
            "overlapping the end",
            rw,
            0,
            IOVA + MEM_SIZE - page,
            2 * page,
            true,
        ),
        ("inside", rw, 0, IOVA + page, page, true),
        (
            "the same range read-only",
            DmaMapFlags::READ,
            0,
            IOVA,
            MEM_SIZE,
            true,
        ),
        ("the same range without fd", rw, 0, IOVA, MEM_SIZE, false),
        (
            "the same range, another offset",
            rw,
            page,
            IOVA,
            MEM_SIZE - page,
            true,
        ),
        (
            "covering it",
            rw,
            0,
            IOVA - page,
            MEM_SIZE + 2 * page,
            false,
        ),
        ("no access", DmaMapFlags::empty(), 0, 0x100_0000, page, true),
        (
            "undefined flag bits",
            DmaMapFlags::from_bits_retain(1 << 7 | 3),
            0,
            0x100_0000,
            page,
            true,
        ),
    ];
    for (what, flags, offset, iova, size, with_fd) in cases {
        let result = map(
            &mut backend,
            flags,
            offset,
            iova,
            size,
            with_fd.then_some(&ram),
        );
        assert!(
            result.is_err(),
            "{what}: DMA_MAP iova {iova:#x} size {size:#x} offset {offset:#x} accepted"
        );
        assert_eq!(format!("{:?}", nic.dma.regions()), before, "{what}");
    }
    let none = DmaUnmapFlags::empty();
    // (what, flags, iova, size)
    let cases: Vec<(&str, DmaUnmapFlags, u64, u64)> = vec![
        ("zero size inside the region", none, IOVA + page, 0),
        ("iova + size wraps", none, u64::MAX - 0xfff, 2 * page),
        ("the first half", none, IOVA, MEM_SIZE / 2),
        ("the second half", none, IOVA + MEM_SIZE / 2, MEM_SIZE),
        ("a page inside", none, IOVA + page, page),
        (
            "UNMAP_ALL with a range",
            DmaUnmapFlags::UNMAP_ALL,
            IOVA,
            MEM_SIZE,
        ),
        (
            "dirty page tracking",
            DmaUnmapFlags::GET_DIRTY_PAGE_INFO,
            IOVA,
            MEM_SIZE,
        ),
        (
            "undefined flag bits",
            DmaUnmapFlags::from_bits_retain(1 << 9),
            IOVA,
            MEM_SIZE,
        ),
    ];
    for (what, flags, iova, size) in cases {
        assert!(
            backend.dma_unmap(flags, iova, size).is_err(),
            "{what}: DMA_UNMAP iova {iova:#x} size {size:#x} accepted"
        );
        assert_eq!(format!("{:?}", nic.dma.regions()), before, "{what}");
    }
    // A repeat of the same map is accepted (as libvfio-user does) and changes nothing; the same
    // range from another file is refused.
    map(&mut backend, rw, 0, IOVA, MEM_SIZE, Some(&ram)).expect("repeated map");
    assert_eq!(format!("{:?}", nic.dma.regions()), before);
    let other = memfd(MEM_SIZE);
    assert!(map(&mut backend, rw, 0, IOVA, MEM_SIZE, Some(&other)).is_err());
    assert_eq!(format!("{:?}", nic.dma.regions()), before);
    // What QEMU does still works: a second, fd-less region beside the first (ROM), unmapping a
    // range with nothing in it, unmapping exactly what was mapped, and UNMAP_ALL.
    map(
        &mut backend,
        DmaMapFlags::READ,
        0,
        IOVA + MEM_SIZE,
        page,
        None,
    )
    .expect("map ROM");
    backend
        .dma_unmap(none, 0x4000_0000, page)
        .expect("unmap a hole");
    assert_eq!(nic.dma.regions().len(), 2);
    backend.dma_unmap(none, IOVA, MEM_SIZE).expect("unmap RAM");
    assert_eq!(nic.dma.regions().len(), 1);
    backend
        .dma_unmap(DmaUnmapFlags::UNMAP_ALL, 0, 0)
        .expect("unmap all");
    assert!(nic.dma.regions().is_empty());
}

#[test]
fn hostile_region_accesses_are_refused() {
    let (nic, mut backend) = backend();
    let bar0 = VFIO_PCI_BAR0_REGION_INDEX;
    let config = VFIO_PCI_CONFIG_REGION_INDEX;
    let bar_size = BAR0_SIZE as u64;
    backend
        .region_write(bar0, REG_SCRATCH as u64, &0x1234_5678u32.to_le_bytes())
        .expect("scratch");
    let writes = nic.counters.get(COUNTER_MMIO_WRITES);
    // (what, region, offset, length)
    let cases: Vec<(&str, u32, u64, usize)> = vec![
        ("BAR0 zero length", bar0, REG_SCRATCH as u64, 0),
        ("BAR0 three bytes", bar0, REG_SCRATCH as u64, 3),
        ("BAR0 sixteen bytes", bar0, REG_SCRATCH as u64, 16),
        ("BAR0 a megabyte", bar0, 0, 1 << 20),
        ("BAR0 past the end", bar0, bar_size - 2, 4),
        ("BAR0 at the end", bar0, bar_size, 4),
        ("BAR0 offset wraps", bar0, u64::MAX - 1, 4),
        ("config zero length", config, 0, 0),
        ("config past the end", config, 0xfe, 4),
        ("config at the end", config, 0x100, 1),
        ("config a megabyte", config, 0, 1 << 20),
        ("config offset wraps", config, u64::MAX, 2),
        ("BAR1", VFIO_PCI_BAR1_REGION_INDEX, 0, 4),
        ("ROM", VFIO_PCI_ROM_REGION_INDEX, 0, 4),
    ];
    for (what, region, offset, len) in cases {
        let mut data = vec![0xa5u8; len];
        assert!(
            backend.region_read(region, offset, &mut data).is_err(),
            "{what}: read of {len} bytes at {offset:#x} accepted"
        );
        assert!(
            backend.region_write(region, offset, &data).is_err(),
            "{what}: write of {len} bytes at {offset:#x} accepted"
        );
    }
    assert_eq!(
        nic.counters.get(COUNTER_MMIO_WRITES),
        writes,
        "refused writes reached the device"
    );
    assert_eq!(nic.lock().core.read_reg(REG_SCRATCH), 0x1234_5678);
    // Whole config space (QEMU reads it at realize), and every MMIO width.
    let mut space = vec![0u8; 256];
    backend.region_read(config, 0, &mut space).expect("config");
    for len in [1usize, 2, 4, 8] {
        let mut data = vec![0u8; len];
        backend
            .region_read(bar0, REG_SCRATCH as u64, &mut data)
            .expect("MMIO read");
    }
}

/// Raw vfio-user messages (the crate's client ignores error replies): a hostile SET_IRQS, DMA_UNMAP
/// and REGION_READ each get a reply with the error flag, and the connection goes on.
#[test]
fn hostile_messages_get_error_replies_over_the_socket() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    let dir = std::env::temp_dir().join(format!("ferroce-vfio-raw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let socket: PathBuf = dir.join("nic.sock");
    let nic = Function::new(DeviceConfig::default()).expect("a function");
    {
        let nic = nic.clone();
        let socket = socket.clone();
        std::thread::spawn(move || serve(nic, &socket, 8));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stream = loop {
        match UnixStream::connect(&socket) {
            Ok(stream) => break stream,
            Err(e) if Instant::now() > deadline => panic!("connect: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    const REPLY: u32 = 1;
    const ERROR: u32 = 1 << 5;
    let mut id = 0u16;
    let mut send = |stream: &mut UnixStream, command: u16, body: &[u8]| -> u32 {
        id += 1;
        let mut msg = Vec::new();
        msg.extend_from_slice(&id.to_le_bytes());
        msg.extend_from_slice(&command.to_le_bytes());
        msg.extend_from_slice(&(16 + body.len() as u32).to_le_bytes());
        msg.extend_from_slice(&0u32.to_le_bytes());
        msg.extend_from_slice(&0u32.to_le_bytes());
        msg.extend_from_slice(body);
        stream.write_all(&msg).expect("send");
        let mut reply = [0u8; 16];
        stream.read_exact(&mut reply).expect("reply");
        assert_eq!(u16::from_le_bytes([reply[0], reply[1]]), id);
        let flags = u32::from_le_bytes(reply[8..12].try_into().expect("4"));
        let size = u32::from_le_bytes(reply[4..8].try_into().expect("4")) as usize;
        let mut rest = vec![0u8; size.saturating_sub(16)];
        stream.read_exact(&mut rest).expect("reply body");
        flags
    };
    let words = |w: &[u32]| -> Vec<u8> { w.iter().flat_map(|x| x.to_le_bytes()).collect() };
    // SET_IRQS (8): argsz, flags, index, start, count — vectors 4..=11 of 8.
    let set_irqs = words(&[
        20,
        VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK,
        VFIO_PCI_MSIX_IRQ_INDEX,
        4,
        8,
    ]);
    assert_eq!(send(&mut stream, 8, &set_irqs), REPLY | ERROR, "SET_IRQS");
    // DMA_UNMAP (3): argsz, flags, address, size — a wrapping range.
    let mut unmap = words(&[24, 0]);
    unmap.extend_from_slice(&(u64::MAX - 0xfff).to_le_bytes());
    unmap.extend_from_slice(&0x2000u64.to_le_bytes());
    assert_eq!(send(&mut stream, 3, &unmap), REPLY | ERROR, "DMA_UNMAP");
    // REGION_READ (9): offset, region, count — 64 KiB of BAR0 in one access.
    let mut read = (REG_SCRATCH as u64).to_le_bytes().to_vec();
    read.extend_from_slice(&words(&[VFIO_PCI_BAR0_REGION_INDEX, 1 << 16]));
    assert_eq!(send(&mut stream, 9, &read), REPLY | ERROR, "REGION_READ");
    // The connection still serves: a 4-byte read of the ID register.
    let mut read = (REG_ID as u64).to_le_bytes().to_vec();
    read.extend_from_slice(&words(&[VFIO_PCI_BAR0_REGION_INDEX, 4]));
    assert_eq!(send(&mut stream, 9, &read), REPLY, "REGION_READ of REG_ID");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_dma_while_bus_mastering_is_off() {
    let (nic, mut backend) = backend();
    let ram = memfd(MEM_SIZE);
    backend
        .dma_map(
            DmaMapFlags::READ | DmaMapFlags::WRITE,
            0,
            IOVA,
            MEM_SIZE,
            Some(ram.try_clone().expect("clone")),
        )
        .expect("dma map");
    let mut byte = [0u8; 1];
    // The command register starts clear, as at reset: the device reaches no memory.
    assert!(!nic.dma.bus_master());
    assert!(nic.dma.read(IOVA, &mut byte).is_err());
    assert_eq!(nic.dma.blocked(), 1);
    // The driver turns bus mastering on, then off again (a dead device's memory is freed).
    backend
        .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 0x04, &[0x06])
        .expect("command register");
    assert!(nic.dma.read(IOVA, &mut byte).is_ok());
    backend
        .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 0x04, &[0x02])
        .expect("command register");
    assert!(nic.dma.write(IOVA, &[1]).is_err());
    assert_eq!(nic.dma.blocked(), 2);
    // A reset clears it too.
    backend
        .region_write(VFIO_PCI_CONFIG_REGION_INDEX, 0x04, &[0x06])
        .expect("command register");
    backend.reset().expect("reset");
    assert!(!nic.dma.bus_master());
}
