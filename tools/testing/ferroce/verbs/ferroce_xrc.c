// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_xrc: XRC (extended reliable connection) through one RDMA device, its initiators and
 * targets connected through the port's own GID (the NIC loops the frames back, as for
 * ferroce_chain).
 *
 *   ferroce_xrc DEVICE GID_INDEX
 *
 * XRC domain 1 (ibv_open_xrcd on a file made with O_CREAT) has an XRC SRQ on a CQ and a PD;
 * XRC domain 2 (another file) has one too. Then:
 *
 *   a. an XRC_RECV (target) QP of domain 1 and an XRC_SEND (initiator) QP, connected to each
 *      other as ibv_xsrq_pingpong connects them; SENDs from the initiator naming the SRQ
 *      (wr.qp_type.xrc.remote_srqn) arrive in the SRQ's CQ with wc.qp_num the target's
 *      number, their length and their bytes; then the same through a second pair whose
 *      initiator posts with the ibv_qp_ex API (ibv_wr_set_xrc_srqn), if the device offers it
 *      for XRC_SEND QPs, into the same SRQ: one SRQ, two targets;
 *   b. a child process, forked before any verbs call, opens domain 1 through the same file
 *      (ibv_open_xrcd with the inherited fd, no O_CREAT) in a device context of its own and
 *      ibv_open_qp's a third target by number; the parent destroys its own handle of that
 *      target, and SENDs still reach the SRQ through it while the child holds it; once the
 *      child lets go too, the target is gone (ibv_open_qp of its number fails);
 *   c. a SEND naming domain 2's SRQ through a target of domain 1 completes at the initiator
 *      with IBV_WC_REM_ACCESS_ERR, nothing arrives in either SRQ, and the target's creator
 *      gets IBV_EVENT_QP_ACCESS_ERR on its handle (ibv_get_async_event, polling the
 *      context's async_fd with a timeout); the child, which opened the target, is asked too,
 *      but Linux 7.3's uverbs OPEN_QP gives an opened QP no async event file
 *      (drivers/infiniband/core/uverbs_cmd.c, ib_uverbs_open_qp), so ib_core drops its
 *      events: what it got is printed, not judged;
 *      domain 1's SRQ still takes SENDs through its first target, domain 2's through a target
 *      of domain 2;
 *   d. ibv_open_qp of numbers that are no target QP of the domain fails (an initiator, a
 *      target of the other domain, a target asked for as RC, QP 1): each refusal's errno is
 *      printed; the targets themselves open.
 *
 * One line per step, "xrc X: ok" after each part, and "xrc ok: ..." at the end; on a failure
 * "xrc: FAIL: ..." and exit status 1 (2: usage).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs.h"

#define SLOT 4096
#define SLOTS_PER_SRQ 8
#define NSLOTS (2 * SLOTS_PER_SRQ)	/* SRQ 1: slots 0..7, SRQ 2: slots 8..15 */
#define SEND_AT (NSLOTS * SLOT)		/* the send buffer, after the receive slots */
#define BUF_LEN (SEND_AT + SLOT)
#define WAIT_MS 20000			/* for a completion, an event or the child's answer */
#define QUIET_MS 500			/* how long nothing must arrive after a refusal */
#define INI_PSN 0x1234
#define TGT_PSN 0x5678
#define FILE1 "/tmp/ferroce_xrc.domain1"
#define FILE2 "/tmp/ferroce_xrc.domain2"

static struct ibv_context *ctx;
static int gid_index;
static union ibv_gid gid;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *send_cq, *recv_cq;
static uint8_t *buf;
static unsigned next_msg;
static pid_t child = -1;
static int to_child = -1, from_child = -1;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	printf("xrc: FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	exit(1);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static uint8_t pattern(unsigned msg, size_t i)
{
	return (uint8_t)(msg * 31 + i * 7 + 1);
}

/* One completion of `cq` within `ms` milliseconds: 1, or 0 if none came. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	long long end = now_ms() + ms;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			die("ibv_poll_cq: %d", n);
		if (n)
			return 1;
	} while (now_ms() < end);
	return 0;
}

static int is_qp_event(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return 1;
	default:
		return 0;
	}
}

/*
 * Waits up to `ms` for async event `type` on QP handle `qp` of context `c` (poll() on its
 * async_fd), acknowledging every event read and printing the others. 1 if it came, 0 if not.
 */
static int await_qp_event(struct ibv_context *c, struct ibv_qp *qp, enum ibv_event_type type,
			  int ms, const char *who)
{
	long long end = now_ms() + ms;

	for (;;) {
		struct pollfd p = { .fd = c->async_fd, .events = POLLIN };
		struct ibv_async_event ev;
		long long left = end - now_ms();
		int n, match;

		if (left <= 0)
			return 0;
		n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			printf("xrc %s: poll on the async fd: %s\n", who, strerror(errno));
			return 0;
		}
		if (n == 0)
			return 0;
		if (ibv_get_async_event(c, &ev)) {
			printf("xrc %s: ibv_get_async_event: %s\n", who, strerror(errno));
			return 0;
		}
		match = ev.event_type == type && ev.element.qp == qp;
		if (is_qp_event(ev.event_type))
			printf("xrc %s: async event %s on QP %#x%s\n", who,
			       ibv_event_type_str(ev.event_type), ev.element.qp->qp_num,
			       ev.element.qp == qp ? " (this handle)" : " (another handle)");
		else
			printf("xrc %s: async event %s\n", who, ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		if (match)
			return 1;
	}
}

static ssize_t read_full(int fd, void *p, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, (char *)p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)done;
		done += n;
	}
	return done;
}

static int write_full(int fd, const void *p, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, (const char *)p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		done += n;
	}
	return 0;
}

/* The child: what the parent asks, and what it answers. */
enum { OP_OPEN = 1, OP_CLOSE, OP_EVENT, OP_EXIT };

struct request {
	int op;
	uint32_t qpn;
};

struct reply {
	int err;	/* 0, or the errno of what failed */
	int state;	/* OP_OPEN: the opened QP's state (ibv_query_qp), -1 if unknown */
	int event;	/* OP_EVENT: 1 if IBV_EVENT_QP_ACCESS_ERR came on its handle */
};

#define HELD 4

/*
 * The child process: opens DEVICE itself (a context of its own, after the fork) and XRC
 * domain 1 through `xrcd_fd`, then ibv_open_qp's, closes and watches target QPs by number as
 * the parent asks. Exits when told to (0 if every handle and the domain closed) or when the
 * parent is gone.
 */
static void child_main(const char *device, int xrcd_fd, int rfd, int wfd)
{
	struct { uint32_t qpn; struct ibv_qp *qp; } held[HELD] = { { 0, NULL } };
	struct ibv_context *c = NULL;
	struct ibv_xrcd *x = NULL;
	struct request rq;
	int i, rc;

	while (read_full(rfd, &rq, sizeof(rq)) == sizeof(rq)) {
		struct reply rp = { .err = 0, .state = -1, .event = 0 };
		struct ibv_qp *qp = NULL;
		int slot = -1;

		for (i = 0; i < HELD; i++)
			if (held[i].qp && held[i].qpn == rq.qpn)
				slot = i;
		switch (rq.op) {
		case OP_OPEN: {
			struct ibv_qp_open_attr oa = {
				.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
					     IBV_QP_OPEN_ATTR_TYPE,
				.qp_num = rq.qpn, .qp_type = IBV_QPT_XRC_RECV,
			};
			struct ibv_qp_init_attr init;
			struct ibv_qp_attr attr;

			if (!c) {
				struct ibv_xrcd_init_attr xa = {
					.comp_mask = IBV_XRCD_INIT_ATTR_FD |
						     IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = xrcd_fd, .oflags = 0,
				};

				c = open_device(device);
				if (!c) {
					rp.err = errno;
					printf("xrc child: cannot open %s: %s\n", device,
					       strerror(rp.err));
					break;
				}
				x = ibv_open_xrcd(c, &xa);
				if (!x) {
					rp.err = errno;
					printf("xrc child: ibv_open_xrcd(fd %d, no O_CREAT): %s\n",
					       xrcd_fd, strerror(rp.err));
					ibv_close_device(c);
					c = NULL;
					break;
				}
				printf("xrc child: pid %d, a context of its own on %s, XRC domain 1 "
				       "opened through the same file (fd %d, no O_CREAT)\n",
				       (int)getpid(), device, xrcd_fd);
			}
			for (i = 0; i < HELD && held[i].qp; i++)
				;
			if (i == HELD) {
				rp.err = ENOSPC;
				break;
			}
			oa.xrcd = x;
			qp = ibv_open_qp(c, &oa);
			if (!qp) {
				rp.err = errno;
				printf("xrc child: ibv_open_qp(%#x): %s\n", rq.qpn, strerror(rp.err));
				break;
			}
			held[i].qpn = rq.qpn;
			held[i].qp = qp;
			rc = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
			if (!rc)
				rp.state = attr.qp_state;
			else
				printf("xrc child: ibv_query_qp(%#x): %s\n", rq.qpn, strerror(rc));
			printf("xrc child: opened target QP %#x (ibv_open_qp), state %d\n", qp->qp_num,
			       rp.state);
			break;
		}
		case OP_CLOSE:
			if (slot < 0) {
				rp.err = ENOENT;
				break;
			}
			rp.err = ibv_destroy_qp(held[slot].qp);
			printf("xrc child: closed its handle of target QP %#x: %s\n", rq.qpn,
			       rp.err ? strerror(rp.err) : "ok");
			if (!rp.err)
				held[slot].qp = NULL;
			break;
		case OP_EVENT:
			if (slot < 0) {
				rp.err = ENOENT;
				break;
			}
			rp.event = await_qp_event(c, held[slot].qp, IBV_EVENT_QP_ACCESS_ERR, QUIET_MS,
						  "child");
			break;
		case OP_EXIT:
			for (i = 0; i < HELD; i++)
				if (held[i].qp && (rc = ibv_destroy_qp(held[i].qp)))
					rp.err = rc;
			if (x && (rc = ibv_close_xrcd(x)))
				rp.err = rc;
			if (c && ibv_close_device(c))
				rp.err = errno ? errno : EIO;
			write_full(wfd, &rp, sizeof(rp));
			_exit(rp.err ? 1 : 0);
		default:
			rp.err = EINVAL;
		}
		fflush(stdout);
		if (write_full(wfd, &rp, sizeof(rp)))
			_exit(3);
	}
	_exit(2); /* the parent is gone */
}

/* Asks the child to do `op` on QP `qpn`; its reply (it must come within WAIT_MS, plus the wait
 * it may do itself). */
static struct reply ask(int op, uint32_t qpn)
{
	struct request rq = { .op = op, .qpn = qpn };
	struct pollfd p = { .fd = from_child, .events = POLLIN };
	struct reply rp;
	int n;

	if (write_full(to_child, &rq, sizeof(rq)))
		die("the child is gone (writing to it: %s)", strerror(errno));
	do
		n = poll(&p, 1, 2 * WAIT_MS);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		die("the child did not answer within %d s", 2 * WAIT_MS / 1000);
	if (read_full(from_child, &rp, sizeof(rp)) != sizeof(rp))
		die("the child is gone (no answer)");
	return rp;
}

static void post_recv(struct ibv_srq *srq, int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf + (size_t)slot * SLOT, .length = SLOT, .lkey = mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc;

	memset(buf + (size_t)slot * SLOT, 0, SLOT);
	rc = ibv_post_srq_recv(srq, &wr, &bad);
	if (rc)
		die("ibv_post_srq_recv (slot %d): %s", slot, strerror(rc));
}

static struct ibv_xrcd *open_domain(int fd, const char *path)
{
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd, .oflags = O_CREAT,
	};
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &attr);

	if (!xrcd)
		die("ibv_open_xrcd(%s, O_CREAT): %s", path, strerror(errno));
	return xrcd;
}

/* An XRC SRQ of `xrcd` on the receive CQ, its receive slots `first`.. posted; its number. */
static struct ibv_srq *create_xrc_srq(struct ibv_xrcd *xrcd, int first, uint32_t *srqn)
{
	struct ibv_srq_init_attr_ex attr = {
		.attr = { .max_wr = SLOTS_PER_SRQ, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC, .xrcd = xrcd, .cq = recv_cq, .pd = pd,
	};
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &attr);
	int i, rc;

	if (!srq)
		die("ibv_create_srq_ex(IBV_SRQT_XRC): %s", strerror(errno));
	rc = ibv_get_srq_num(srq, srqn);
	if (rc)
		die("ibv_get_srq_num: %s", strerror(rc));
	for (i = first; i < first + SLOTS_PER_SRQ; i++)
		post_recv(srq, i);
	return srq;
}

static struct ibv_qp *create_target(struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex init = {
		.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &init);

	if (!qp)
		die("ibv_create_qp_ex(IBV_QPT_XRC_RECV): %s", strerror(errno));
	return qp;
}

/* An XRC_SEND QP on the send CQ, with the ibv_qp_ex API if `extended`; NULL (errno) if the
 * device refuses it. */
static struct ibv_qp *create_initiator(int extended)
{
	struct ibv_qp_init_attr_ex init = {
		.qp_type = IBV_QPT_XRC_SEND, .send_cq = send_cq,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
	};

	if (extended) {
		init.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		init.send_ops_flags = IBV_QP_EX_WITH_SEND;
	}
	return ibv_create_qp_ex(ctx, &init);
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, const char *what)
{
	int rc = ibv_modify_qp(qp, attr, mask);

	if (rc)
		die("ibv_modify_qp(QP %#x to %s): %s", qp->qp_num, what, strerror(rc));
}

static void set_av(struct ibv_ah_attr *ah)
{
	ah->is_global = 1;
	ah->port_num = 1;
	ah->grh.hop_limit = 64;
	ah->grh.sgid_index = gid_index;
	ah->grh.dgid = gid;
}

/*
 * Initiator `ini` and target `tgt` to INIT, RTR towards each other and RTS, with the
 * attributes ibv_xsrq_pingpong gives them (ib_core's masks for XRC_INI and XRC_TGT).
 */
static void connect_xrc(struct ibv_qp *ini, struct ibv_qp *tgt)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	modify(tgt, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
	       "INIT");
	attr.qp_access_flags = 0;
	modify(ini, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
	       "INIT");

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = ini->qp_num;
	attr.rq_psn = INI_PSN;
	attr.min_rnr_timer = 12;
	set_av(&attr.ah_attr);
	modify(tgt, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.sq_psn = TGT_PSN;
	modify(tgt, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN, "RTS");

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = tgt->qp_num;
	attr.rq_psn = TGT_PSN;
	set_av(&attr.ah_attr);
	modify(ini, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN, "RTR");
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = INI_PSN;
	modify(ini, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
	       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

/* Posts message `msg` of `len` bytes (the pattern) from `ini` to XRC SRQ `srqn`, signalled,
 * with ibv_post_send or, if `extended`, the ibv_wr_* API. */
static void send_msg(struct ibv_qp *ini, int extended, uint32_t srqn, unsigned msg, size_t len)
{
	uint8_t *out = buf + SEND_AT;
	size_t i;
	int rc;

	for (i = 0; i < len; i++)
		out[i] = pattern(msg, i);
	if (extended) {
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(ini);

		ibv_wr_start(qx);
		qx->wr_id = msg;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_xrc_srqn(qx, srqn);
		ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)out, (uint32_t)len);
		rc = ibv_wr_complete(qx);
		if (rc)
			die("ibv_wr_complete (SEND of %zu B to SRQ %#x): %s", len, srqn,
			    strerror(rc));
	} else {
		struct ibv_sge sge = { .addr = (uintptr_t)out, .length = len, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = msg, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		wr.qp_type.xrc.remote_srqn = srqn;
		rc = ibv_post_send(ini, &wr, &bad);
		if (rc)
			die("ibv_post_send (SEND of %zu B to SRQ %#x): %s", len, srqn,
			    strerror(rc));
	}
}

/*
 * Message `msg` of `len` bytes completed at its initiator and arrived in `srq` (its slots
 * `first`..) through target QP number `tgt_qpn`, whole; its slot is posted again.
 */
static void expect_delivery(const char *part, struct ibv_srq *srq, int first, uint32_t tgt_qpn,
			    unsigned msg, size_t len)
{
	struct ibv_wc wc;
	uint8_t *in;
	size_t i;

	if (!poll_one(send_cq, &wc, WAIT_MS))
		die("%s: no send completion for message %u (%zu B) in %d s", part, msg, len,
		    WAIT_MS / 1000);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND || wc.wr_id != msg)
		die("%s: send completion of message %u: status %s, opcode %d, wr_id %llu", part,
		    msg, ibv_wc_status_str(wc.status), wc.opcode, (unsigned long long)wc.wr_id);
	if (!poll_one(recv_cq, &wc, WAIT_MS))
		die("%s: message %u (%zu B) completed at the initiator but never arrived in the "
		    "SRQ's CQ (%d s)", part, msg, len, WAIT_MS / 1000);
	if (wc.status != IBV_WC_SUCCESS)
		die("%s: receive of message %u: status %s", part, msg, ibv_wc_status_str(wc.status));
	if (wc.opcode != IBV_WC_RECV)
		die("%s: receive of message %u: opcode %d, not IBV_WC_RECV", part, msg, wc.opcode);
	if (wc.qp_num != tgt_qpn)
		die("%s: receive of message %u: wc.qp_num %#x, expected the target QP %#x", part,
		    msg, wc.qp_num, tgt_qpn);
	if (wc.byte_len != len)
		die("%s: receive of message %u: byte_len %u, expected %zu", part, msg, wc.byte_len,
		    len);
	if (wc.wr_id < (uint64_t)first || wc.wr_id >= (uint64_t)first + SLOTS_PER_SRQ)
		die("%s: message %u took receive WR %llu, not one of this SRQ's (%d..%d)", part,
		    msg, (unsigned long long)wc.wr_id, first, first + SLOTS_PER_SRQ - 1);
	in = buf + wc.wr_id * SLOT;
	for (i = 0; i < len; i++)
		if (in[i] != pattern(msg, i))
			die("%s: message %u: byte %zu is %#x, sent %#x", part, msg, i, in[i],
			    pattern(msg, i));
	post_recv(srq, (int)wc.wr_id);
}

/* Sends `n` messages of `sizes` from `ini` through `tgt_qpn` into `srq`, one at a time. */
static void deliver(const char *part, struct ibv_qp *ini, int extended, struct ibv_srq *srq,
		    uint32_t srqn, int first, uint32_t tgt_qpn, const size_t *sizes, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		unsigned msg = next_msg++;

		send_msg(ini, extended, srqn, msg, sizes[i]);
		expect_delivery(part, srq, first, tgt_qpn, msg, sizes[i]);
	}
}

static void destroy_qp(struct ibv_qp *qp, const char *what)
{
	uint32_t qpn = qp->qp_num;
	int rc = ibv_destroy_qp(qp);

	if (rc)
		die("ibv_destroy_qp(%s %#x): %s", what, qpn, strerror(rc));
}

/* ibv_open_qp(xrcd, qpn as `type`): must fail; what the refusal said. */
static void refused(const char *what, struct ibv_xrcd *xrcd, uint32_t qpn, enum ibv_qp_type type)
{
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
		.qp_num = qpn, .xrcd = xrcd, .qp_type = type,
	};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_open_qp(ctx, &oa);
	if (qp) {
		ibv_destroy_qp(qp);
		die("d: ibv_open_qp of %s (QP %#x) succeeded", what, qpn);
	}
	printf("xrc d: ibv_open_qp of %s (QP %#x): refused, errno %d (%s)\n", what, qpn, errno,
	       strerror(errno));
}

/* ibv_open_qp(xrcd, qpn) of a target: must work; the handle is closed again. */
static void opens(const char *what, struct ibv_xrcd *xrcd, uint32_t qpn)
{
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
		.qp_num = qpn, .xrcd = xrcd, .qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_qp *qp = ibv_open_qp(ctx, &oa);

	if (!qp)
		die("d: ibv_open_qp of %s (QP %#x) in its own domain: %s", what, qpn,
		    strerror(errno));
	destroy_qp(qp, "opened target");
	printf("xrc d: ibv_open_qp of %s (QP %#x) in its own domain: opened and closed\n", what,
	       qpn);
}

int main(int argc, char **argv)
{
	static const size_t sizes_a[] = { 1, 64, 1024, 1025, 4096 };
	static const size_t sizes_ex[] = { 8, 2048, 4096 };
	static const size_t sizes_b[] = { 512, 1, 3000 };
	static const size_t one[] = { 256 };
	struct ibv_qp *t1, *i1, *t2 = NULL, *i2, *t3, *i3, *t4, *i4, *t5, *t6, *i6;
	struct ibv_srq *srq1, *srq2;
	struct ibv_xrcd *xrcd1, *xrcd2;
	struct ibv_device_attr dattr;
	int fd1, fd2, pipes[2][2], rc, ex_sends = 0, refusals = 0, status = 0;
	uint32_t srqn1, srqn2, qpn3, qpn4;
	char gid_text[INET6_ADDRSTRLEN];
	struct ibv_wc wc;
	struct reply rp;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX\n", argv[0]);
		return 2;
	}
	gid_index = atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * The files of the two domains, then the child, before any verbs call: it inherits the
	 * fds and nothing of the parent's verbs (no registered memory, rings or doorbell pages
	 * shared across the fork).
	 */
	unlink(FILE1);
	unlink(FILE2);
	fd1 = open(FILE1, O_RDONLY | O_CREAT, S_IRUSR | S_IWUSR);
	fd2 = open(FILE2, O_RDONLY | O_CREAT, S_IRUSR | S_IWUSR);
	if (fd1 < 0 || fd2 < 0)
		die("cannot create %s and %s: %s", FILE1, FILE2, strerror(errno));
	if (pipe(pipes[0]) || pipe(pipes[1]))
		die("pipe: %s", strerror(errno));
	child = fork();
	if (child < 0)
		die("fork: %s", strerror(errno));
	if (child == 0) {
		child = -1;
		close(pipes[0][1]);
		close(pipes[1][0]);
		close(fd2);
		child_main(argv[1], fd1, pipes[0][0], pipes[1][1]);
	}
	close(pipes[0][0]);
	close(pipes[1][1]);
	to_child = pipes[0][1];
	from_child = pipes[1][0];

	ctx = open_device(argv[1]);
	if (!ctx)
		die("cannot open %s: %s", argv[1], strerror(errno));
	rc = ibv_query_device(ctx, &dattr);
	if (rc)
		die("ibv_query_device: %s", strerror(rc));
	if (!(dattr.device_cap_flags & IBV_DEVICE_XRC))
		die("%s does not report IBV_DEVICE_XRC (device_cap_flags %#x)", argv[1],
		    dattr.device_cap_flags);
	rc = ibv_query_gid(ctx, 1, gid_index, &gid);
	if (rc)
		die("ibv_query_gid(%d): %s", gid_index, strerror(rc));
	inet_ntop(AF_INET6, gid.raw, gid_text, sizeof(gid_text));
	printf("xrc: %s reports IBV_DEVICE_XRC; GID %d %s, every pair looped back through it\n",
	       argv[1], gid_index, gid_text);
	pd = ibv_alloc_pd(ctx);
	buf = calloc(1, BUF_LEN);
	if (!pd || !buf)
		die("ibv_alloc_pd: %s", strerror(errno));
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	send_cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	recv_cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!mr || !send_cq || !recv_cq)
		die("ibv_reg_mr / ibv_create_cq: %s", strerror(errno));
	xrcd1 = open_domain(fd1, FILE1);
	xrcd2 = open_domain(fd2, FILE2);
	srq1 = create_xrc_srq(xrcd1, 0, &srqn1);
	srq2 = create_xrc_srq(xrcd2, SLOTS_PER_SRQ, &srqn2);
	printf("xrc: XRC domain 1 (%s) with XRC SRQ %#x, XRC domain 2 (%s) with XRC SRQ %#x, "
	       "both on one CQ and PD\n", FILE1, srqn1, FILE2, srqn2);

	/* a: SENDs through a target into domain 1's SRQ, with both posting APIs. */
	t1 = create_target(xrcd1);
	i1 = create_initiator(0);
	if (!i1)
		die("ibv_create_qp_ex(IBV_QPT_XRC_SEND): %s", strerror(errno));
	connect_xrc(i1, t1);
	deliver("a", i1, 0, srq1, srqn1, 0, t1->qp_num, sizes_a, 5);
	printf("xrc a: initiator %#x -> target %#x: 5 SENDs of 1 to 4096 B (ibv_post_send, "
	       "remote_srqn %#x) arrived in the SRQ with wc.qp_num %#x, lengths and bytes right\n",
	       i1->qp_num, t1->qp_num, srqn1, t1->qp_num);
	i2 = create_initiator(1);
	if (!i2) {
		printf("xrc a: ibv_wr_*: skipped, no XRC_SEND QP with IBV_QP_EX_WITH_SEND (%s)\n",
		       strerror(errno));
	} else {
		t2 = create_target(xrcd1);
		connect_xrc(i2, t2);
		deliver("a (ibv_wr_*)", i2, 1, srq1, srqn1, 0, t2->qp_num, sizes_ex, 3);
		ex_sends = 3;
		printf("xrc a: ibv_wr_*: 3 SENDs (ibv_wr_set_xrc_srqn) initiator %#x -> target %#x "
		       "arrived in the same SRQ with wc.qp_num %#x\n", i2->qp_num, t2->qp_num,
		       t2->qp_num);
	}
	printf("xrc a: ok\n");

	/* b: a target kept by another process after its creator's handle is gone. */
	t3 = create_target(xrcd1);
	i3 = create_initiator(0);
	if (!i3)
		die("ibv_create_qp_ex(IBV_QPT_XRC_SEND): %s", strerror(errno));
	connect_xrc(i3, t3);
	qpn3 = t3->qp_num;
	deliver("b (before)", i3, 0, srq1, srqn1, 0, qpn3, sizes_b, 1);
	rp = ask(OP_OPEN, qpn3);
	if (rp.err)
		die("b: the child could not open target QP %#x through domain 1's file: %s", qpn3,
		    strerror(rp.err));
	if (rp.state != IBV_QPS_RTS)
		die("b: the child's handle of target QP %#x reads state %d, not RTS (%d)", qpn3,
		    rp.state, IBV_QPS_RTS);
	destroy_qp(t3, "target (the creator's handle)");
	printf("xrc b: the parent destroyed its handle of target QP %#x; the child holds it\n",
	       qpn3);
	deliver("b (after the creator's handle)", i3, 0, srq1, srqn1, 0, qpn3, sizes_b + 1, 2);
	printf("xrc b: 2 more SENDs through target %#x arrived with wc.qp_num %#x\n", qpn3, qpn3);
	rp = ask(OP_CLOSE, qpn3);
	if (rp.err)
		die("b: the child could not close its handle of target QP %#x: %s", qpn3,
		    strerror(rp.err));
	{
		struct ibv_qp_open_attr oa = {
			.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
				     IBV_QP_OPEN_ATTR_TYPE,
			.qp_num = qpn3, .xrcd = xrcd1, .qp_type = IBV_QPT_XRC_RECV,
		};
		struct ibv_qp *again = ibv_open_qp(ctx, &oa);

		if (again) {
			ibv_destroy_qp(again);
			die("b: target QP %#x still opens after its last handle closed", qpn3);
		}
		printf("xrc b: with its last handle closed, target QP %#x is gone (ibv_open_qp: "
		       "%s)\n", qpn3, strerror(errno));
	}
	destroy_qp(i3, "initiator");
	printf("xrc b: ok\n");

	/* c: a SEND into the SRQ of another domain is refused, and the target's holders told. */
	t4 = create_target(xrcd1);
	i4 = create_initiator(0);
	if (!i4)
		die("ibv_create_qp_ex(IBV_QPT_XRC_SEND): %s", strerror(errno));
	connect_xrc(i4, t4);
	qpn4 = t4->qp_num;
	rp = ask(OP_OPEN, qpn4);
	if (rp.err)
		die("c: the child could not open target QP %#x: %s", qpn4, strerror(rp.err));
	send_msg(i4, 0, srqn2, next_msg++, 256);
	if (!poll_one(send_cq, &wc, WAIT_MS))
		die("c: no completion in %d s for a SEND through target %#x (domain 1) to SRQ %#x "
		    "(domain 2)", WAIT_MS / 1000, qpn4, srqn2);
	if (wc.status != IBV_WC_REM_ACCESS_ERR)
		die("c: a SEND through target %#x (domain 1) to SRQ %#x (domain 2) completed with "
		    "%s, expected %s", qpn4, srqn2, ibv_wc_status_str(wc.status),
		    ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
	printf("xrc c: a SEND through target %#x (domain 1) to SRQ %#x (domain 2) completed with "
	       "%s\n", qpn4, srqn2, ibv_wc_status_str(wc.status));
	if (poll_one(recv_cq, &wc, QUIET_MS))
		die("c: the refused SEND arrived anyway: a receive completion (status %s, qp_num "
		    "%#x, wr_id %llu)", ibv_wc_status_str(wc.status), wc.qp_num,
		    (unsigned long long)wc.wr_id);
	if (!await_qp_event(ctx, t4, IBV_EVENT_QP_ACCESS_ERR, WAIT_MS, "c"))
		die("c: no IBV_EVENT_QP_ACCESS_ERR on the creator's handle of target %#x in %d s",
		    qpn4, WAIT_MS / 1000);
	rp = ask(OP_EVENT, qpn4);
	printf("xrc c: IBV_EVENT_QP_ACCESS_ERR on target %#x for its creator; the child that "
	       "opened it got %s (ib_core gives opened QPs no async events)\n", qpn4,
	       rp.err ? "an error" : rp.event ? "it too" : "none");
	rp = ask(OP_CLOSE, qpn4);
	if (rp.err)
		die("c: the child could not close target QP %#x: %s", qpn4, strerror(rp.err));
	destroy_qp(t4, "target");
	destroy_qp(i4, "initiator");
	deliver("c (domain 1's SRQ afterwards)", i1, 0, srq1, srqn1, 0, t1->qp_num, one, 1);
	t6 = create_target(xrcd2);
	i6 = create_initiator(0);
	if (!i6)
		die("ibv_create_qp_ex(IBV_QPT_XRC_SEND): %s", strerror(errno));
	connect_xrc(i6, t6);
	deliver("c (domain 2's SRQ through its own target)", i6, 0, srq2, srqn2, SLOTS_PER_SRQ,
		t6->qp_num, one, 1);
	printf("xrc c: domain 1's SRQ still takes SENDs through target %#x, domain 2's through its "
	       "own target %#x\n", t1->qp_num, t6->qp_num);
	printf("xrc c: ok\n");

	/* d: ibv_open_qp of what is not a target QP of the domain. */
	t5 = create_target(xrcd2);
	refused("an initiator QP", xrcd1, i1->qp_num, IBV_QPT_XRC_RECV);
	refused("a target QP of XRC domain 2 through domain 1", xrcd1, t5->qp_num,
		IBV_QPT_XRC_RECV);
	refused("a target QP asked for as RC", xrcd1, t1->qp_num, IBV_QPT_RC);
	refused("the GSI QP", xrcd1, 1, IBV_QPT_XRC_RECV);
	refusals = 4;
	opens("the target QP of domain 1", xrcd1, t1->qp_num);
	opens("the target QP of domain 2", xrcd2, t5->qp_num);
	printf("xrc d: ok\n");

	/* Everything goes, the child first. */
	rp = ask(OP_EXIT, 0);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		die("the child did not close its context cleanly (status %#x, its last answer %s)",
		    status, strerror(rp.err));
	child = -1;
	destroy_qp(t1, "target");
	destroy_qp(i1, "initiator");
	if (i2) {
		destroy_qp(t2, "target");
		destroy_qp(i2, "initiator");
	}
	destroy_qp(t5, "target");
	destroy_qp(t6, "target");
	destroy_qp(i6, "initiator");
	rc = ibv_destroy_srq(srq1);
	if (!rc)
		rc = ibv_destroy_srq(srq2);
	if (rc)
		die("ibv_destroy_srq: %s", strerror(rc));
	rc = ibv_close_xrcd(xrcd1);
	if (!rc)
		rc = ibv_close_xrcd(xrcd2);
	if (rc)
		die("ibv_close_xrcd: %s", strerror(rc));
	if (ibv_destroy_cq(send_cq) || ibv_destroy_cq(recv_cq) || ibv_dereg_mr(mr) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("tearing down CQs, MR, PD or the context: %s", strerror(errno));
	close(fd1);
	close(fd2);
	unlink(FILE1);
	unlink(FILE2);
	printf("xrc: every QP, SRQ, domain and the context closed, the child's too\n");
	printf("xrc ok: %u SENDs through %d targets into 2 XRC SRQs (%d with ibv_wr_*), a target "
	       "kept by a second process after its creator's handle went, a SEND into another "
	       "domain's SRQ refused (REM_ACCESS_ERR, QP_ACCESS_ERR to both holders), %d bad "
	       "ibv_open_qp refused\n", next_msg - 1, i2 ? 4 : 3, ex_sends, refusals);
	return 0;
}
