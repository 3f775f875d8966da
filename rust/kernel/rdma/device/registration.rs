// SPDX-License-Identifier: GPL-2.0

//! Registration of a device with ib_core, and its unregistration.

use super::*;
use crate::sync::static_lock_class;

/// How a device is registered: see [`Registration::new`].
pub struct Config<'a> {
    /// Number of ports (numbered from 1).
    pub ports: u32,
    /// Number of completion vectors consumers may spread their CQs over (at least 1).
    pub comp_vectors: u32,
    /// A port and its network device, associated before registration (RoCE).
    pub netdev: Option<(u32, &'a NetDevice)>,
    /// CQ numbers are below this.
    pub cq_numbers: u32,
    /// QP numbers are below this.
    pub qp_numbers: u32,
    /// SRQ numbers are below this.
    pub srq_numbers: u32,
    /// The node GUID (RoCE devices derive it from their MAC, [`Config::guid_from_mac`]);
    /// librdmacm finds the device of an address by it, so it must not be 0.
    pub node_guid: u64,
}

impl Config<'_> {
    /// The EUI-64 of a MAC address (`addrconf_addr_eui48()`), as RoCE devices use for their
    /// node GUID.
    pub fn guid_from_mac(mac: &[u8; 6]) -> u64 {
        u64::from_be_bytes([
            mac[0] ^ 2,
            mac[1],
            mac[2],
            0xff,
            0xfe,
            mac[3],
            mac[4],
            mac[5],
        ])
    }
}

/// A registered RDMA device, unregistered and freed when dropped.
///
/// The driver's data (`T`) is `'static`: should a `Registration` ever be leaked instead of
/// dropped, the device merely stays registered with valid data.
///
/// # Invariants
///
/// `dev` points to a `Device<T>` allocated with `_ib_alloc_device()`, whose data is initialised
/// and which is registered with ib_core.
pub struct Registration<T: Operations> {
    dev: NonNull<Device<T>>,
    handle: DeviceHandle<T>,
}

impl<T: Operations> Registration<T> {
    /// Allocates a device with `config.ports` ports, initialises the driver's data in it and
    /// registers it with ib_core under `name` (a `printf` pattern such as `c"ferroce%d"`), as a
    /// child of `parent`, which is also the device used for DMA.
    ///
    /// `config.netdev` associates a port with its network device before registration, so that
    /// ib_core builds the port's GID table from the device's addresses right away (see also
    /// [`Device::set_netdev`]). ib_core calls [`Operations`] (`query_device`,
    /// `get_port_immutable`, and for RoCE ports `add_gid`) before this returns.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when the allocation fails; the data's initialisation error; ib_core's error.
    pub fn new(
        parent: &device::Device<Bound>,
        owner: &ThisModule,
        name: &CStr,
        config: Config<'_>,
        data: impl PinInit<T, Error>,
    ) -> Result<Self> {
        let Config {
            ports,
            comp_vectors,
            netdev,
            cq_numbers,
            qp_numbers,
            srq_numbers,
            node_guid,
        } = config;
        let objects = try_pin_init!(Objects::<T> {
            cqs <- Table::new(cq_numbers, c"rdma_cq_table", static_lock_class!())?,
            qps <- Table::new(qp_numbers, c"rdma_qp_table", static_lock_class!())?,
            srqs <- Table::new(srq_numbers, c"rdma_srq_table", static_lock_class!())?,
        });
        // SAFETY: `init_net` is a static that lives forever; the size covers `struct ib_device`,
        // which is the first field of `Device<T>`.
        let ib = unsafe {
            bindings::_ib_alloc_device(
                core::mem::size_of::<Device<T>>(),
                &raw mut bindings::init_net,
            )
        };
        let dev = NonNull::new(ib.cast::<Device<T>>()).ok_or(ENOMEM)?;
        let handle = match DeviceHandle::new() {
            Ok(handle) => handle,
            Err(e) => {
                // SAFETY: The device was allocated above and never registered.
                unsafe { bindings::ib_dealloc_device(ib) };
                return Err(e);
            }
        };

        // SAFETY: `_ib_alloc_device()` returned a zeroed allocation large and aligned enough for
        // `Device<T>` (kmalloc alignment); the object tables are not initialised yet, and they
        // are pinned in the allocation.
        if let Err(e) = unsafe { objects.__init(&raw mut (*dev.as_ptr()).objects) } {
            // SAFETY: The device was allocated above and never registered.
            unsafe { bindings::ib_dealloc_device(ib) };
            return Err(e);
        }
        // SAFETY: As above, for `data`, which is not initialised yet.
        if let Err(e) = unsafe { data.__init(&raw mut (*dev.as_ptr()).data) } {
            // SAFETY: The device was allocated above and never registered; the tables were
            // initialised and are dropped once.
            unsafe {
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).objects);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        let ops = Callbacks::<T>::ops(owner);
        // SAFETY: `ib` is a valid, unregistered device that only we know; `ib_set_device_ops`
        // copies the table.
        unsafe {
            (*ib).phys_port_cnt = ports;
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            // `__be64`: the bytes in network order.
            (*ib).node_guid = u64::from_ne_bytes(node_guid.to_be_bytes());
            (*ib).num_comp_vectors = comp_vectors.max(1).try_into().unwrap_or(i32::MAX);
            (*ib_dev_device(ib)).parent = parent.as_raw();
            bindings::ib_set_device_ops(ib, &ops);
        }
        let associated = match netdev {
            Some((port, ndev)) => {
                // SAFETY: `ib` is valid; ib_core takes its own reference to the netdev.
                to_result(unsafe { bindings::ib_device_set_netdev(ib, ndev.as_raw(), port) })
            }
            None => Ok(()),
        };
        if let Err(e) = associated {
            // SAFETY: As below for a failed registration.
            unsafe {
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).data);
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).objects);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        // SAFETY: `ib` is fully set up; `parent` is a bound device that outlives the registration
        // (the registration is dropped before the parent is unbound, or leaked with `T: 'static`).
        let ret = unsafe { bindings::ib_register_device(ib, name.as_char_ptr(), parent.as_raw()) };
        if let Err(e) = to_result(ret) {
            // SAFETY: Registration failed, so ib_core does not call us any more; the data was
            // initialised above and is dropped once, then the unregistered device is freed.
            unsafe {
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).data);
                ptr::drop_in_place(&raw mut (*dev.as_ptr()).objects);
                bindings::ib_dealloc_device(ib);
            }
            return Err(e);
        }

        handle.0.set(Some(dev));
        // INVARIANT: The device is allocated, its data initialised and it is registered.
        let this = Self { dev, handle };
        // Should the registration outlive the binding of `parent` (leaked, or kept by mistake),
        // the device is unregistered when `parent` is unbound: callbacks never run with an
        // unbound parent, which is what makes `Device::parent()` sound.
        crate::devres::register(parent, UnbindGuard(this.handle()), GFP_KERNEL)?;
        Ok(this)
    }

    /// A handle that reaches the device while it is registered, for `'static` contexts.
    pub fn handle(&self) -> DeviceHandle<T> {
        self.handle.clone()
    }

    /// The registered device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is alive while `self` is.
        unsafe { self.dev.as_ref() }
    }
}

/// Unregisters a device whose registration is still alive when its parent is unbound.
struct UnbindGuard<T: Operations>(DeviceHandle<T>);

impl<T: Operations> Drop for UnbindGuard<T> {
    fn drop(&mut self) {
        let ib = {
            let guard = self.0 .0.sleeping.lock();
            let Some(ptr) = guard.as_ref() else {
                return;
            };
            let ib = ptr.0.as_ptr().cast::<bindings::ib_device>();
            // SAFETY: The device is registered (the pointer is set); the reference keeps the
            // allocation alive until `put_device` below, whatever the registration does.
            unsafe { bindings::get_device(ib_dev_device(ib)) };
            ib
        };
        // SAFETY: `ib` is alive (reference above). `ib_unregister_device()` serialises with
        // the registration's own call, which waits for this one before dropping the data.
        unsafe {
            bindings::ib_unregister_device(ib);
            bindings::put_device(ib_dev_device(ib));
        }
    }
}

impl<T: Operations> Drop for Registration<T> {
    fn drop(&mut self) {
        let ib = self.device().as_raw();
        // SAFETY: By the type invariant the device was registered. `ib_unregister_device()`
        // waits until every client has let go and no operation runs any more (and for an
        // unregistration the unbind guard started).
        unsafe { bindings::ib_unregister_device(ib) };
        // Handles reach the device until it is unregistered: while `ib_unregister_device()`
        // runs, ib_core's clients destroy their objects and first drain their QPs
        // (`ib_drain_qp()`), which waits for completions the driver's interrupt handlers
        // deliver through a handle. From here on they no longer reach it (this waits for
        // those that do).
        self.handle.0.set(None);
        // SAFETY: The device is unregistered (above) and no handle reaches it any more: the
        // data is dropped once and the allocation freed.
        unsafe {
            ptr::drop_in_place(&raw mut (*self.dev.as_ptr()).data);
            ptr::drop_in_place(&raw mut (*self.dev.as_ptr()).objects);
            bindings::ib_dealloc_device(ib);
        }
    }
}

// SAFETY: The registration can be dropped from any thread; `T` is `Send + Sync`.
unsafe impl<T: Operations> Send for Registration<T> {}
// SAFETY: Shared access only hands out `&Device<T>`, which is `Sync`.
unsafe impl<T: Operations> Sync for Registration<T> {}
