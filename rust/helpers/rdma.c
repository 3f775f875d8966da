// SPDX-License-Identifier: GPL-2.0

#include <rdma/uverbs_ioctl.h>

/* The driver's udata of a uverbs command (`struct uverbs_attr_bundle` is not in the bindings). */
__rust_helper struct ib_udata *
rust_helper_uverbs_attr_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}
