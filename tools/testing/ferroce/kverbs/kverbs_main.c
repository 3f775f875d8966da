// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_kverbs_test: ferroce0 as a kernel verbs consumer sees it. This file has the
 * module, its state, setup and the counted phases; kverbs_phases.c the others.
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
 *   teardown   everything goes (also on unload and on device removal). On device
 *              removal (the client's remove) a QP whose CQ ib_core polls is
 *              drained first with ib_drain_qp(), as ULPs drain their QPs there:
 *              the drain's completions must arrive while ib_core unregisters
 *              the device. (Not in the teardown phase: driver-faults runs it on
 *              a stalled NIC, where no drain can complete.)
 *
 * The counted phases (chain, inline, push) only post and poll: objects come
 * from setup, the CQ is polled and never armed (an arm is a doorbell) and no
 * receive is posted (a DB_RQ), so every doorbell and WQE fetch the NIC
 * counts between the scenario's two reads belongs to the phase.
 */

#include "kverbs.h"

static char *device = "ferroce0";
module_param(device, charp, 0444);
MODULE_PARM_DESC(device, "RDMA device to test (default ferroce0)");

static uint gid_index = 3;
module_param(gid_index, uint, 0444);
MODULE_PARM_DESC(gid_index, "GID index the QPs use: a RoCE v2 GID of the port (default 3)");

/* kv_lock serialises phases, result reads and device removal. */
static DEFINE_MUTEX(kv_lock);
struct kv_state kv;

/* Events arrive from the driver's event queue handling, in any context. */
DECLARE_WAIT_QUEUE_HEAD(kv_events);
atomic_t kv_cq_errors = ATOMIC_INIT(0);
struct ib_cq *kv_cq_error_cq;
atomic_t kv_srq_limits = ATOMIC_INIT(0);
atomic_t kv_srq_other = ATOMIC_INIT(0);
atomic_t kv_qp_events = ATOMIC_INIT(0);
int kv_qp_last_event = -1;

void kv_report(const char *fmt, ...)
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

void kv_comp(struct ib_cq *cq, void *context)
{
	/* Never armed: a completion event is a driver bug worth seeing. */
	pr_err("unexpected completion event on CQ %p\n", cq);
}

void kv_cq_event(struct ib_event *event, void *context)
{
	pr_info("CQ event %s (%d)\n", ib_event_msg(event->event), event->event);
	if (event->event == IB_EVENT_CQ_ERR) {
		WRITE_ONCE(kv_cq_error_cq, event->element.cq);
		atomic_inc(&kv_cq_errors);
	}
	wake_up(&kv_events);
}

void kv_qp_event(struct ib_event *event, void *context)
{
	pr_info("QP %u event %s (%d)\n", event->element.qp->qp_num,
		ib_event_msg(event->event), event->event);
	WRITE_ONCE(kv_qp_last_event, event->event);
	atomic_inc(&kv_qp_events);
	wake_up(&kv_events);
}

void kv_srq_event(struct ib_event *event, void *context)
{
	pr_info("SRQ event %s (%d)\n", ib_event_msg(event->event), event->event);
	if (event->event == IB_EVENT_SRQ_LIMIT_REACHED)
		atomic_inc(&kv_srq_limits);
	else
		atomic_inc(&kv_srq_other);
	wake_up(&kv_events);
}

int kv_buf_alloc(struct kv_buf *b, size_t len)
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

void kv_buf_free(struct kv_buf *b, size_t len)
{
	if (!b->cpu)
		return;
	ib_dma_unmap_single(kv.dev, b->dma, len, DMA_BIDIRECTIONAL);
	kfree(b->cpu);
	b->cpu = NULL;
}

void *kv_slot(struct kv_buf *b, int slot)
{
	return b->cpu + slot * KV_SLOT;
}

/* A pattern that differs per slot and per phase (seed). */
void kv_fill(struct kv_buf *b, int slot, int n, u8 seed)
{
	int i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < KV_SLOT; j++)
			((u8 *)kv_slot(b, slot + i))[j] = seed + (slot + i) * 7 + j;
}

struct ib_qp *kv_create_qp(struct ib_cq *cq, struct ib_srq *srq,
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
int kv_connect(struct ib_qp *qp, u32 dest_qpn)
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
int kv_poll(struct ib_cq *cq, struct ib_wc *wc, int n)
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
bool kv_check_wcs(struct ib_wc *wc, int n, enum ib_wc_opcode opcode,
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

static void kv_teardown(void)
{
	struct ib_qp **qps[] = { &kv.qa, &kv.qb, &kv.qc, &kv.qs, &kv.qr,
				 &kv.qd, &kv.qe, &kv.qf };
	int i, ret;

	kv_stream_stop();

	if (kv.qg) {
		ib_destroy_qp(kv.qg);
		kv.qg = NULL;
	}
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
	if (kv.drain_cq) {
		ib_free_cq(kv.drain_cq);
		kv.drain_cq = NULL;
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
	kv.drain_cq = ib_alloc_cq(kv.dev, NULL, 8, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(kv.drain_cq)) {
		ret = PTR_ERR(kv.drain_cq);
		kv.drain_cq = NULL;
		kv_report("setup FAIL ib_alloc_cq: %d", ret);
		goto fail;
	}
	kv.qg = kv_create_qp(kv.drain_cq, NULL, 4, 0);
	if (IS_ERR(kv.qg)) {
		ret = PTR_ERR(kv.qg);
		kv.qg = NULL;
		kv_report("setup FAIL ib_create_qp: %d", ret);
		goto fail;
	}
	ret = kv_connect(kv.qg, kv.qg->qp_num);
	if (ret) {
		kv_report("setup FAIL connecting the drained QP to itself: %d", ret);
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
void kv_chain_writes(struct ib_rdma_wr *wrs, struct ib_sge *sges, int first, int n,
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

		kv_stream_stop();
		if (kv.qg)
			ib_drain_qp(kv.qg);
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
