// SPDX-License-Identifier: GPL-2.0

#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/iter.h>
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

/* A registration reference (rust/kernel/rdma/device/handle.rs, `DeviceRef`). */
__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

/* Device memory (doorbell pages) is mapped uncached. */
__rust_helper pgprot_t rust_helper_rdma_pgprot_noncached(pgprot_t prot)
{
	return pgprot_noncached(prot);
}

/* Pinned user memory (rust/kernel/rdma/umem.rs). */
__rust_helper struct ib_umem *rust_helper_ib_umem_get_va(struct ib_device *device,
							 unsigned long addr, size_t size,
							 int access)
{
	return ib_umem_get_va(device, addr, size, access);
}

__rust_helper size_t rust_helper_ib_umem_num_dma_blocks(struct ib_umem *umem, unsigned long pgsz)
{
	return ib_umem_num_dma_blocks(umem, pgsz);
}

__rust_helper void rust_helper___rdma_umem_block_iter_start(struct ib_block_iter *biter,
							    struct ib_umem *umem,
							    unsigned long pgsz)
{
	__rdma_umem_block_iter_start(biter, umem, pgsz);
}

__rust_helper bool rust_helper___rdma_umem_block_iter_next(struct ib_block_iter *biter)
{
	return __rdma_umem_block_iter_next(biter);
}

__rust_helper dma_addr_t rust_helper_rdma_block_iter_dma_address(struct ib_block_iter *biter)
{
	return rdma_block_iter_dma_address(biter);
}

/* The user context of a uverbs call, from its driver udata (rdma_udata_to_drv_context). */
__rust_helper struct ib_ucontext *rust_helper_rdma_udata_to_ucontext(struct ib_udata *udata)
{
	return container_of(udata, struct uverbs_attr_bundle, driver_udata)->context;
}

/* On-demand paging user memory (rust/kernel/rdma/umem_odp.rs). */
__rust_helper unsigned long rust_helper_ib_umem_start(struct ib_umem_odp *umem_odp)
{
	return ib_umem_start(umem_odp);
}

__rust_helper unsigned long rust_helper_ib_umem_end(struct ib_umem_odp *umem_odp)
{
	return ib_umem_end(umem_odp);
}

__rust_helper bool
rust_helper_mmu_notifier_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

__rust_helper void rust_helper_mmu_interval_set_seq(struct mmu_interval_notifier *interval_sub,
						    unsigned long cur_seq)
{
	mmu_interval_set_seq(interval_sub, cur_seq);
}

__rust_helper int rust_helper_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}
