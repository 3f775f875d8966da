/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * ferroce: the user ABI between ferroce.ko and its rdma-core provider
 * (libferroce-rdmav34.so).
 *
 * The provider builds WQEs, polls CQEs and rings doorbells itself, in the formats of
 * Documentation/infiniband/ferroce-hw.rst; these structures carry what it needs to know
 * about the queues the kernel created for it. Each request is the driver data of an
 * ibv_cmd_* call, each response the driver data of its reply.
 *
 * Rules (checked by the driver; a violation fails the call with -EINVAL):
 *  - every reserved field and every unknown trailing byte of a request is zero;
 *  - a shorter request than the kernel knows is zero-extended (older provider);
 *  - ring buffers are page-aligned user memory the driver pins (umem); the doorbell
 *    record of a queue lives in the same buffer, 64-byte aligned, outside its rings.
 */
#ifndef FERROCE_ABI_USER_H
#define FERROCE_ABI_USER_H

#include <linux/types.h>

/* Increased on every incompatible change; the provider refuses other versions. */
#define FERROCE_UVERBS_ABI_VERSION 2

/* Bytes of the doorbell page mapped at ferroce_alloc_ucontext_resp.db_mmap_offset. */
#define FERROCE_DB_PAGE_SIZE 4096

/* The "none" value of a queue number (e.g. no SRQ), as in the hardware interface. */
#define FERROCE_NONE 0xffffffffU

/* ferroce_alloc_ucontext_resp.flags */
enum ferroce_ucontext_flags {
	/* The doorbell page has a push window (hardware CAP_WQE_PUSH). */
	FERROCE_UCONTEXT_WQE_PUSH = 1 << 0,
	/*
	 * The device polls doorbell records (hardware CAP_DB_RECORD): a QP created with
	 * FERROCE_CREATE_QP_DB_RECORD needs no SQ doorbell write.
	 */
	FERROCE_UCONTEXT_DB_RECORD = 1 << 1,
};

struct ferroce_alloc_ucontext_resp {
	__aligned_u64 db_mmap_offset; /* mmap() offset of this context's doorbell page */
	__u32 if_version;	      /* hardware interface version, major << 16 | minor */
	__u32 caps;		      /* hardware CAP_* bits */
	__u32 flags;		      /* enum ferroce_ucontext_flags */
	__u32 max_inline;	      /* bytes of inline data a send WQE may carry */
	__u32 max_sge;		      /* SGEs per WQE the device accepts */
	__u32 max_log_queue;	      /* largest log2 of a ring's entries */
	__u32 push_window_offset;     /* offset of the push window in the doorbell page */
	__u32 push_window_size;	      /* its bytes (a WQE must fit) */
	__u32 max_log_cq;	      /* largest log2 of a CQ's entries (0 from a kernel that
				       * did not say: max_log_queue)
				       */
	__u32 reserved;
};

/*
 * CQ: `log_size` CQEs of 64 bytes at buf_addr, the doorbell record (u32 ci, u32 reserved)
 * at buf_addr + dbrec_offset.
 */
struct ferroce_create_cq_req {
	__aligned_u64 buf_addr;
	__u32 buf_size;	    /* bytes of the buffer: ring + record, page multiple */
	__u32 log_size;	    /* log2 of the CQEs in the ring */
	__u32 dbrec_offset; /* 64-byte aligned, not inside the ring */
	__u32 reserved;
};

struct ferroce_create_cq_resp {
	__u32 cqn;	/* the device's CQ number */
	__u32 db_qid;	/* the CQ's number in this context's doorbells */
};

/*
 * ibv_resize_cq: the CQ's new buffer, laid out as ferroce_create_cq_req's. The device ends
 * the old ring with a RESIZE CQE; the provider polls up to it, then reads that index again in
 * the new ring (ferroce-hw.rst, "Resizing a CQ"), and writes its consumer index into both
 * records until then. The kernel unpins the old buffer once the device has switched; the
 * provider frees it after the marker.
 */
struct ferroce_resize_cq_req {
	__aligned_u64 buf_addr;
	__u32 buf_size;
	__u32 log_size;
	__u32 dbrec_offset;
	__u32 reserved;
};

/*
 * ibv_modify_srq with IBV_SRQ_MAX_WR: the SRQ's new buffer, laid out as
 * ferroce_create_srq_req's, its record holding the producer index. The device copies the WQEs
 * it has not taken to the new ring at their indices (ferroce-hw.rst, RESIZE_SRQ); the provider
 * posts nothing meanwhile and goes on in the new ring. The old buffer is free once the call
 * returns.
 */
struct ferroce_resize_srq_req {
	__aligned_u64 buf_addr;
	__u32 buf_size;
	__u32 log_size;
	__u32 log_stride;
	__u32 dbrec_offset;
	__u32 reserved;
	__u32 reserved2;
};

/* ferroce_create_qp_req.flags */
enum ferroce_create_qp_flags {
	/*
	 * The device watches the QP's doorbell record for new producer indexes (only with
	 * FERROCE_UCONTEXT_DB_RECORD): posting writes the record and no doorbell register.
	 */
	FERROCE_CREATE_QP_DB_RECORD = 1 << 0,
};

/*
 * QP: the send ring (1 << sq_log_size WQEs of 1 << sq_log_stride bytes) at buf_addr,
 * the receive ring at buf_addr + rq_offset (page-aligned; a QP with an SRQ, and an
 * XRC_INI QP, have none and pass zeros), the doorbell record (u32 sq_pi, u32 rq_pi) at
 * buf_addr + dbrec_offset. An XRC_TGT QP has no rings and no driver data: ib_core creates
 * it without udata.
 */
struct ferroce_create_qp_req {
	__aligned_u64 buf_addr;
	__u32 buf_size;
	__u32 sq_log_size;
	__u32 sq_log_stride;
	__u32 rq_offset;
	__u32 rq_log_size;	/* 0 with an SRQ */
	__u32 rq_log_stride;	/* 0 with an SRQ */
	__u32 dbrec_offset;
	__u32 flags;		/* enum ferroce_create_qp_flags */
};

struct ferroce_create_qp_resp {
	__u32 qpn;
	__u32 db_qid;	/* the QP's number in this context's doorbells */
};

/*
 * SRQ, basic or XRC: 1 << log_size receive WQEs of 1 << log_stride bytes, record (u32 pi,
 * u32 reserved).
 */
struct ferroce_create_srq_req {
	__aligned_u64 buf_addr;
	__u32 buf_size;
	__u32 log_size;
	__u32 log_stride;
	__u32 dbrec_offset;
	__u32 reserved;
};

struct ferroce_create_srq_resp {
	__u32 srqn;
	__u32 db_qid;
};

/* Bytes of the hardware's UD address vector segment (UdAvSeg). */
#define FERROCE_UD_AV_SIZE 40

/*
 * AH: the device's number of the AH the kernel created (CMD_CREATE_AH) from the address
 * vector it resolved and checked (a source GID of the port, the destination MAC, the
 * gateway's across subnets). A process's UD QPs name destinations by these numbers only
 * (UdSeg): the device refuses a WQE with an inline address vector on them.
 */
struct ferroce_create_ah_resp {
	__u32 ah;
	__u32 reserved;
};

#endif /* FERROCE_ABI_USER_H */
