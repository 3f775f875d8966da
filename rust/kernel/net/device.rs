// SPDX-License-Identifier: GPL-2.0

//! Network devices (`struct net_device`): references, lookup and notifiers.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use crate::{
    bindings,
    error::to_result,
    prelude::*,
    sync::{
        aref::{
            ARef,
            AlwaysRefCounted, //
        },
        rcu,
    },
    types::Opaque, //
};
use core::{
    marker::PhantomPinned,
    ptr::NonNull, //
};

/// A network device.
///
/// Held as [`ARef<NetDevice>`], which keeps a `dev_hold()` reference: the structure stays
/// valid, though the device may be unregistered meanwhile (a holder must let go when it sees
/// [`NetdevEvent::Unregister`]).
///
/// # Invariants
///
/// `self.0` is a valid `struct net_device` with a non-zero reference count.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `dev_hold`/`dev_put` may be called from any thread; what we read is read-only or
// updated under locks the C side owns.
unsafe impl Send for NetDevice {}
// SAFETY: As above.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold`/`dev_put` keep the structure alive while the count is non-zero.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference.
        unsafe { bindings::dev_put(obj.cast::<bindings::net_device>().as_ptr()) };
    }
}

impl NetDevice {
    /// Returns a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid `net_device` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `repr(transparent)`; validity is the caller's guarantee.
        unsafe { &*ptr.cast() }
    }

    /// The raw `struct net_device`.
    pub fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// Finds the Ethernet device of the initial network namespace that has `mac`.
    pub fn find_by_mac(mac: &[u8; 6]) -> Option<ARef<Self>> {
        let _rcu = rcu::read_lock();
        // SAFETY: We are in an RCU read-side section as `dev_getbyhwaddr_rcu` requires;
        // `init_net` is static and `mac` has the 6 bytes an Ethernet address is.
        let dev = unsafe {
            bindings::dev_getbyhwaddr_rcu(
                &raw mut bindings::init_net,
                bindings::ARPHRD_ETHER as u16,
                mac.as_ptr().cast(),
            )
        };
        // SAFETY: Within the RCU section the device found is valid; `from` takes a reference
        // that keeps it alive after the section ends.
        NonNull::new(dev).map(|dev| ARef::from(unsafe { Self::from_raw(dev.as_ptr()) }))
    }

    // No `&bindings::net_device` is ever made: the C side changes the device under us, so every
    // field is read through a raw pointer, once.

    /// The interface name (e.g. `eth0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: By the type invariant the device is valid; `name` is a NUL-terminated array
        // inside it, which lives as long as `self`.
        unsafe { CStr::from_char_ptr((&raw const (*self.as_raw()).name).cast()) }
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: The device is valid; the index is set at registration and read once here.
        unsafe { core::ptr::read_volatile(&raw const (*self.as_raw()).ifindex) }
    }

    /// The MTU.
    pub fn mtu(&self) -> u32 {
        // SAFETY: `mtu` is written with WRITE_ONCE by the C side; a torn read is impossible for
        // an aligned `unsigned int`.
        unsafe { core::ptr::read_volatile(&raw const (*self.0.get()).mtu) }
    }

    /// The hardware address, when it is a 6-byte (Ethernet) one.
    pub fn mac(&self) -> Option<[u8; 6]> {
        let dev = self.as_raw();
        // SAFETY: The device is valid; both fields are read once through raw pointers.
        let (len, addr) = unsafe {
            (
                core::ptr::read_volatile(&raw const (*dev).addr_len),
                core::ptr::read_volatile(&raw const (*dev).dev_addr),
            )
        };
        if len != 6 || addr.is_null() {
            return None;
        }
        let mut mac = [0u8; 6];
        // SAFETY: `dev_addr` points to `addr_len` (6) bytes owned by the device.
        unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), 6) };
        Some(mac)
    }

    /// Whether the interface is administratively up.
    pub fn is_running(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::netif_running(self.as_raw()) }
    }

    /// Whether the link has carrier.
    pub fn has_carrier(&self) -> bool {
        // SAFETY: The device is valid.
        unsafe { bindings::netif_carrier_ok(self.as_raw()) }
    }
}

/// The netdevice notifier events a [`NotifierHandler`] hears about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The device was registered (also replayed for existing devices at registration).
    Register,
    /// The device is being unregistered: drop references to it.
    Unregister,
    /// The device was brought up.
    Up,
    /// The device was brought down.
    Down,
    /// Its state changed (e.g. carrier).
    Change,
    /// Its MTU changed.
    ChangeMtu,
    /// Its hardware address changed.
    ChangeAddr,
}

impl NetdevEvent {
    fn from_raw(event: c_ulong) -> Option<Self> {
        Some(match u32::try_from(event).ok()? {
            bindings::netdev_cmd_NETDEV_REGISTER => Self::Register,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            _ => return None,
        })
    }
}

/// Driver code run for netdevice events; called with RTNL held, so it may sleep but must not
/// take RTNL itself.
pub trait NotifierHandler: Send + Sync + 'static {
    /// `dev` had `event`.
    fn event(&self, event: NetdevEvent, dev: &NetDevice);
}

/// A registered netdevice notifier, unregistered when dropped.
///
/// Registration replays [`NetdevEvent::Register`] and [`NetdevEvent::Up`] for the devices that
/// already exist; unregistration replays the reverse.
///
/// # Invariants
///
/// `nb` is registered with `register_netdevice_notifier()` while `self` is alive.
#[pin_data(PinnedDrop)]
pub struct Notifier<T: NotifierHandler> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    handler: T,
    #[pin]
    _pin: PhantomPinned,
}

impl<T: NotifierHandler> Notifier<T> {
    /// Registers `handler` for the events of all network devices.
    ///
    /// `T` is `'static`: a `Notifier` that is leaked instead of dropped stays registered with
    /// valid data.
    pub fn new(handler: T) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            handler,
            _pin: PhantomPinned,
            nb <- Opaque::try_ffi_init(move |nb: *mut bindings::notifier_block| {
                // SAFETY: `nb` is valid for writes; the handler is initialised before `nb`
                // (fields initialise in order), so the callback finds it.
                unsafe {
                    nb.write(bindings::notifier_block {
                        notifier_call: Some(Self::callback),
                        next: core::ptr::null_mut(),
                        priority: 0,
                    });
                    to_result(bindings::register_netdevice_notifier(nb))
                }
            }),
        })
    }

    /// The netdevice notifier's `notifier_call`.
    ///
    /// # Safety
    ///
    /// Only the netdevice notifier chain calls it, with `nb` the `notifier_block` of a
    /// registered `Notifier` and `info` the event's `netdev_notifier_info`.
    unsafe extern "C" fn callback(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        info: *mut c_void,
    ) -> c_int {
        let Some(event) = NetdevEvent::from_raw(event) else {
            return bindings::NOTIFY_DONE as c_int;
        };
        // SAFETY: `nb` is the `nb` field of a pinned, registered `Notifier<T>`.
        let this = unsafe { &*crate::container_of!(Opaque::cast_from(nb), Self, nb) };
        // SAFETY: For netdevice events `info` is a `netdev_notifier_info` naming a valid device,
        // which stays valid during the call.
        let dev =
            unsafe { NetDevice::from_raw(bindings::netdev_notifier_info_to_dev(info.cast())) };
        this.handler.event(event, dev);
        bindings::NOTIFY_DONE as c_int
    }
}

// SAFETY: The notifier block is only touched by the notifier chain (under its own locking) and
// by `drop`; the handler is `Send + Sync`.
unsafe impl<T: NotifierHandler> Send for Notifier<T> {}
// SAFETY: Shared access exposes nothing; callbacks only use the `Sync` handler.
unsafe impl<T: NotifierHandler> Sync for Notifier<T> {}

#[pinned_drop]
impl<T: NotifierHandler> PinnedDrop for Notifier<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered; after this returns the callback no
        // longer runs.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}

#[kunit_tests(rust_net_device)]
mod tests {
    use super::*;

    #[test]
    fn netdev_events_decode() {
        let raw = |cmd: u32| c_ulong::try_from(cmd).unwrap_or(c_ulong::MAX);
        assert_eq!(
            NetdevEvent::from_raw(raw(bindings::netdev_cmd_NETDEV_UP)),
            Some(NetdevEvent::Up)
        );
        assert_eq!(
            NetdevEvent::from_raw(raw(bindings::netdev_cmd_NETDEV_UNREGISTER)),
            Some(NetdevEvent::Unregister)
        );
        assert_eq!(
            NetdevEvent::from_raw(raw(bindings::netdev_cmd_NETDEV_CHANGEMTU)),
            Some(NetdevEvent::ChangeMtu)
        );
        // Events nobody handles are not made up.
        assert_eq!(
            NetdevEvent::from_raw(raw(bindings::netdev_cmd_NETDEV_GOING_DOWN)),
            None
        );
        assert_eq!(NetdevEvent::from_raw(c_ulong::MAX), None);
    }

    #[test]
    fn loopback_is_not_found_by_an_unused_mac() {
        assert!(NetDevice::find_by_mac(&[0x02, 0, 0, 0, 0, 0x42]).is_none());
    }
}
