// SPDX-License-Identifier: GPL-2.0

//! The `ib_device_ops` trampolines: each `extern "C"` callback ib_core calls forwards to
//! the driver's [`Operations`].

use super::*;

/// The `ib_device_ops` callbacks that forward to `T`'s [`Operations`].
pub(super) struct Callbacks<T>(PhantomData<T>);

impl<T: Operations> Callbacks<T> {
    /// `struct ib_device_ops::query_device` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core only calls back registered devices, which are `Device<T>`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let mut attr = DeviceAttr(NonNull::new(attr).ok_or(EINVAL)?, PhantomData);
            T::query_device(dev, &mut attr)?;
            Ok(0)
        })
    }

    /// `struct ib_device_ops::query_port` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let mut attr = PortAttr(NonNull::new(attr).ok_or(EINVAL)?, PhantomData);
            T::query_port(dev, port, &mut attr)?;
            Ok(0)
        })
    }

    /// `struct ib_device_ops::get_port_immutable` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        out: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let imm = T::get_port_immutable(dev, port)?;
            // SAFETY: ib_core passes a valid, writable `ib_port_immutable`.
            unsafe {
                (*out).pkey_tbl_len = imm.pkey_tbl_len.try_into()?;
                (*out).gid_tbl_len = imm.gid_tbl_len.try_into()?;
                (*out).core_cap_flags = imm.core_cap_flags;
                (*out).max_mad_size = imm.max_mad_size;
            }
            Ok(0)
        })
    }

    /// `struct ib_device_ops::get_link_layer` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn get_link_layer(
        ib: *mut bindings::ib_device,
        port: u32,
    ) -> bindings::rdma_link_layer {
        // SAFETY: As in `query_device`.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        match T::get_link_layer(dev, port) {
            LinkLayer::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
            LinkLayer::InfiniBand => bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
        }
    }

    /// `struct ib_device_ops::add_gid` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn add_gid(
        attr: *const bindings::ib_gid_attr,
        _context: *mut *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core passes a valid attribute of a registered `Device<T>` and holds the
            // table lock for the duration of the call.
            let (dev, attr) = unsafe {
                (
                    Device::<T>::from_raw((*attr).device),
                    GidAttr::from_raw(attr),
                )
            };
            T::add_gid(dev, attr)?;
            Ok(0)
        })
    }

    /// `struct ib_device_ops::del_gid` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn del_gid(
        attr: *const bindings::ib_gid_attr,
        _context: *mut *mut c_void,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `add_gid`.
            let (dev, attr) = unsafe {
                (
                    Device::<T>::from_raw((*attr).device),
                    GidAttr::from_raw(attr),
                )
            };
            T::del_gid(dev, attr)?;
            Ok(0)
        })
    }

    /// `struct ib_device_ops::query_pkey` for `T`.
    ///
    /// # Safety
    ///
    /// Only ib_core calls it, through the ops table of a device registered with `T`'s
    /// [`Operations`], with the arguments of that callback.
    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ib) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: ib_core passes a valid, writable `u16`.
            unsafe { *pkey = value };
            Ok(0)
        })
    }

    pub(super) fn ops(owner: &ThisModule) -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: owner.as_ptr(),
            driver_id: T::DRIVER_ID.into(),
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            get_port_immutable: Some(Self::get_port_immutable),
            get_link_layer: if T::HAS_GET_LINK_LAYER {
                Some(Self::get_link_layer)
            } else {
                None
            },
            add_gid: if T::HAS_ADD_GID {
                Some(Self::add_gid)
            } else {
                None
            },
            del_gid: if T::HAS_DEL_GID {
                Some(Self::del_gid)
            } else {
                None
            },
            query_pkey: if T::HAS_QUERY_PKEY {
                Some(Self::query_pkey)
            } else {
                None
            },
            alloc_hw_port_stats: if T::HAS_GET_HW_STATS {
                Some(crate::rdma::stats::alloc_hw_port_stats::<T>)
            } else {
                None
            },
            get_hw_stats: if T::HAS_GET_HW_STATS {
                Some(crate::rdma::stats::get_hw_stats::<T>)
            } else {
                None
            },
            alloc_pd: if T::HAS_ALLOC_PD {
                Some(crate::rdma::pd::alloc_pd::<T>)
            } else {
                None
            },
            dealloc_pd: if T::HAS_ALLOC_PD {
                Some(crate::rdma::pd::dealloc_pd::<T>)
            } else {
                None
            },
            size_ib_pd: Pd::<T>::ALLOC_SIZE,
            alloc_xrcd: if T::HAS_ALLOC_XRCD {
                Some(crate::rdma::xrcd::alloc_xrcd::<T>)
            } else {
                None
            },
            dealloc_xrcd: if T::HAS_ALLOC_XRCD {
                Some(crate::rdma::xrcd::dealloc_xrcd::<T>)
            } else {
                None
            },
            size_ib_xrcd: Xrcd::<T>::ALLOC_SIZE,
            create_cq: if T::HAS_CREATE_CQ {
                Some(crate::rdma::cq::create_cq::<T>)
            } else {
                None
            },
            destroy_cq: if T::HAS_CREATE_CQ {
                Some(crate::rdma::cq::destroy_cq::<T>)
            } else {
                None
            },
            poll_cq: if T::HAS_POLL_CQ {
                Some(crate::rdma::cq::poll_cq::<T>)
            } else {
                None
            },
            req_notify_cq: if T::HAS_REQ_NOTIFY_CQ {
                Some(crate::rdma::cq::req_notify_cq::<T>)
            } else {
                None
            },
            modify_cq: if T::HAS_MODIFY_CQ {
                Some(crate::rdma::cq::modify_cq::<T>)
            } else {
                None
            },
            resize_user_cq: if T::HAS_RESIZE_USER_CQ {
                Some(crate::rdma::cq::resize_user_cq::<T>)
            } else {
                None
            },
            size_ib_cq: Cq::<T>::ALLOC_SIZE,
            create_qp: if T::HAS_CREATE_QP {
                Some(crate::rdma::qp::create_qp::<T>)
            } else {
                None
            },
            modify_qp: if T::HAS_MODIFY_QP {
                Some(crate::rdma::qp::modify_qp::<T>)
            } else {
                None
            },
            query_qp: if T::HAS_QUERY_QP {
                Some(crate::rdma::qp::query_qp::<T>)
            } else {
                None
            },
            destroy_qp: if T::HAS_CREATE_QP {
                Some(crate::rdma::qp::destroy_qp::<T>)
            } else {
                None
            },
            attach_mcast: if T::HAS_ATTACH_MCAST {
                Some(crate::rdma::qp::attach_mcast::<T>)
            } else {
                None
            },
            detach_mcast: if T::HAS_ATTACH_MCAST {
                Some(crate::rdma::qp::detach_mcast::<T>)
            } else {
                None
            },
            post_send: if T::HAS_POST_SEND {
                Some(crate::rdma::qp::post_send::<T>)
            } else {
                None
            },
            post_recv: if T::HAS_POST_RECV {
                Some(crate::rdma::qp::post_recv::<T>)
            } else {
                None
            },
            size_ib_qp: Qp::<T>::ALLOC_SIZE,
            create_srq: if T::HAS_CREATE_SRQ {
                Some(crate::rdma::srq::create_srq::<T>)
            } else {
                None
            },
            modify_srq: if T::HAS_MODIFY_SRQ {
                Some(crate::rdma::srq::modify_srq::<T>)
            } else {
                None
            },
            query_srq: if T::HAS_QUERY_SRQ {
                Some(crate::rdma::srq::query_srq::<T>)
            } else {
                None
            },
            destroy_srq: if T::HAS_CREATE_SRQ {
                Some(crate::rdma::srq::destroy_srq::<T>)
            } else {
                None
            },
            post_srq_recv: if T::HAS_POST_SRQ_RECV {
                Some(crate::rdma::srq::post_srq_recv::<T>)
            } else {
                None
            },
            size_ib_srq: Srq::<T>::ALLOC_SIZE,
            create_ah: if T::HAS_CREATE_AH {
                Some(crate::rdma::ah::create_ah::<T>)
            } else {
                None
            },
            // The same call with a `udata` (uverbs); `Operations::create_ah` gets it.
            create_user_ah: if T::HAS_CREATE_AH {
                Some(crate::rdma::ah::create_ah::<T>)
            } else {
                None
            },
            destroy_ah: if T::HAS_CREATE_AH {
                Some(crate::rdma::ah::destroy_ah::<T>)
            } else {
                None
            },
            size_ib_ah: Ah::<T>::ALLOC_SIZE,
            get_dma_mr: if T::HAS_GET_DMA_MR {
                Some(crate::rdma::mr::get_dma_mr::<T>)
            } else {
                None
            },
            reg_user_mr: if T::HAS_REG_USER_MR {
                Some(crate::rdma::mr::reg_user_mr::<T>)
            } else {
                None
            },
            alloc_mr: if T::HAS_ALLOC_MR {
                Some(crate::rdma::mr::alloc_mr::<T>)
            } else {
                None
            },
            map_mr_sg: if T::HAS_MAP_MR_SG {
                Some(crate::rdma::mr::map_mr_sg::<T>)
            } else {
                None
            },
            dereg_mr: if T::HAS_DEREG_MR {
                Some(crate::rdma::mr::dereg_mr::<T>)
            } else {
                None
            },
            advise_mr: if T::HAS_ADVISE_MR {
                Some(crate::rdma::mr::advise_mr::<T>)
            } else {
                None
            },
            alloc_mw: if T::HAS_ALLOC_MW {
                Some(crate::rdma::mw::alloc_mw::<T>)
            } else {
                None
            },
            dealloc_mw: if T::HAS_ALLOC_MW {
                Some(crate::rdma::mw::dealloc_mw::<T>)
            } else {
                None
            },
            size_ib_mw: Mw::<T>::ALLOC_SIZE,
            alloc_ucontext: if T::HAS_ALLOC_UCONTEXT {
                Some(crate::rdma::pd::alloc_ucontext::<T>)
            } else {
                None
            },
            dealloc_ucontext: if T::HAS_ALLOC_UCONTEXT {
                Some(crate::rdma::pd::dealloc_ucontext::<T>)
            } else {
                None
            },
            disassociate_ucontext: if T::HAS_DISASSOCIATE_UCONTEXT {
                Some(crate::rdma::pd::disassociate_ucontext::<T>)
            } else {
                None
            },
            size_ib_ucontext: Ucontext::<T>::ALLOC_SIZE,
            mmap: if T::HAS_MMAP {
                Some(crate::rdma::mmap::mmap::<T>)
            } else {
                None
            },
            mmap_free: if T::HAS_MMAP {
                Some(crate::rdma::mmap::mmap_free::<T>)
            } else {
                None
            },
            ..pin_init::zeroed()
        }
    }
}
