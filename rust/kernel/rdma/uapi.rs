// SPDX-License-Identifier: GPL-2.0

//! The user ABIs of RDMA drivers (`include/uapi/rdma/<driver>-abi.h`, in [`crate::uapi`]) as
//! plain bytes, so that drivers read their requests from and write their responses to
//! [`Udata`](super::Udata) without `unsafe` code of their own.

use crate::{
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uapi,
};

macro_rules! abi_structs {
    ($($name:ident),* $(,)?) => {
        $(
            // SAFETY: A struct of a driver's user ABI: integers and arrays of integers, laid
            // out without padding (the headers align every u64 and spell out reserved fields),
            // so every bit pattern is a value and every byte is initialised.
            unsafe impl FromBytes for uapi::$name {}
            // SAFETY: As above.
            unsafe impl AsBytes for uapi::$name {}
        )*
    };
}

// include/uapi/rdma/ferroce-abi.h
abi_structs!(
    ferroce_alloc_ucontext_resp,
    ferroce_create_cq_req,
    ferroce_create_cq_resp,
    ferroce_resize_cq_req,
    ferroce_resize_srq_req,
    ferroce_create_qp_req,
    ferroce_create_qp_resp,
    ferroce_create_srq_req,
    ferroce_create_srq_resp,
    ferroce_create_ah_resp,
);
