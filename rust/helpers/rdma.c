// SPDX-License-Identifier: GPL-2.0

#include <rdma/uverbs_ioctl.h>

/* The driver's udata of a uverbs command (`struct uverbs_attr_bundle` is not in the bindings). */
__rust_helper struct ib_udata *
rust_helper_uverbs_attr_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

__rust_helper u64 rust_helper_rdma_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

/* Device memory (doorbell pages) is mapped uncached. */
__rust_helper pgprot_t rust_helper_rdma_pgprot_noncached(pgprot_t prot)
{
	return pgprot_noncached(prot);
}
