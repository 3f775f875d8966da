/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ferroce_kverbs_test's parts: the state and helpers of kverbs_main.c, which the phases of
 * kverbs_phases.c (cqoverrun, srq, distrust, reuse, stream) use.
 */
#ifndef FERROCE_KVERBS_H
#define FERROCE_KVERBS_H

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/ipv6.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#define KV_PORT		1
#define KV_PSN		0x1000
#define KV_SLOT		64		/* bytes per message and buffer slot */
#define KV_SLOTS	256
#define KV_BUF_SIZE	(KV_SLOT * KV_SLOTS)
#define KV_CQE		256
#define KV_SQ_WR	64
#define KV_CHAIN	32
#define KV_INLINE_WRS	8
#define KV_SMALL_CQE	4		/* the overrun test's CQ */
#define KV_SRQ_WR	16
#define KV_SRQ_POSTED	8
#define KV_SRQ_LIMIT	4
#define KV_SEND_LEN	32
#define KV_TIMEOUT_MS	10000

/* First slot of each phase in src/dst, so that no phase sees another's data. */
#define KV_SLOT_CHAIN	0
#define KV_SLOT_INLINE	(KV_SLOT_CHAIN + KV_CHAIN)
#define KV_SLOT_PUSH	(KV_SLOT_INLINE + KV_INLINE_WRS)
#define KV_SLOT_OVERRUN	(KV_SLOT_PUSH + 1)
#define KV_SLOT_SRQ	(KV_SLOT_OVERRUN + 16)
#define KV_SLOT_REUSE	(KV_SLOT_SRQ + KV_SRQ_WR)

struct kv_buf {
	void *cpu;
	u64 dma;
};

/* All state of the module; kverbs_main.c's kv_lock serialises phases and device removal. */
struct kv_state {
	struct ib_device *dev;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
	struct ib_pd *pd;
	struct ib_cq *cq;		/* every QP's CQ but the overrun test's */
	struct ib_qp *qa, *qb;		/* connected to each other */
	struct kv_buf src, dst;
	struct ib_cq *small_cq;		/* cqoverrun */
	struct ib_qp *qc;		/* cqoverrun: connected to itself */
	struct ib_srq *srq;
	struct ib_qp *qs, *qr;		/* srq: qs sends to qr, which receives from srq */
	struct kv_buf rbuf;
	struct ib_cq *reuse_cq;		/* reuse: qd, qe and qf complete here */
	struct ib_qp *qd, *qe, *qf;	/* reuse: each connected to itself */
	struct ib_cq *drain_cq;		/* ib_core polls it (ib_alloc_cq) */
	struct ib_qp *qg;		/* on drain_cq, connected to itself: drained on device removal */
	char result[256];
};
extern struct kv_state kv;

/* Events arrive from the driver's event queue handling, in any context. */
extern wait_queue_head_t kv_events;
extern atomic_t kv_cq_errors;
extern struct ib_cq *kv_cq_error_cq;
extern atomic_t kv_srq_limits;
extern atomic_t kv_srq_other;
extern atomic_t kv_qp_events;
extern int kv_qp_last_event;

/* What the stream phase's thread did (kverbs_phases.c). */
struct kv_stream_stats {
	long rounds, completed, bad;
	int first_bad_status;
	u64 first_bad_wr_id;
};
extern struct task_struct *kv_streamer;
extern struct kv_stream_stats kv_stream;

/* kverbs_main.c */
__printf(1, 2) void kv_report(const char *fmt, ...);
void kv_comp(struct ib_cq *cq, void *context);
void kv_cq_event(struct ib_event *event, void *context);
void kv_qp_event(struct ib_event *event, void *context);
void kv_srq_event(struct ib_event *event, void *context);
int kv_buf_alloc(struct kv_buf *b, size_t len);
void kv_buf_free(struct kv_buf *b, size_t len);
void *kv_slot(struct kv_buf *b, int slot);
void kv_fill(struct kv_buf *b, int slot, int n, u8 seed);
struct ib_qp *kv_create_qp(struct ib_cq *cq, struct ib_srq *srq, u32 max_send_wr,
			   u32 max_inline);
int kv_connect(struct ib_qp *qp, u32 dest_qpn);
int kv_poll(struct ib_cq *cq, struct ib_wc *wc, int n);
bool kv_check_wcs(struct ib_wc *wc, int n, enum ib_wc_opcode opcode, u32 qpn,
		  u64 first_wr_id, u32 byte_len, char *why, size_t len);
void kv_chain_writes(struct ib_rdma_wr *wrs, struct ib_sge *sges, int first, int n,
		     bool inline_data);

/* kverbs_phases.c */
int kv_cqoverrun(void);
int kv_srq(void);
int kv_distrust(void);
int kv_reuse(void);
int kv_stream_start(void);
void kv_stream_stop(void);

#endif
