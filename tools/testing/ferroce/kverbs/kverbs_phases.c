// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_kverbs_test's phases beyond setup and the counted writes (kverbs_main.c): cqoverrun,
 * srq, distrust, reuse and stream. They run under kv_lock, like every phase.
 */

#include "kverbs.h"

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

int kv_distrust(void)
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
int kv_reuse(void)
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
int kv_cqoverrun(void)
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
int kv_srq(void)
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
struct task_struct *kv_streamer;
struct kv_stream_stats kv_stream;

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

int kv_stream_start(void)
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
void kv_stream_stop(void)
{
	if (!kv_streamer)
		return;
	kthread_stop(kv_streamer);
	kv_streamer = NULL;
	pr_info("stream stopped rounds=%ld completed=%ld bad=%ld first_bad_status=%d first_bad_wr_id=%llu\n",
		kv_stream.rounds, kv_stream.completed, kv_stream.bad,
		kv_stream.first_bad_status, kv_stream.first_bad_wr_id);
}
