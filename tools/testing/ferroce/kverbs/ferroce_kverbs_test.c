// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_kverbs_test: ferroce0 as a kernel verbs consumer sees it.
 *
 * The scenario (tools/testing/ferroce/scenarios/kverbs) runs one phase at a
 * time by writing its name to /sys/module/ferroce_kverbs_test/parameters/run
 * and reads one line back from .../parameters/result: "<phase> ok ..." or
 * "<phase> FAIL <why>". Module parameters, because the guest kernel has no
 * debugfs. Between two phases the scenario reads the NIC's counters.
 *
 *   setup      PD, a CQ, two RC QPs of the device connected to each other
 *              through the port's own GID and MAC (the NIC loops the frames)
 *   chain      32 RDMA WRITEs posted with one ib_post_send()
 *   inline     8 RDMA WRITEs of 64 bytes with IB_SEND_INLINE
 *   push       one small RDMA WRITE (the driver's push window)
 *   cqoverrun  a CQ smaller than the signalled WRs posted, never polled:
 *              IB_EVENT_CQ_ERR must reach its event handler
 *   srq        receives on an SRQ with a limit armed by ib_modify_srq():
 *              IB_EVENT_SRQ_LIMIT_REACHED once fewer than the limit remain
 *   stream     a kernel thread posts chains of RDMA WRITEs and polls them until it
 *              is stopped (teardown, device removal): removal under traffic, the
 *              last chain still in flight when the QPs are destroyed
 *   teardown   everything goes (also on unload and on device removal)
 *
 * The counted phases (chain, inline, push) only post and poll: objects come
 * from setup, the CQ is polled and never armed (an arm is a doorbell) and no
 * receive is posted (a DB_RQ), so every doorbell and WQE fetch the NIC
 * counts between the scenario's two reads belongs to the phase.
 */

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

static char *device = "ferroce0";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "RDMA device to test (default ferroce0)");

static uint gid_index = 3;
module_param(gid_index, uint, 0444);
MODULE_PARM_DESC(gid_index, "GID index the QPs use: a RoCE v2 GID of the port (default 3)");

struct kv_buf {
	void *cpu;
	u64 dma;
};

/* All state; kv_lock serialises phases, result reads and device removal. */
static DEFINE_MUTEX(kv_lock);
static struct {
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
	char result[256];
} kv;

/* Events arrive from the driver's event queue handling, in any context. */
static DECLARE_WAIT_QUEUE_HEAD(kv_events);
static atomic_t kv_cq_errors = ATOMIC_INIT(0);
static struct ib_cq *kv_cq_error_cq;
static atomic_t kv_srq_limits = ATOMIC_INIT(0);
static atomic_t kv_srq_other = ATOMIC_INIT(0);
static atomic_t kv_qp_events = ATOMIC_INIT(0);
static int kv_qp_last_event = -1;

static __printf(1, 2) void kv_report(const char *fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	vscnprintf(kv.result, sizeof(kv.result), fmt, args);
	va_end(args);
	if (strstr(kv.result, " FAIL"))
		pr_err("%s\n", kv.result);
	else
		pr_info("%s\n", kv.result);
}

static void kv_comp(struct ib_cq *cq, void *context)
{
	/* Never armed: a completion event is a driver bug worth seeing. */
	pr_err("unexpected completion event on CQ %p\n", cq);
}

static void kv_cq_event(struct ib_event *event, void *context)
{
	pr_info("CQ event %s (%d)\n", ib_event_msg(event->event), event->event);
	if (event->event == IB_EVENT_CQ_ERR) {
		WRITE_ONCE(kv_cq_error_cq, event->element.cq);
		atomic_inc(&kv_cq_errors);
	}
	wake_up(&kv_events);
}

static void kv_qp_event(struct ib_event *event, void *context)
{
	pr_info("QP %u event %s (%d)\n", event->element.qp->qp_num,
		ib_event_msg(event->event), event->event);
	WRITE_ONCE(kv_qp_last_event, event->event);
	atomic_inc(&kv_qp_events);
	wake_up(&kv_events);
}

static void kv_srq_event(struct ib_event *event, void *context)
{
	pr_info("SRQ event %s (%d)\n", ib_event_msg(event->event), event->event);
	if (event->event == IB_EVENT_SRQ_LIMIT_REACHED)
		atomic_inc(&kv_srq_limits);
	else
		atomic_inc(&kv_srq_other);
	wake_up(&kv_events);
}

static int kv_buf_alloc(struct kv_buf *b, size_t len)
{
	b->cpu = kzalloc(len, GFP_KERNEL);
	if (!b->cpu)
		return -ENOMEM;
	b->dma = ib_dma_map_single(kv.dev, b->cpu, len, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(kv.dev, b->dma)) {
		kfree(b->cpu);
		b->cpu = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void kv_buf_free(struct kv_buf *b, size_t len)
{
	if (!b->cpu)
		return;
	ib_dma_unmap_single(kv.dev, b->dma, len, DMA_BIDIRECTIONAL);
	kfree(b->cpu);
	b->cpu = NULL;
}

static void *kv_slot(struct kv_buf *b, int slot)
{
	return b->cpu + slot * KV_SLOT;
}

/* A pattern that differs per slot and per phase (seed). */
static void kv_fill(struct kv_buf *b, int slot, int n, u8 seed)
{
	int i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < KV_SLOT; j++)
			((u8 *)kv_slot(b, slot + i))[j] = seed + (slot + i) * 7 + j;
}

static struct ib_qp *kv_create_qp(struct ib_cq *cq, struct ib_srq *srq,
				  u32 max_send_wr, u32 max_inline)
{
	struct ib_qp_init_attr init = {
		.event_handler = kv_qp_event,
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.cap = {
			.max_send_wr = max_send_wr,
			.max_recv_wr = srq ? 0 : 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = max_inline,
		},
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.qp_type = IB_QPT_RC,
	};

	return ib_create_qp(kv.pd, &init);
}

/* RESET -> INIT -> RTR -> RTS towards dest_qpn of this port's own GID and MAC. */
static int kv_connect(struct ib_qp *qp, u32 dest_qpn)
{
	struct ib_qp_attr attr = {};
	int ret;

	attr.qp_state = IB_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = KV_PORT;
	attr.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			       IB_ACCESS_REMOTE_READ;
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = KV_PSN;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.type = rdma_ah_find_type(kv.dev, KV_PORT);
	rdma_ah_set_port_num(&attr.ah_attr, KV_PORT);
	rdma_ah_set_grh(&attr.ah_attr, &kv.gid, 0, gid_index, 64, 0);
	/* Kernel consumers resolve the MAC themselves: it is our own. */
	memcpy(attr.ah_attr.roce.dmac, kv.mac, ETH_ALEN);
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = KV_PSN;
	attr.max_rd_atomic = 1;
	return ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_TIMEOUT |
			    IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_SQ_PSN |
			    IB_QP_MAX_QP_RD_ATOMIC);
}

/* Polls up to n completions of cq, for at most KV_TIMEOUT_MS; returns how many. */
static int kv_poll(struct ib_cq *cq, struct ib_wc *wc, int n)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(KV_TIMEOUT_MS);
	int got = 0, ret;

	while (got < n) {
		ret = ib_poll_cq(cq, n - got, wc + got);
		if (ret < 0)
			return ret;
		got += ret;
		if (got < n) {
			if (time_after(jiffies, deadline))
				break;
			usleep_range(50, 200);
		}
	}
	return got;
}

/* Checks n completions; writes what is wrong with the first bad one into why. */
static bool kv_check_wcs(struct ib_wc *wc, int n, enum ib_wc_opcode opcode,
			 u32 qpn, u64 first_wr_id, u32 byte_len,
			 char *why, size_t len)
{
	int i;

	for (i = 0; i < n; i++) {
		if (wc[i].status != IB_WC_SUCCESS) {
			scnprintf(why, len, "completion %d: status %s (%d)", i,
				  ib_wc_status_msg(wc[i].status), wc[i].status);
			return false;
		}
		if (wc[i].opcode != opcode || wc[i].qp->qp_num != qpn ||
		    wc[i].wr_id != first_wr_id + i ||
		    (byte_len && wc[i].byte_len != byte_len)) {
			scnprintf(why, len,
				  "completion %d: opcode %d qpn %u wr_id %llu byte_len %u, expected %d %u %llu %u",
				  i, wc[i].opcode, wc[i].qp->qp_num, wc[i].wr_id,
				  wc[i].byte_len, opcode, qpn, first_wr_id + i, byte_len);
			return false;
		}
	}
	return true;
}

static void kv_stream_stop(void);

static void kv_teardown(void)
{
	struct ib_qp **qps[] = { &kv.qa, &kv.qb, &kv.qc, &kv.qs, &kv.qr,
				 &kv.qd, &kv.qe, &kv.qf };
	int i, ret;

	kv_stream_stop();

	for (i = 0; i < ARRAY_SIZE(qps); i++) {
		if (!*qps[i])
			continue;
		ret = ib_destroy_qp(*qps[i]);
		if (ret)
			pr_err("ib_destroy_qp: %d\n", ret);
		*qps[i] = NULL;
	}
	if (kv.srq) {
		ib_destroy_srq(kv.srq);
		kv.srq = NULL;
	}
	if (kv.small_cq) {
		ib_destroy_cq(kv.small_cq);
		kv.small_cq = NULL;
	}
	if (kv.reuse_cq) {
		ib_destroy_cq(kv.reuse_cq);
		kv.reuse_cq = NULL;
	}
	if (kv.cq) {
		ib_destroy_cq(kv.cq);
		kv.cq = NULL;
	}
	kv_buf_free(&kv.src, KV_BUF_SIZE);
	kv_buf_free(&kv.dst, KV_BUF_SIZE);
	kv_buf_free(&kv.rbuf, KV_BUF_SIZE);
	if (kv.pd) {
		ib_dealloc_pd(kv.pd);
		kv.pd = NULL;
	}
}

static int kv_setup(void)
{
	const struct ib_gid_attr *gid_attr;
	struct ib_cq_init_attr cq_attr = { .cqe = KV_CQE };
	int ret;

	if (kv.pd) {
		kv_report("setup FAIL already set up");
		return -EBUSY;
	}
	gid_attr = rdma_get_gid_attr(kv.dev, KV_PORT, gid_index);
	if (IS_ERR(gid_attr)) {
		kv_report("setup FAIL GID %u of %s port %d: %ld", gid_index,
			  dev_name(&kv.dev->dev), KV_PORT, PTR_ERR(gid_attr));
		return PTR_ERR(gid_attr);
	}
	kv.gid = gid_attr->gid;
	ret = rdma_read_gid_l2_fields(gid_attr, NULL, kv.mac);
	if (!ret && (gid_attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP ||
		     !ipv6_addr_v4mapped((struct in6_addr *)kv.gid.raw)))
		ret = -EPROTONOSUPPORT;
	rdma_put_gid_attr(gid_attr);
	if (ret) {
		kv_report("setup FAIL GID %u is not a RoCE v2 IPv4 GID with a netdev: %d",
			  gid_index, ret);
		return ret;
	}

	/*
	 * The DMA MR's rkey lets the QPs write into our buffers by DMA address
	 * without a registration WR: fine for a test VM, never for real use.
	 */
	kv.pd = ib_alloc_pd(kv.dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	if (IS_ERR(kv.pd)) {
		ret = PTR_ERR(kv.pd);
		kv.pd = NULL;
		kv_report("setup FAIL ib_alloc_pd: %d", ret);
		return ret;
	}
	kv.cq = ib_create_cq(kv.dev, kv_comp, kv_cq_event, NULL, &cq_attr);
	if (IS_ERR(kv.cq)) {
		ret = PTR_ERR(kv.cq);
		kv.cq = NULL;
		kv_report("setup FAIL ib_create_cq: %d", ret);
		goto fail;
	}
	kv.qa = kv_create_qp(kv.cq, NULL, KV_SQ_WR, KV_SLOT);
	if (IS_ERR(kv.qa)) {
		ret = PTR_ERR(kv.qa);
		kv.qa = NULL;
		kv_report("setup FAIL ib_create_qp: %d", ret);
		goto fail;
	}
	kv.qb = kv_create_qp(kv.cq, NULL, KV_SQ_WR, KV_SLOT);
	if (IS_ERR(kv.qb)) {
		ret = PTR_ERR(kv.qb);
		kv.qb = NULL;
		kv_report("setup FAIL ib_create_qp: %d", ret);
		goto fail;
	}
	ret = kv_buf_alloc(&kv.src, KV_BUF_SIZE);
	if (!ret)
		ret = kv_buf_alloc(&kv.dst, KV_BUF_SIZE);
	if (ret) {
		kv_report("setup FAIL buffers: %d", ret);
		goto fail;
	}
	ret = kv_connect(kv.qa, kv.qb->qp_num);
	if (!ret)
		ret = kv_connect(kv.qb, kv.qa->qp_num);
	if (ret) {
		kv_report("setup FAIL connecting the QPs: %d", ret);
		goto fail;
	}
	kv_report("setup ok device=%s gid_index=%u gid=%pI6 mac=%pM qpn=%u,%u cqe=%d",
		  dev_name(&kv.dev->dev), gid_index, kv.gid.raw, kv.mac,
		  kv.qa->qp_num, kv.qb->qp_num, kv.cq->cqe);
	return 0;
fail:
	kv_teardown();
	return ret;
}

/*
 * Fills wrs[0..n) (and their sges) with a chain of signalled RDMA WRITEs of KV_SLOT bytes from
 * src to dst at slots first.., wr_id = slot; inline ones carry the data's kernel address.
 */
static void kv_chain_writes(struct ib_rdma_wr *wrs, struct ib_sge *sges, int first, int n,
			    bool inline_data)
{
	int i;

	for (i = 0; i < n; i++) {
		/* Inline data is read by the CPU at post time: a kernel address. */
		sges[i].addr = inline_data ? (uintptr_t)kv_slot(&kv.src, first + i) :
					     kv.src.dma + (first + i) * KV_SLOT;
		sges[i].length = KV_SLOT;
		sges[i].lkey = kv.pd->local_dma_lkey;
		wrs[i].wr.wr_id = first + i;
		wrs[i].wr.next = i + 1 < n ? &wrs[i + 1].wr : NULL;
		wrs[i].wr.sg_list = &sges[i];
		wrs[i].wr.num_sge = 1;
		wrs[i].wr.opcode = IB_WR_RDMA_WRITE;
		wrs[i].wr.send_flags = IB_SEND_SIGNALED |
				       (inline_data ? IB_SEND_INLINE : 0);
		wrs[i].remote_addr = kv.dst.dma + (first + i) * KV_SLOT;
		wrs[i].rkey = kv.pd->unsafe_global_rkey;
	}
}

/*
 * Posts n RDMA WRITEs of KV_SLOT bytes from src to dst at slot first..,
 * all signalled, as one chain (a single ib_post_send()), then polls their
 * n completions and compares the data.
 */
static int kv_write_phase(const char *phase, int first, int n, bool inline_data,
			  u8 seed)
{
	struct ib_rdma_wr *wrs;
	struct ib_sge *sges;
	struct ib_wc *wc;
	const struct ib_send_wr *bad = NULL;
	char why[160];
	int i, ret, got, extra;

	if (!kv.qa) {
		kv_report("%s FAIL not set up", phase);
		return -ENODEV;
	}
	wrs = kcalloc(n, sizeof(*wrs), GFP_KERNEL);
	sges = kcalloc(n, sizeof(*sges), GFP_KERNEL);
	wc = kcalloc(n + 1, sizeof(*wc), GFP_KERNEL);
	if (!wrs || !sges || !wc) {
		ret = -ENOMEM;
		kv_report("%s FAIL out of memory", phase);
		goto out;
	}
	kv_fill(&kv.src, first, n, seed);
	memset(kv_slot(&kv.dst, first), 0, n * KV_SLOT);
	ib_dma_sync_single_for_device(kv.dev, kv.src.dma, KV_BUF_SIZE, DMA_BIDIRECTIONAL);
	ib_dma_sync_single_for_device(kv.dev, kv.dst.dma, KV_BUF_SIZE, DMA_BIDIRECTIONAL);
	kv_chain_writes(wrs, sges, first, n, inline_data);

	ret = ib_post_send(kv.qa, &wrs[0].wr, &bad);
	if (ret) {
		kv_report("%s FAIL ib_post_send: %d at WR %lld", phase, ret,
			  bad ? (long long)bad->wr_id : -1LL);
		goto out;
	}
	got = kv_poll(kv.cq, wc, n);
	if (got < 0) {
		ret = got;
		kv_report("%s FAIL ib_poll_cq: %d", phase, ret);
		goto out;
	}
	if (got < n) {
		ret = -ETIMEDOUT;
		kv_report("%s FAIL posted=%d completed=%d in %d ms", phase, n, got,
			  KV_TIMEOUT_MS);
		goto out;
	}
	if (!kv_check_wcs(wc, n, IB_WC_RDMA_WRITE, kv.qa->qp_num, first, 0,
			  why, sizeof(why))) {
		ret = -EIO;
		kv_report("%s FAIL %s", phase, why);
		goto out;
	}
	extra = ib_poll_cq(kv.cq, 1, wc + n);
	if (extra) {
		ret = -EIO;
		kv_report("%s FAIL an extra completion (%d, wr_id %llu)", phase,
			  extra, extra > 0 ? wc[n].wr_id : 0);
		goto out;
	}
	ib_dma_sync_single_for_cpu(kv.dev, kv.dst.dma, KV_BUF_SIZE, DMA_BIDIRECTIONAL);
	for (i = 0; i < n; i++) {
		if (memcmp(kv_slot(&kv.dst, first + i), kv_slot(&kv.src, first + i),
			   KV_SLOT)) {
			ret = -EIO;
			kv_report("%s FAIL data of WR %d did not arrive", phase, first + i);
			goto out;
		}
	}
	kv_report("%s ok posted=%d completed=%d bytes=%d inline=%d data=verified",
		  phase, n, got, n * KV_SLOT, inline_data);
	ret = 0;
out:
	kfree(wc);
	kfree(sges);
	kfree(wrs);
	return ret;
}

static int kv_chain(void)
{
	return kv_write_phase("chain", KV_SLOT_CHAIN, KV_CHAIN, false, 0x11);
}

static int kv_inline(void)
{
	return kv_write_phase("inline", KV_SLOT_INLINE, KV_INLINE_WRS, true, 0x22);
}

static int kv_push(void)
{
	return kv_write_phase("push", KV_SLOT_PUSH, 1, false, 0x33);
}

/*
 * The NIC lies in one CQE of a chain of signalled WRITEs (the scenario arms
 * the lie with `hostctl nic lie KIND`). Whatever the driver delivers must be
 * true: each wr_id one that was posted, at most once, of QP qa, with no more
 * bytes than posted. A lie about qa itself moves it to ERR: it gets
 * IB_EVENT_QP_FATAL. Polls until every WR completed or a short deadline, and
 * reports what came back; the QP is not usable afterwards (teardown, setup).
 */
#define KV_DISTRUST_MS	3000

struct kv_distrust_bufs {
	struct ib_rdma_wr wrs[KV_CHAIN];
	struct ib_sge sges[KV_CHAIN];
	struct ib_wc wc[KV_CHAIN + 1];
};

static int kv_distrust_run(struct kv_distrust_bufs *b);

static int kv_distrust(void)
{
	struct kv_distrust_bufs *b = kzalloc(sizeof(*b), GFP_KERNEL);
	int ret;

	if (!b) {
		kv_report("distrust FAIL out of memory");
		return -ENOMEM;
	}
	ret = kv_distrust_run(b);
	kfree(b);
	return ret;
}

static int kv_distrust_run(struct kv_distrust_bufs *b)
{
	struct ib_rdma_wr *wrs = b->wrs;
	struct ib_sge *sges = b->sges;
	struct ib_wc *wc = b->wc;
	const struct ib_send_wr *bad = NULL;
	DECLARE_BITMAP(seen, KV_CHAIN);
	unsigned long deadline = jiffies + msecs_to_jiffies(KV_DISTRUST_MS);
	int events = atomic_read(&kv_qp_events);
	int i, ret, got = 0, success = 0, flushed = 0, errors = 0;
	int strangers = 0, twice = 0, foreign = 0, too_long = 0;

	if (!kv.qa) {
		kv_report("distrust FAIL not set up");
		return -ENODEV;
	}
	bitmap_zero(seen, KV_CHAIN);
	kv_chain_writes(wrs, sges, KV_SLOT_CHAIN, KV_CHAIN, false);
	ret = ib_post_send(kv.qa, &wrs[0].wr, &bad);
	if (ret) {
		kv_report("distrust FAIL ib_post_send: %d", ret);
		return ret;
	}
	while (got < KV_CHAIN && !time_after(jiffies, deadline)) {
		ret = ib_poll_cq(kv.cq, KV_CHAIN + 1, wc);
		if (ret < 0) {
			kv_report("distrust FAIL ib_poll_cq: %d", ret);
			return ret;
		}
		for (i = 0; i < ret; i++) {
			u64 n = wc[i].wr_id - KV_SLOT_CHAIN;

			got++;
			if (wc[i].status == IB_WC_SUCCESS)
				success++;
			else if (wc[i].status == IB_WC_WR_FLUSH_ERR)
				flushed++;
			else
				errors++;
			if (wc[i].qp != kv.qa)
				foreign++;
			if (wc[i].status == IB_WC_SUCCESS && wc[i].byte_len > KV_SLOT)
				too_long++;
			if (wc[i].wr_id < KV_SLOT_CHAIN || n >= KV_CHAIN)
				strangers++;
			else if (test_and_set_bit(n, seen))
				twice++;
		}
		if (!ret)
			usleep_range(50, 200);
	}
	/* The QP's move to ERR runs from a work item: give it the rest of the time. */
	wait_event_timeout(kv_events, atomic_read(&kv_qp_events) != events,
			   max_t(long, (long)(deadline - jiffies), 1));
	if (strangers || twice || foreign || too_long) {
		kv_report("distrust FAIL delivered=%d strangers=%d twice=%d foreign=%d too_long=%d",
			  got, strangers, twice, foreign, too_long);
		return -EIO;
	}
	kv_report("distrust ok posted=%d delivered=%d success=%d flushed=%d errors=%d strangers=0 twice=0 qp_fatal=%d",
		  KV_CHAIN, got, success, flushed, errors,
		  atomic_read(&kv_qp_events) != events &&
		  READ_ONCE(kv_qp_last_event) == IB_EVENT_QP_FATAL);
	return 0;
}

/* The reuse phase arms its CQ only to learn that a CQE is waiting. */
static void kv_reuse_comp(struct ib_cq *cq, void *context)
{
}

/* A self-connected QP on the reuse CQ. */
static struct ib_qp *kv_reuse_qp(void)
{
	struct ib_qp *qp = kv_create_qp(kv.reuse_cq, NULL, 4, 0);
	int ret;

	if (IS_ERR(qp))
		return qp;
	ret = kv_connect(qp, qp->qp_num);
	if (ret) {
		ib_destroy_qp(qp);
		return ERR_PTR(ret);
	}
	return qp;
}

/* One signalled RDMA WRITE of slot `slot` on qp, with wr_id `slot`. */
static int kv_write_one(struct ib_qp *qp, int slot)
{
	struct ib_sge sge = {
		.addr = kv.src.dma + slot * KV_SLOT,
		.length = KV_SLOT,
		.lkey = kv.pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = slot,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = kv.dst.dma + slot * KV_SLOT,
		.rkey = kv.pd->unsafe_global_rkey,
	};

	return ib_post_send(qp, &wr.wr, NULL);
}

/*
 * A QP destroyed with its CQE still in its CQ: the next QP, which gets its
 * number, must never receive that CQE, and the CQEs of other QPs behind it
 * must still arrive. qd writes once; once its CQE is in the CQ (the arm says
 * one is waiting) qe writes once; then qd is destroyed and qf created. Only
 * qe's completion may be polled.
 */
static int kv_reuse(void)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 16 };
	unsigned long deadline;
	struct ib_wc wc[4];
	u32 qpn;
	int ret, got = 0, stale = 0;

	if (!kv.pd || kv.reuse_cq) {
		kv_report("reuse FAIL %s", kv.pd ? "already run" : "not set up");
		return -EBUSY;
	}
	kv.reuse_cq = ib_create_cq(kv.dev, kv_reuse_comp, kv_cq_event, NULL, &cq_attr);
	if (IS_ERR(kv.reuse_cq)) {
		ret = PTR_ERR(kv.reuse_cq);
		kv.reuse_cq = NULL;
		kv_report("reuse FAIL ib_create_cq: %d", ret);
		return ret;
	}
	kv.qd = kv_reuse_qp();
	kv.qe = IS_ERR(kv.qd) ? NULL : kv_reuse_qp();
	if (IS_ERR(kv.qd) || IS_ERR(kv.qe)) {
		ret = PTR_ERR(IS_ERR(kv.qd) ? kv.qd : kv.qe);
		kv.qd = IS_ERR(kv.qd) ? NULL : kv.qd;
		kv.qe = IS_ERR_OR_NULL(kv.qe) ? NULL : kv.qe;
		kv_report("reuse FAIL creating the QPs: %d", ret);
		return ret;
	}
	ret = kv_write_one(kv.qd, KV_SLOT_REUSE);
	if (ret) {
		kv_report("reuse FAIL ib_post_send on qd: %d", ret);
		return ret;
	}
	deadline = jiffies + msecs_to_jiffies(KV_TIMEOUT_MS);
	while (ib_req_notify_cq(kv.reuse_cq, IB_CQ_NEXT_COMP |
				IB_CQ_REPORT_MISSED_EVENTS) <= 0) {
		if (time_after(jiffies, deadline)) {
			kv_report("reuse FAIL qd's CQE not written in %d ms", KV_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		usleep_range(500, 1000);
	}
	ret = kv_write_one(kv.qe, KV_SLOT_REUSE + 1);
	if (ret) {
		kv_report("reuse FAIL ib_post_send on qe: %d", ret);
		return ret;
	}
	/* Most likely qe's CQE is behind qd's when qd goes. */
	msleep(200);
	qpn = kv.qd->qp_num;
	ib_destroy_qp(kv.qd);
	kv.qd = NULL;
	kv.qf = kv_reuse_qp();
	if (IS_ERR(kv.qf)) {
		ret = PTR_ERR(kv.qf);
		kv.qf = NULL;
		kv_report("reuse FAIL creating qf: %d", ret);
		return ret;
	}
	deadline = jiffies + msecs_to_jiffies(KV_TIMEOUT_MS);
	while (got < 1 && !time_after(jiffies, deadline)) {
		ret = ib_poll_cq(kv.reuse_cq, ARRAY_SIZE(wc) - got, wc + got);
		if (ret < 0) {
			kv_report("reuse FAIL ib_poll_cq: %d", ret);
			return ret;
		}
		got += ret;
		if (!ret)
			usleep_range(50, 200);
	}
	/* Anything more would be stale. */
	msleep(50);
	ret = ib_poll_cq(kv.reuse_cq, ARRAY_SIZE(wc) - got, wc + got);
	got += max(ret, 0);
	for (ret = 0; ret < got; ret++)
		if (wc[ret].qp != kv.qe || wc[ret].wr_id != KV_SLOT_REUSE + 1 ||
		    wc[ret].status != IB_WC_SUCCESS)
			stale++;
	if (got != 1 || stale) {
		kv_report("reuse FAIL polled=%d stale=%d (first: wr_id %llu qpn %u status %d) reused=%d",
			  got, stale, got ? wc[0].wr_id : 0,
			  got ? wc[0].qp->qp_num : 0, got ? wc[0].status : -1,
			  kv.qf->qp_num == qpn);
		return -EIO;
	}
	kv_report("reuse ok reused=%d polled=1 stale=0", kv.qf->qp_num == qpn);
	return 0;
}

/* Signalled WRITEs overflow a CQ nobody polls: the NIC kills it with CQ_ERROR. */
static int kv_cqoverrun(void)
{
	struct ib_cq_init_attr cq_attr = { .cqe = KV_SMALL_CQE };
	struct ib_rdma_wr wrs[16] = {};
	struct ib_sge sges[16];
	const struct ib_send_wr *bad = NULL;
	int before = atomic_read(&kv_cq_errors);
	int i, n, ret;
	long left;

	if (!kv.pd || kv.small_cq) {
		kv_report("cqoverrun FAIL %s", kv.pd ? "already run" : "not set up");
		return -EBUSY;
	}
	kv.small_cq = ib_create_cq(kv.dev, kv_comp, kv_cq_event, NULL, &cq_attr);
	if (IS_ERR(kv.small_cq)) {
		ret = PTR_ERR(kv.small_cq);
		kv.small_cq = NULL;
		kv_report("cqoverrun FAIL ib_create_cq: %d", ret);
		return ret;
	}
	/* More completions than the CQ holds, however the driver rounded it. */
	n = kv.small_cq->cqe + 4;
	if (n > ARRAY_SIZE(wrs)) {
		kv_report("cqoverrun FAIL the CQ has %d entries, asked for %d",
			  kv.small_cq->cqe, KV_SMALL_CQE);
		return -EINVAL;
	}
	kv.qc = kv_create_qp(kv.small_cq, NULL, ARRAY_SIZE(wrs), 0);
	if (IS_ERR(kv.qc)) {
		ret = PTR_ERR(kv.qc);
		kv.qc = NULL;
		kv_report("cqoverrun FAIL ib_create_qp: %d", ret);
		return ret;
	}
	ret = kv_connect(kv.qc, kv.qc->qp_num);
	if (ret) {
		kv_report("cqoverrun FAIL connecting the QP to itself: %d", ret);
		return ret;
	}
	for (i = 0; i < n; i++) {
		sges[i].addr = kv.src.dma + (KV_SLOT_OVERRUN + i) * KV_SLOT;
		sges[i].length = KV_SLOT;
		sges[i].lkey = kv.pd->local_dma_lkey;
		wrs[i].wr.wr_id = i;
		wrs[i].wr.next = i + 1 < n ? &wrs[i + 1].wr : NULL;
		wrs[i].wr.sg_list = &sges[i];
		wrs[i].wr.num_sge = 1;
		wrs[i].wr.opcode = IB_WR_RDMA_WRITE;
		wrs[i].wr.send_flags = IB_SEND_SIGNALED;
		wrs[i].remote_addr = kv.dst.dma + (KV_SLOT_OVERRUN + i) * KV_SLOT;
		wrs[i].rkey = kv.pd->unsafe_global_rkey;
	}
	ret = ib_post_send(kv.qc, &wrs[0].wr, &bad);
	if (ret) {
		kv_report("cqoverrun FAIL ib_post_send: %d", ret);
		return ret;
	}
	left = wait_event_timeout(kv_events, atomic_read(&kv_cq_errors) != before,
				  msecs_to_jiffies(KV_TIMEOUT_MS));
	if (!left) {
		kv_report("cqoverrun FAIL cqe=%d posted=%d polled=0: no IB_EVENT_CQ_ERR in %d ms",
			  kv.small_cq->cqe, n, KV_TIMEOUT_MS);
		return -ETIMEDOUT;
	}
	if (READ_ONCE(kv_cq_error_cq) != kv.small_cq) {
		kv_report("cqoverrun FAIL IB_EVENT_CQ_ERR for the wrong CQ (%s)",
			  READ_ONCE(kv_cq_error_cq) == kv.cq ? "the main CQ" : "unknown");
		return -EIO;
	}
	kv_report("cqoverrun ok cqe=%d posted=%d polled=0 event=IB_EVENT_CQ_ERR cq_errors=%d",
		  kv.small_cq->cqe, n, atomic_read(&kv_cq_errors) - before);
	return 0;
}

/* Posts count SENDs of KV_SEND_LEN bytes from qs, one chain, wr_ids from first. */
static int kv_srq_send(int first, int count)
{
	struct ib_send_wr wrs[KV_SRQ_POSTED] = {};
	struct ib_sge sges[KV_SRQ_POSTED];
	const struct ib_send_wr *bad = NULL;
	int i;

	for (i = 0; i < count; i++) {
		sges[i].addr = kv.src.dma + (KV_SLOT_SRQ + first + i) * KV_SLOT;
		sges[i].length = KV_SEND_LEN;
		sges[i].lkey = kv.pd->local_dma_lkey;
		wrs[i].wr_id = first + i;
		wrs[i].next = i + 1 < count ? &wrs[i + 1] : NULL;
		wrs[i].sg_list = &sges[i];
		wrs[i].num_sge = 1;
		wrs[i].opcode = IB_WR_SEND;
		wrs[i].send_flags = IB_SEND_SIGNALED;
	}
	return ib_post_send(kv.qs, wrs, &bad);
}

/* Polls count SEND and count RECV completions of the SRQ pair, in any interleaving. */
static int kv_srq_poll(int first, int count, char *why, size_t len)
{
	struct ib_wc *wc, *sends, *recvs;
	int i, got, ns = 0, nr = 0, ret;

	wc = kcalloc(4 * count, sizeof(*wc), GFP_KERNEL);
	if (!wc) {
		scnprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	sends = wc + 2 * count;
	recvs = sends + count;
	got = kv_poll(kv.cq, wc, 2 * count);
	if (got < 2 * count) {
		scnprintf(why, len, "%d of %d completions in %d ms", got, 2 * count,
			  KV_TIMEOUT_MS);
		ret = got < 0 ? got : -ETIMEDOUT;
		goto out;
	}
	for (i = 0; i < got; i++) {
		if (wc[i].status == IB_WC_SUCCESS && wc[i].opcode == IB_WC_RECV) {
			if (nr < count)
				recvs[nr++] = wc[i];
		} else if (ns < count) {
			sends[ns++] = wc[i];
		}
	}
	ret = -EIO;
	if (ns != count || nr != count) {
		scnprintf(why, len, "%d send and %d receive completions, expected %d each",
			  ns, nr, count);
		goto out;
	}
	if (kv_check_wcs(sends, count, IB_WC_SEND, kv.qs->qp_num, first, 0, why, len) &&
	    kv_check_wcs(recvs, count, IB_WC_RECV, kv.qr->qp_num, first, KV_SEND_LEN,
			 why, len))
		ret = 0;
out:
	kfree(wc);
	return ret;
}

/* Receives drop below an armed SRQ limit: IB_EVENT_SRQ_LIMIT_REACHED. */
static int kv_srq(void)
{
	struct ib_srq_init_attr init = {
		.event_handler = kv_srq_event,
		.srq_type = IB_SRQT_BASIC,
		.attr = { .max_wr = KV_SRQ_WR, .max_sge = 1 },
	};
	struct ib_srq_attr arm = { .srq_limit = KV_SRQ_LIMIT };
	struct ib_recv_wr rwrs[KV_SRQ_POSTED] = {};
	struct ib_sge rsges[KV_SRQ_POSTED];
	const struct ib_recv_wr *bad = NULL;
	int limits = atomic_read(&kv_srq_limits);
	int sent = KV_SRQ_POSTED - KV_SRQ_LIMIT;
	int i, ret, early;
	char why[160];
	long left;

	if (!kv.pd || kv.srq) {
		kv_report("srq FAIL %s", kv.pd ? "already run" : "not set up");
		return -EBUSY;
	}
	kv.srq = ib_create_srq(kv.pd, &init);
	if (IS_ERR(kv.srq)) {
		ret = PTR_ERR(kv.srq);
		kv.srq = NULL;
		kv_report("srq FAIL ib_create_srq: %d", ret);
		return ret;
	}
	kv.qr = kv_create_qp(kv.cq, kv.srq, 1, 0);
	if (IS_ERR(kv.qr)) {
		ret = PTR_ERR(kv.qr);
		kv.qr = NULL;
		kv_report("srq FAIL ib_create_qp on the SRQ: %d", ret);
		return ret;
	}
	kv.qs = kv_create_qp(kv.cq, NULL, KV_SRQ_POSTED, 0);
	if (IS_ERR(kv.qs)) {
		ret = PTR_ERR(kv.qs);
		kv.qs = NULL;
		kv_report("srq FAIL ib_create_qp: %d", ret);
		return ret;
	}
	ret = kv_buf_alloc(&kv.rbuf, KV_BUF_SIZE);
	if (ret) {
		kv_report("srq FAIL buffer: %d", ret);
		return ret;
	}
	ret = kv_connect(kv.qs, kv.qr->qp_num);
	if (!ret)
		ret = kv_connect(kv.qr, kv.qs->qp_num);
	if (ret) {
		kv_report("srq FAIL connecting the QPs: %d", ret);
		return ret;
	}
	kv_fill(&kv.src, KV_SLOT_SRQ, KV_SRQ_POSTED, 0x44);
	ib_dma_sync_single_for_device(kv.dev, kv.src.dma, KV_BUF_SIZE, DMA_BIDIRECTIONAL);
	ib_dma_sync_single_for_device(kv.dev, kv.rbuf.dma, KV_BUF_SIZE, DMA_BIDIRECTIONAL);
	for (i = 0; i < KV_SRQ_POSTED; i++) {
		rsges[i].addr = kv.rbuf.dma + i * KV_SLOT;
		rsges[i].length = KV_SLOT;
		rsges[i].lkey = kv.pd->local_dma_lkey;
		rwrs[i].wr_id = i;
		rwrs[i].next = i + 1 < KV_SRQ_POSTED ? &rwrs[i + 1] : NULL;
		rwrs[i].sg_list = &rsges[i];
		rwrs[i].num_sge = 1;
	}
	ret = ib_post_srq_recv(kv.srq, rwrs, &bad);
	if (ret) {
		kv_report("srq FAIL ib_post_srq_recv: %d", ret);
		return ret;
	}
	ret = ib_modify_srq(kv.srq, &arm, IB_SRQ_LIMIT);
	if (ret) {
		kv_report("srq FAIL ib_modify_srq(IB_SRQ_LIMIT %d): %d", KV_SRQ_LIMIT, ret);
		return ret;
	}

	/* Down to the limit: no event yet (it is for fewer than the limit). */
	ret = kv_srq_send(0, sent);
	if (ret) {
		kv_report("srq FAIL ib_post_send: %d", ret);
		return ret;
	}
	ret = kv_srq_poll(0, sent, why, sizeof(why));
	if (ret) {
		kv_report("srq FAIL %s", why);
		return ret;
	}
	msleep(200);
	early = atomic_read(&kv_srq_limits) - limits;
	if (early) {
		kv_report("srq FAIL posted=%d limit=%d: the limit event came with %d receives left",
			  KV_SRQ_POSTED, KV_SRQ_LIMIT, KV_SRQ_POSTED - sent);
		return -EIO;
	}

	/* One more: below the limit. */
	ret = kv_srq_send(sent, 1);
	if (ret) {
		kv_report("srq FAIL ib_post_send: %d", ret);
		return ret;
	}
	ret = kv_srq_poll(sent, 1, why, sizeof(why));
	if (ret) {
		kv_report("srq FAIL %s", why);
		return ret;
	}
	sent++;
	left = wait_event_timeout(kv_events, atomic_read(&kv_srq_limits) != limits,
				  msecs_to_jiffies(KV_TIMEOUT_MS));
	if (!left) {
		kv_report("srq FAIL posted=%d limit=%d sent=%d: no IB_EVENT_SRQ_LIMIT_REACHED in %d ms (other SRQ events: %d)",
			  KV_SRQ_POSTED, KV_SRQ_LIMIT, sent, KV_TIMEOUT_MS,
			  atomic_read(&kv_srq_other));
		return -ETIMEDOUT;
	}
	ib_dma_sync_single_for_cpu(kv.dev, kv.rbuf.dma, KV_BUF_SIZE, DMA_BIDIRECTIONAL);
	for (i = 0; i < sent; i++) {
		if (memcmp(kv_slot(&kv.rbuf, i), kv_slot(&kv.src, KV_SLOT_SRQ + i),
			   KV_SEND_LEN)) {
			kv_report("srq FAIL data of SEND %d did not arrive", i);
			return -EIO;
		}
	}
	kv_report("srq ok posted=%d limit=%d sent=%d received=%d early_events=0 event=IB_EVENT_SRQ_LIMIT_REACHED data=verified",
		  KV_SRQ_POSTED, KV_SRQ_LIMIT, sent, sent);
	return 0;
}

/*
 * stream: a thread that keeps a chain of KV_CHAIN WRITEs from qa to qb in flight, polls it
 * and posts the next, until kthread_stop(). It takes no lock: the objects it uses live until
 * kv_teardown(), which stops it first. Stopped, it leaves the last chain in flight.
 */
static struct task_struct *kv_streamer;
static struct {
	long rounds, completed, bad;
	int first_bad_status;
	u64 first_bad_wr_id;
} kv_stream;

static void kv_stream_bad(const struct ib_wc *wc)
{
	if (!kv_stream.bad++) {
		kv_stream.first_bad_status = wc->status;
		kv_stream.first_bad_wr_id = wc->wr_id;
	}
}

static int kv_stream_fn(void *unused)
{
	static struct ib_rdma_wr wrs[KV_CHAIN];
	static struct ib_sge sges[KV_CHAIN];
	static struct ib_wc wc[KV_CHAIN];
	const struct ib_send_wr *bad;
	int got, n, i;

	while (!kthread_should_stop()) {
		kv_chain_writes(wrs, sges, KV_SLOT_CHAIN, KV_CHAIN, false);
		if (ib_post_send(kv.qa, &wrs[0].wr, &bad)) {
			kv_stream.bad++;
			break;
		}
		for (got = 0; got < KV_CHAIN && !kthread_should_stop(); got += n) {
			n = ib_poll_cq(kv.cq, KV_CHAIN - got, wc);
			if (n < 0) {
				kv_stream.bad++;
				goto out;
			}
			for (i = 0; i < n; i++)
				if (wc[i].status != IB_WC_SUCCESS || wc[i].qp != kv.qa ||
				    wc[i].wr_id < KV_SLOT_CHAIN ||
				    wc[i].wr_id >= KV_SLOT_CHAIN + KV_CHAIN)
					kv_stream_bad(&wc[i]);
			kv_stream.completed += n;
			if (!n)
				usleep_range(50, 200);
		}
		kv_stream.rounds++;
	}
out:
	/* kthread_stop() wants a thread that is still there. */
	while (!kthread_should_stop())
		msleep(10);
	return 0;
}

static int kv_stream_start(void)
{
	struct task_struct *t;

	if (!kv.qa) {
		kv_report("stream FAIL not set up");
		return -ENODEV;
	}
	if (kv_streamer) {
		kv_report("stream FAIL already streaming");
		return -EBUSY;
	}
	memset(&kv_stream, 0, sizeof(kv_stream));
	t = kthread_run(kv_stream_fn, NULL, "kv_stream");
	if (IS_ERR(t)) {
		kv_report("stream FAIL kthread_run: %ld", PTR_ERR(t));
		return PTR_ERR(t);
	}
	kv_streamer = t;
	kv_report("stream ok started");
	return 0;
}

/* Stops the streamer (if any) and notes what it did for the next report. */
static void kv_stream_stop(void)
{
	if (!kv_streamer)
		return;
	kthread_stop(kv_streamer);
	kv_streamer = NULL;
	pr_info("stream stopped rounds=%ld completed=%ld bad=%ld first_bad_status=%d first_bad_wr_id=%llu\n",
		kv_stream.rounds, kv_stream.completed, kv_stream.bad,
		kv_stream.first_bad_status, kv_stream.first_bad_wr_id);
}

static int kv_teardown_phase(void)
{
	kv_teardown();
	kv_report("teardown ok qp_events=%d last_qp_event=%d",
		  atomic_read(&kv_qp_events), READ_ONCE(kv_qp_last_event));
	return 0;
}

static const struct {
	const char *name;
	int (*run)(void);
} kv_phases[] = {
	{ "setup", kv_setup },
	{ "chain", kv_chain },
	{ "inline", kv_inline },
	{ "push", kv_push },
	{ "cqoverrun", kv_cqoverrun },
	{ "srq", kv_srq },
	{ "distrust", kv_distrust },
	{ "reuse", kv_reuse },
	{ "stream", kv_stream_start },
	{ "teardown", kv_teardown_phase },
};

static int kv_run_set(const char *val, const struct kernel_param *kp)
{
	int i, ret = -EINVAL;

	mutex_lock(&kv_lock);
	for (i = 0; i < ARRAY_SIZE(kv_phases); i++) {
		if (!sysfs_streq(val, kv_phases[i].name))
			continue;
		if (kv.dev) {
			ret = kv_phases[i].run();
		} else {
			kv_report("%s FAIL no device %s", kv_phases[i].name, device);
			ret = -ENODEV;
		}
		break;
	}
	if (i == ARRAY_SIZE(kv_phases))
		kv_report("unknown phase FAIL %.32s", val);
	mutex_unlock(&kv_lock);
	/* A failed phase fails the write too; the result says why. */
	return ret;
}

static int kv_result_get(char *buffer, const struct kernel_param *kp)
{
	int len;

	mutex_lock(&kv_lock);
	len = scnprintf(buffer, PAGE_SIZE, "%s\n", kv.result);
	mutex_unlock(&kv_lock);
	return len;
}

static const struct kernel_param_ops kv_run_ops = {
	.set = kv_run_set,
};
module_param_cb(run, &kv_run_ops, NULL, 0200);
MODULE_PARM_DESC(run, "write a phase name to run it: setup chain inline push cqoverrun srq distrust reuse stream teardown");

static const struct kernel_param_ops kv_result_ops = {
	.get = kv_result_get,
};
module_param_cb(result, &kv_result_ops, NULL, 0444);
MODULE_PARM_DESC(result, "the last phase's result line");

static int kv_add(struct ib_device *dev)
{
	int ret = -EOPNOTSUPP;

	mutex_lock(&kv_lock);
	if (!kv.dev && !strcmp(dev_name(&dev->dev), device)) {
		kv.dev = dev;
		kv_report("ready device=%s", device);
		ret = 0;
	}
	mutex_unlock(&kv_lock);
	return ret;
}

static void kv_remove(struct ib_device *dev, void *client_data)
{
	mutex_lock(&kv_lock);
	if (kv.dev == dev) {
		bool streamed = kv_streamer;

		kv_teardown();
		kv.dev = NULL;
		if (streamed)
			kv_report("removed device=%s under traffic: stream rounds=%ld completed=%ld bad=%ld first_bad_status=%d",
				  device, kv_stream.rounds, kv_stream.completed, kv_stream.bad,
				  kv_stream.first_bad_status);
		else
			kv_report("removed device=%s", device);
	}
	mutex_unlock(&kv_lock);
}

static struct ib_client kv_client = {
	.name = "ferroce_kverbs_test",
	.add = kv_add,
	.remove = kv_remove,
};

static int __init kv_init(void)
{
	scnprintf(kv.result, sizeof(kv.result), "waiting for %s", device);
	return ib_register_client(&kv_client);
}

static void __exit kv_exit(void)
{
	/* Calls kv_remove() for the bound device, which tears everything down. */
	ib_unregister_client(&kv_client);
}

module_init(kv_init);
module_exit(kv_exit);

MODULE_DESCRIPTION("ferroce kernel verbs test: doorbells, inline, push, CQ overrun, SRQ limit");
MODULE_LICENSE("GPL");
