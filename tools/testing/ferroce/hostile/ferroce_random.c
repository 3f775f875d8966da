// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_random: random and hostile verbs calls, from several processes that are killed at
 * random.
 *
 *   ferroce_random [-d DEV] [-g GID_INDEX] [-n CALLS] [-p PROCS] [-s SEED] [-t SECONDS]
 *
 * PROCS worker processes each open DEV and make calls drawn at random, from a seed, until the
 * workers together have made CALLS: allocate and free PDs, register MRs (of our own memory or
 * of addresses we do not own, with any access flags), create and destroy CQs, SRQs, QPs (RC, UC,
 * UD, with any capacities) and AHs, move QPs through random states with random attributes
 * (connected to our own QPs, to numbers that do not exist, to GIDs that are not ours), post
 * chains of send and receive WRs of every opcode with SGEs inside and outside our MRs, poll and
 * arm CQs, drain async events, map the context's uverbs file at random offsets and write
 * garbage into what maps (the doorbell page), and now and then exit without freeing anything.
 * Objects are handed to calls regardless of whether they fit (a UD QP gets RDMA WRITEs, a PD in
 * use is freed): the kernel, the provider and the NIC must refuse what is wrong.
 *
 * Meanwhile the parent kills a random worker (SIGKILL) every few hundred milliseconds and
 * starts another with a new seed, so processes die in the middle of any call. A worker that
 * dies any other way (a signal from the provider: SIGSEGV, SIGBUS, SIGABRT) is a failure: its
 * seed is printed, and "-s SEED -p 1" with the same CALLS replays it without kills (-k 0).
 * A worker that does not die within 10 s of SIGKILL is stuck in the kernel: a failure.
 *
 * The output ends with one line per operation (calls, errors by errno) and
 *   random: CALLS calls, PROCS processes, K killed, X exited early, F failed
 * The exit status is 0 when F is 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define MAX_PROCS 16
#define POOL 6		/* objects of each kind a worker keeps */
#define ARENA (1 << 20)	/* the worker's memory that MRs and SGEs point into */
#define MAX_CHAIN 8
#define MAX_SGE 20
#define MAX_ERRNO 160

enum op {
	OP_ALLOC_PD, OP_DEALLOC_PD, OP_REG_MR, OP_DEREG_MR, OP_CREATE_CQ, OP_DESTROY_CQ,
	OP_CREATE_SRQ, OP_MODIFY_SRQ, OP_DESTROY_SRQ, OP_CREATE_QP, OP_MODIFY_QP, OP_QUERY_QP,
	OP_DESTROY_QP, OP_CREATE_AH, OP_DESTROY_AH, OP_POST_SEND, OP_POST_RECV, OP_POST_SRQ_RECV,
	OP_POLL_CQ, OP_ARM_CQ, OP_ASYNC_EVENTS, OP_MMAP, OP_QUERY, OP_ALLOC_MW, OP_EXIT,
	NUM_OPS
};

static const char *const op_names[NUM_OPS] = {
	"alloc_pd", "dealloc_pd", "reg_mr", "dereg_mr", "create_cq", "destroy_cq",
	"create_srq", "modify_srq", "destroy_srq", "create_qp", "modify_qp", "query_qp",
	"destroy_qp", "create_ah", "destroy_ah", "post_send", "post_recv", "post_srq_recv",
	"poll_cq", "arm_cq", "async_events", "mmap", "query", "alloc_mw", "exit",
};

/* How often each operation is drawn (out of the sum): traffic and state changes dominate. */
static const int op_weight[NUM_OPS] = {
	3, 2, 6, 2, 4, 1, 2, 2, 1, 6, 16, 2, 2, 3, 2, 20, 10, 4, 14, 3, 2, 3, 2, 1, 0,
};

/* Shared with the parent: what every worker did, counted as it goes. */
struct tally {
	long calls;
	long per_op[NUM_OPS];
	long errors[NUM_OPS][MAX_ERRNO];
};

static struct tally *tally;	/* MAP_SHARED: the parent reads the sums */
static long calls_wanted;

struct worker {
	struct ibv_context *ctx;
	struct ibv_comp_channel *channel;
	struct ibv_pd *pd[POOL];
	struct ibv_mr *mr[POOL];
	struct ibv_cq *cq[POOL];
	struct ibv_srq *srq[POOL];
	struct ibv_qp *qp[POOL];
	struct ibv_ah *ah[POOL];
	struct ibv_mw *mw[POOL];
	union ibv_gid gid;
	uint8_t gid_index;
	uint8_t *arena;
	uint64_t rng;
};

static uint64_t next(struct worker *w)
{
	/* xorshift64*: fast, and the same seed replays the same run. */
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 0x2545f4914f6cdd1dull;
}

static uint32_t below(struct worker *w, uint32_t n)
{
	return n ? next(w) % n : 0;
}

static bool chance(struct worker *w, int percent)
{
	return below(w, 100) < (uint32_t)percent;
}

/* A value that is usually sensible and sometimes anything: edges and garbage find bugs. */
static uint32_t value(struct worker *w, uint32_t sensible)
{
	switch (below(w, 10)) {
	case 0:
		return (uint32_t)next(w);
	case 1:
		return 0;
	case 2:
		return UINT32_MAX >> below(w, 32);
	default:
		return below(w, sensible + 1);
	}
}

/* Any slot of a pool, empty or not (NULL objects are skipped by the callers). */
#define PICK(w, pool) ((w)->pool[below((w), POOL)])

static int empty_slot(void **pool)
{
	for (int i = 0; i < POOL; i++)
		if (!pool[i])
			return i;
	return -1;
}

static void count(enum op op, int err)
{
	if (err < 0)	/* a call that returns -1 and sets errno */
		err = errno ? errno : MAX_ERRNO - 1;
	__atomic_add_fetch(&tally->calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&tally->per_op[op], 1, __ATOMIC_RELAXED);
	if (err) {
		if (err < 0 || err >= MAX_ERRNO)
			err = MAX_ERRNO - 1;
		__atomic_add_fetch(&tally->errors[op][err], 1, __ATOMIC_RELAXED);
	}
}

/* errno of a call returning a pointer, or the return value of one returning an int. */
static int perr(const void *p)
{
	return p ? 0 : (errno ? errno : EINVAL);
}

static void *arena_ptr(struct worker *w, uint32_t len)
{
	uint32_t max = len < ARENA ? ARENA - len : 0;

	return w->arena + below(w, max + 1);
}

static int access_flags(struct worker *w)
{
	static const int flags[] = {
		IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ,
		IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_MW_BIND, IBV_ACCESS_ZERO_BASED,
		IBV_ACCESS_RELAXED_ORDERING, 1 << 29,
	};
	int f = 0;

	for (unsigned int i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (chance(w, i < 4 ? 60 : 8))
			f |= flags[i];
	return f;
}

static void op_alloc_pd(struct worker *w)
{
	int i = empty_slot((void **)w->pd);

	if (i < 0)
		return;
	errno = 0;
	w->pd[i] = ibv_alloc_pd(w->ctx);
	count(OP_ALLOC_PD, perr(w->pd[i]));
}

static void op_dealloc_pd(struct worker *w)
{
	int i = below(w, POOL);

	if (!w->pd[i])
		return;
	/* Often still in use by MRs and QPs: the kernel must refuse (EBUSY) and keep it. */
	int err = ibv_dealloc_pd(w->pd[i]);

	count(OP_DEALLOC_PD, err);
	if (!err)
		w->pd[i] = NULL;
}

static void op_reg_mr(struct worker *w)
{
	int i = empty_slot((void **)w->mr);
	struct ibv_pd *pd = PICK(w, pd);
	uint32_t len = value(w, 65536);
	void *addr;

	if (i < 0 || !pd)
		return;
	switch (below(w, 8)) {
	case 0:		/* an address this process never mapped */
		addr = (void *)(uintptr_t)(0x7e0000000000ull + (next(w) & 0xfffffff000ull));
		break;
	case 1:		/* past the end of our memory */
		addr = w->arena + ARENA - 4096;
		break;
	default:
		if (len > ARENA)
			len = below(w, ARENA);
		addr = arena_ptr(w, len);
	}
	errno = 0;
	w->mr[i] = ibv_reg_mr(pd, addr, len, access_flags(w));
	count(OP_REG_MR, perr(w->mr[i]));
}

static void op_dereg_mr(struct worker *w)
{
	int i = below(w, POOL);

	if (!w->mr[i])
		return;
	int err = ibv_dereg_mr(w->mr[i]);

	count(OP_DEREG_MR, err);
	if (!err)
		w->mr[i] = NULL;
}

static void op_create_cq(struct worker *w)
{
	int i = empty_slot((void **)w->cq);

	if (i < 0)
		return;
	errno = 0;
	w->cq[i] = ibv_create_cq(w->ctx, (int)value(w, 512), NULL,
				 chance(w, 30) ? w->channel : NULL, (int)below(w, 4));
	count(OP_CREATE_CQ, perr(w->cq[i]));
}

static void op_destroy_cq(struct worker *w)
{
	int i = below(w, POOL);

	if (!w->cq[i])
		return;
	int err = ibv_destroy_cq(w->cq[i]);	/* EBUSY while a QP uses it */

	count(OP_DESTROY_CQ, err);
	if (!err)
		w->cq[i] = NULL;
}

static void op_create_srq(struct worker *w)
{
	int i = empty_slot((void **)w->srq);
	struct ibv_pd *pd = PICK(w, pd);
	struct ibv_srq_init_attr attr = {
		.attr = { .max_wr = value(w, 256), .max_sge = value(w, 8), .srq_limit = value(w, 16) },
	};

	if (i < 0 || !pd)
		return;
	errno = 0;
	w->srq[i] = ibv_create_srq(pd, &attr);
	count(OP_CREATE_SRQ, perr(w->srq[i]));
}

static void op_modify_srq(struct worker *w)
{
	struct ibv_srq *srq = PICK(w, srq);
	struct ibv_srq_attr attr = { .max_wr = value(w, 256), .srq_limit = value(w, 64) };

	if (!srq)
		return;
	count(OP_MODIFY_SRQ, ibv_modify_srq(srq, &attr, below(w, 4)));
}

static void op_destroy_srq(struct worker *w)
{
	int i = below(w, POOL);

	if (!w->srq[i])
		return;
	int err = ibv_destroy_srq(w->srq[i]);

	count(OP_DESTROY_SRQ, err);
	if (!err)
		w->srq[i] = NULL;
}

static void op_create_qp(struct worker *w)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
						   IBV_QPT_RC, IBV_QPT_RAW_PACKET };
	int i = empty_slot((void **)w->qp);
	struct ibv_pd *pd = PICK(w, pd);
	struct ibv_cq *scq = PICK(w, cq), *rcq = chance(w, 50) ? scq : PICK(w, cq);
	struct ibv_qp_init_attr attr = {
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = chance(w, 20) ? PICK(w, srq) : NULL,
		.qp_type = types[below(w, 5)],
		.sq_sig_all = (int)below(w, 2),
		.cap = {
			.max_send_wr = value(w, 128),
			.max_recv_wr = value(w, 128),
			.max_send_sge = 2 + value(w, 6),
			.max_recv_sge = 2 + value(w, 6),
			.max_inline_data = value(w, 256),
		},
	};

	if (i < 0 || !pd || !scq || !rcq)
		return;
	errno = 0;
	w->qp[i] = ibv_create_qp(pd, &attr);
	count(OP_CREATE_QP, perr(w->qp[i]));
}

/* A destination: one of our own QPs (so that traffic flows), or a number nobody has. */
static uint32_t dest_qpn(struct worker *w)
{
	struct ibv_qp *qp = PICK(w, qp);

	if (qp && chance(w, 80))
		return qp->qp_num;
	return value(w, 64) & 0xffffff;
}

static void ah_attr(struct worker *w, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = chance(w, 95);
	ah->port_num = chance(w, 95) ? 1 : (uint8_t)below(w, 4);
	ah->sl = (uint8_t)below(w, 16);
	ah->dlid = (uint16_t)value(w, 4);
	ah->grh.dgid = w->gid;
	if (chance(w, 10))
		ah->grh.dgid.raw[below(w, 16)] ^= (uint8_t)next(w);
	ah->grh.sgid_index = chance(w, 85) ? w->gid_index : (uint8_t)value(w, 8);
	ah->grh.hop_limit = (uint8_t)value(w, 64);
	ah->grh.traffic_class = (uint8_t)next(w);
	ah->grh.flow_label = value(w, 0xfffff);
}

static void op_modify_qp(struct worker *w)
{
	static const enum ibv_qp_state states[] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE,
		IBV_QPS_ERR, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
	};
	/* The state that follows each (RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN). */
	static const enum ibv_qp_state forward[] = {
		IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPS_RTS,
		IBV_QPS_RESET, IBV_QPS_RESET,
	};
	struct ibv_qp *qp = PICK(w, qp);
	struct ibv_qp_attr attr = { 0 };
	int mask = IBV_QP_STATE;

	if (!qp)
		return;
	/* Mostly the next state of the usual way to RTS (so that traffic flows), else any. */
	if (chance(w, 75) && qp->state <= IBV_QPS_UNKNOWN)
		attr.qp_state = forward[qp->state];
	else
		attr.qp_state = states[below(w, 10)];
	/* The attributes each transition needs, then some at random. */
	switch (attr.qp_state) {
	case IBV_QPS_INIT:
		attr.pkey_index = (uint16_t)value(w, 0);
		attr.port_num = chance(w, 95) ? 1 : (uint8_t)below(w, 3);
		attr.qkey = value(w, 0x11111111);
		attr.qp_access_flags = chance(w, 80) ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						       IBV_ACCESS_REMOTE_ATOMIC : access_flags(w);
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			(qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		break;
	case IBV_QPS_RTR:
		attr.path_mtu = (enum ibv_mtu)(chance(w, 90) ? 1 + below(w, 5) : below(w, 8));
		attr.dest_qp_num = dest_qpn(w);
		attr.rq_psn = chance(w, 90) ? below(w, 0x1000000) : value(w, 0xffffff);
		attr.max_dest_rd_atomic = (uint8_t)(chance(w, 90) ? below(w, 9) : value(w, 255));
		attr.min_rnr_timer = (uint8_t)below(w, 32);
		ah_attr(w, &attr.ah_attr);
		if (qp->qp_type != IBV_QPT_UD)
			mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				(qp->qp_type == IBV_QPT_RC ?
				 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
		break;
	case IBV_QPS_RTS:
		attr.sq_psn = chance(w, 90) ? below(w, 0x1000000) : value(w, 0xffffff);
		/* Short timeouts and few retries: a QP talking to nobody gives up soon. */
		attr.timeout = (uint8_t)(chance(w, 90) ? 8 + below(w, 4) : below(w, 32));
		attr.retry_cnt = (uint8_t)below(w, 3);
		attr.rnr_retry = (uint8_t)below(w, 3);
		attr.max_rd_atomic = (uint8_t)(chance(w, 90) ? below(w, 9) : value(w, 255));
		mask |= IBV_QP_SQ_PSN |
			(qp->qp_type == IBV_QPT_RC ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0);
		break;
	default:
		break;
	}
	if (chance(w, 10))
		mask ^= 1 << below(w, 21);	/* one attribute too many or missing */
	count(OP_MODIFY_QP, ibv_modify_qp(qp, &attr, mask));
}

static void op_query_qp(struct worker *w)
{
	struct ibv_qp *qp = PICK(w, qp);
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	if (!qp)
		return;
	count(OP_QUERY_QP, ibv_query_qp(qp, &attr, (int)next(w) & 0x1fffff, &init));
}

static void op_destroy_qp(struct worker *w)
{
	int i = below(w, POOL);

	if (!w->qp[i])
		return;
	int err = ibv_destroy_qp(w->qp[i]);

	count(OP_DESTROY_QP, err);
	if (!err)
		w->qp[i] = NULL;
}

static void op_create_ah(struct worker *w)
{
	int i = empty_slot((void **)w->ah);
	struct ibv_pd *pd = PICK(w, pd);
	struct ibv_ah_attr attr;

	if (i < 0 || !pd)
		return;
	ah_attr(w, &attr);
	errno = 0;
	w->ah[i] = ibv_create_ah(pd, &attr);
	count(OP_CREATE_AH, perr(w->ah[i]));
}

static void op_destroy_ah(struct worker *w)
{
	int i = below(w, POOL);

	if (!w->ah[i])
		return;
	int err = ibv_destroy_ah(w->ah[i]);

	count(OP_DESTROY_AH, err);
	if (!err)
		w->ah[i] = NULL;
}

/* SGEs inside one of our MRs, or anywhere with any key. */
static void sges(struct worker *w, struct ibv_sge *sge, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_mr *mr = PICK(w, mr);

		sge[i].length = value(w, 4096);
		if (mr && chance(w, 85)) {
			uint32_t len = sge[i].length < mr->length ? sge[i].length : (uint32_t)mr->length;

			sge[i].length = len;
			sge[i].addr = (uintptr_t)mr->addr + below(w, (uint32_t)(mr->length - len) + 1);
			sge[i].lkey = mr->lkey;
		} else {
			/* Our memory still (inline data is read at post time), any key. */
			sge[i].addr = (uintptr_t)arena_ptr(w, sge[i].length);
			sge[i].lkey = (uint32_t)next(w);
		}
	}
}

/* A QP for traffic: one in RTS most of the time, if there is one, else any. */
static struct ibv_qp *traffic_qp(struct worker *w, enum ibv_qp_state state)
{
	int first = (int)below(w, POOL);

	if (chance(w, 80))
		for (int i = 0; i < POOL; i++) {
			struct ibv_qp *qp = w->qp[(first + i) % POOL];

			if (qp && qp->state == state)
				return qp;
		}
	return PICK(w, qp);
}

static void op_post_send(struct worker *w)
{
	static const enum ibv_wr_opcode opcodes[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_SEND_WITH_INV, IBV_WR_LOCAL_INV, (enum ibv_wr_opcode)42,
	};
	struct ibv_qp *qp = traffic_qp(w, IBV_QPS_RTS);
	struct ibv_send_wr wr[MAX_CHAIN], *bad;
	struct ibv_sge sge[MAX_CHAIN][MAX_SGE];
	int n = 1 + below(w, MAX_CHAIN);

	if (!qp)
		return;
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		struct ibv_mr *mr = PICK(w, mr);
		struct ibv_ah *ah = PICK(w, ah);
		bool sane = chance(w, 70);
		int nsge = sane || chance(w, 90) ? 1 + (int)below(w, 2) : (int)below(w, MAX_SGE + 1);

		sges(w, sge[i], nsge);
		if (sane)	/* small, so that it fits what the QP was created with */
			for (int k = 0; k < nsge; k++)
				sge[i][k].length &= 0x3ff;
		wr[i].wr_id = next(w);
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = sge[i];
		wr[i].num_sge = nsge;
		wr[i].opcode = opcodes[sane ? below(w, 7) : below(w, 10)];
		wr[i].send_flags = sane ? IBV_SEND_SIGNALED :
			(int)(next(w) & (IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE |
					 (chance(w, 20) ? IBV_SEND_INLINE : 0)));
		wr[i].imm_data = (uint32_t)next(w);
		/* Remote addresses in our MRs (loopback traffic lands), or anywhere. */
		if (mr && chance(w, 80)) {
			wr[i].wr.rdma.remote_addr = (uintptr_t)mr->addr + below(w, (uint32_t)mr->length + 1);
			wr[i].wr.rdma.rkey = mr->rkey;
		} else {
			wr[i].wr.rdma.remote_addr = next(w);
			wr[i].wr.rdma.rkey = (uint32_t)next(w);
		}
		if (wr[i].opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    wr[i].opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr[i].wr.atomic.remote_addr = wr[i].wr.rdma.remote_addr & ~7ull;
			wr[i].wr.atomic.rkey = wr[i].wr.rdma.rkey;
			wr[i].wr.atomic.compare_add = next(w);
			wr[i].wr.atomic.swap = next(w);
		}
		if (qp->qp_type == IBV_QPT_UD) {
			wr[i].wr.ud.ah = ah;	/* NULL now and then: the provider must refuse it */
			wr[i].wr.ud.remote_qpn = dest_qpn(w);
			wr[i].wr.ud.remote_qkey = value(w, 0x11111111);
			if (!ah)
				wr[i].opcode = IBV_WR_RDMA_WRITE;	/* refused before the AH is read */
		}
	}
	count(OP_POST_SEND, ibv_post_send(qp, wr, &bad));
}

static void recv_wrs(struct worker *w, struct ibv_recv_wr *wr, struct ibv_sge (*sge)[MAX_SGE],
		     int n)
{
	memset(wr, 0, sizeof(*wr) * n);
	for (int i = 0; i < n; i++) {
		int nsge = chance(w, 90) ? (int)below(w, 4) : (int)below(w, MAX_SGE + 1);

		sges(w, sge[i], nsge);
		wr[i].wr_id = next(w);
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = sge[i];
		wr[i].num_sge = nsge;
	}
}

static void op_post_recv(struct worker *w)
{
	struct ibv_qp *qp = traffic_qp(w, chance(w, 50) ? IBV_QPS_RTR : IBV_QPS_RTS);
	struct ibv_recv_wr wr[MAX_CHAIN], *bad;
	struct ibv_sge sge[MAX_CHAIN][MAX_SGE];
	int n = 1 + below(w, MAX_CHAIN);

	if (!qp)
		return;
	recv_wrs(w, wr, sge, n);
	count(OP_POST_RECV, ibv_post_recv(qp, wr, &bad));
}

static void op_post_srq_recv(struct worker *w)
{
	struct ibv_srq *srq = PICK(w, srq);
	struct ibv_recv_wr wr[MAX_CHAIN], *bad;
	struct ibv_sge sge[MAX_CHAIN][MAX_SGE];
	int n = 1 + below(w, MAX_CHAIN);

	if (!srq)
		return;
	recv_wrs(w, wr, sge, n);
	count(OP_POST_SRQ_RECV, ibv_post_srq_recv(srq, wr, &bad));
}

static void op_poll_cq(struct worker *w)
{
	struct ibv_cq *cq = PICK(w, cq);
	struct ibv_wc wc[16];
	int n;

	if (!cq)
		return;
	n = ibv_poll_cq(cq, 1 + (int)below(w, 16), wc);
	count(OP_POLL_CQ, n < 0 ? -n : 0);
}

static void op_arm_cq(struct worker *w)
{
	struct ibv_cq *cq = PICK(w, cq);

	if (!cq)
		return;
	count(OP_ARM_CQ, ibv_req_notify_cq(cq, (int)below(w, 2)));
}

static void op_async_events(struct worker *w)
{
	struct ibv_async_event event;
	struct ibv_cq *cq;
	void *cq_ctx;

	/* Both files are non-blocking: take what is there, acknowledge it. */
	while (!ibv_get_async_event(w->ctx, &event))
		ibv_ack_async_event(&event);
	while (!ibv_get_cq_event(w->channel, &cq, &cq_ctx))
		ibv_ack_cq_events(cq, 1);
	count(OP_ASYNC_EVENTS, 0);
}

/*
 * The context's uverbs file at a random offset: the doorbell page (or nothing) maps, and we
 * write garbage into it, doorbells for any queue number and producer index.
 */
static void op_mmap(struct worker *w)
{
	off_t offset = chance(w, 70) ? (off_t)below(w, 16) * 4096 : (off_t)(next(w) & 0xfffff000);
	size_t len = chance(w, 80) ? 4096 : 4096 * (1 + below(w, 4));
	int prot = chance(w, 80) ? PROT_WRITE : PROT_READ | PROT_WRITE | PROT_EXEC;
	void *p = mmap(NULL, len, prot, chance(w, 90) ? MAP_SHARED : MAP_PRIVATE,
		       w->ctx->cmd_fd, offset);

	if (p == MAP_FAILED) {
		count(OP_MMAP, errno);
		return;
	}
	for (int i = (int)below(w, 8); i > 0; i--) {
		volatile uint32_t *reg = (volatile uint32_t *)p + below(w, (uint32_t)(len / 4));

		*reg = (uint32_t)next(w) & (chance(w, 50) ? 0x00ff7fff : 0xffffffff);
	}
	munmap(p, len);
	count(OP_MMAP, 0);
}

static void op_query(struct worker *w)
{
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	union ibv_gid gid;

	switch (below(w, 3)) {
	case 0:
		count(OP_QUERY, ibv_query_device(w->ctx, &dev));
		break;
	case 1:
		count(OP_QUERY, ibv_query_port(w->ctx, (uint8_t)below(w, 3), &port));
		break;
	default:
		count(OP_QUERY, ibv_query_gid(w->ctx, 1, (int)value(w, 16), &gid));
	}
}

static void op_alloc_mw(struct worker *w)
{
	int i = below(w, POOL);
	struct ibv_pd *pd = PICK(w, pd);

	if (w->mw[i]) {
		int err = ibv_dealloc_mw(w->mw[i]);

		count(OP_ALLOC_MW, err);
		if (!err)
			w->mw[i] = NULL;
		return;
	}
	if (!pd)
		return;
	errno = 0;
	w->mw[i] = ibv_alloc_mw(pd, chance(w, 50) ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
	count(OP_ALLOC_MW, perr(w->mw[i]));
}

static void (*const ops[NUM_OPS])(struct worker *) = {
	op_alloc_pd, op_dealloc_pd, op_reg_mr, op_dereg_mr, op_create_cq, op_destroy_cq,
	op_create_srq, op_modify_srq, op_destroy_srq, op_create_qp, op_modify_qp, op_query_qp,
	op_destroy_qp, op_create_ah, op_destroy_ah, op_post_send, op_post_recv, op_post_srq_recv,
	op_poll_cq, op_arm_cq, op_async_events, op_mmap, op_query, op_alloc_mw, NULL,
};

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

static void set_nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A worker: random calls until the workers together made calls_wanted; never returns. */
static void work(const char *device, int gid_index, uint64_t seed, bool may_exit)
{
	struct worker w = { .rng = seed * 0x9e3779b97f4a7c15ull | 1, .gid_index = gid_index };
	int total = 0;

	w.ctx = open_device(device);
	if (!w.ctx) {
		fprintf(stderr, "worker %llu: cannot open %s: %s\n", (unsigned long long)seed,
			device, strerror(errno));
		_exit(3);
	}
	w.channel = ibv_create_comp_channel(w.ctx);
	w.arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!w.channel || w.arena == MAP_FAILED || ibv_query_gid(w.ctx, 1, gid_index, &w.gid)) {
		fprintf(stderr, "worker %llu: setup failed: %s\n", (unsigned long long)seed,
			strerror(errno));
		_exit(3);
	}
	set_nonblocking(w.ctx->async_fd);
	set_nonblocking(w.channel->fd);
	for (int i = 0; i < NUM_OPS; i++)
		total += op_weight[i];
	while (__atomic_load_n(&tally->calls, __ATOMIC_RELAXED) < calls_wanted) {
		int pick = (int)below(&w, (uint32_t)total), op = 0;

		while (pick >= op_weight[op])
			pick -= op_weight[op++];
		ops[op](&w);
		/* Now and then a process just ends, leaving everything to the kernel. */
		if (may_exit && below(&w, 2000) == 0) {
			count(OP_EXIT, 0);
			_exit(0);
		}
	}
	_exit(0);
}

struct child {
	pid_t pid;
	uint64_t seed;
	bool killed;
};

static uint64_t seed_counter;

static void spawn(struct child *c, const char *device, int gid_index, uint64_t base, bool may_exit)
{
	c->seed = base + seed_counter++;
	c->killed = false;
	fflush(stdout);
	c->pid = fork();
	if (c->pid == 0)
		work(device, gid_index, c->seed, may_exit);
	if (c->pid < 0) {
		perror("fork");
		exit(2);
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits for c to end (at most 10 s after a SIGKILL); returns 1 for a failure. */
static int reap(struct child *c, int *exited_early, int flags)
{
	int status;
	pid_t r = waitpid(c->pid, &status, flags);

	if (r == 0)
		return 0;
	c->pid = 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && c->killed)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		if (__atomic_load_n(&tally->calls, __ATOMIC_RELAXED) < calls_wanted)
			(*exited_early)++;
		return 0;
	}
	if (WIFSIGNALED(status))
		printf("FAIL worker seed %llu died of signal %d (%s)\n",
		       (unsigned long long)c->seed, WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		printf("FAIL worker seed %llu exited %d\n", (unsigned long long)c->seed,
		       WEXITSTATUS(status));
	return 1;
}

static bool killed_in_time(struct child *c)
{
	double deadline = now() + 10;

	while (now() < deadline) {
		int status;

		if (waitpid(c->pid, &status, WNOHANG) == c->pid)
			return true;
		usleep(10000);
	}
	return false;
}

int main(int argc, char **argv)
{
	const char *device = "ferroce0";
	int gid_index = 3, procs = 4, seconds = 600, kill_ms = 100, opt;
	uint64_t seed = (uint64_t)time(NULL);
	struct child child[MAX_PROCS] = { 0 };
	int killed = 0, exited_early = 0, failed = 0, live;
	double deadline;

	calls_wanted = 10000;
	while ((opt = getopt(argc, argv, "d:g:n:p:s:t:k:")) != -1) {
		switch (opt) {
		case 'd': device = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'n': calls_wanted = atol(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 't': seconds = atoi(optarg); break;
		case 'k': kill_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d DEV] [-g GID_INDEX] [-n CALLS] [-p PROCS] "
				"[-s SEED] [-t SECONDS] [-k KILL_MS, 0: none]\n", argv[0]);
			return 2;
		}
	}
	if (procs < 1 || procs > MAX_PROCS || calls_wanted < 1) {
		fprintf(stderr, "1..%d processes and at least one call\n", MAX_PROCS);
		return 2;
	}
	tally = mmap(NULL, sizeof(*tally), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tally == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	printf("random: seed %llu, %ld calls, %d processes, a kill every %d ms, device %s\n",
	       (unsigned long long)seed, calls_wanted, procs, kill_ms, device);
	srand((unsigned int)seed);
	for (int i = 0; i < procs; i++)
		spawn(&child[i], device, gid_index, seed, kill_ms > 0);
	deadline = now() + seconds;
	for (;;) {
		bool done = __atomic_load_n(&tally->calls, __ATOMIC_RELAXED) >= calls_wanted;

		live = 0;
		for (int i = 0; i < procs; i++) {
			if (child[i].pid)
				failed += reap(&child[i], &exited_early, WNOHANG);
			if (!child[i].pid && !done && !failed)
				spawn(&child[i], device, gid_index, seed, kill_ms > 0);
			live += child[i].pid != 0;
		}
		if (!live || failed)
			break;
		if (now() > deadline) {
			printf("FAIL %ld of %ld calls after %d s\n", tally->calls, calls_wanted,
			       seconds);
			failed++;
			break;
		}
		if (kill_ms > 0 && !done) {
			usleep((useconds_t)(kill_ms / 2 + rand() % kill_ms) * 1000);
			struct child *c = &child[rand() % procs];

			if (c->pid) {
				c->killed = true;
				kill(c->pid, SIGKILL);
				killed++;
				if (!killed_in_time(c)) {
					printf("FAIL worker seed %llu did not die within 10 s of SIGKILL\n",
					       (unsigned long long)c->seed);
					failed++;
				}
				c->pid = 0;
			}
		} else {
			usleep(20000);
		}
	}
	/* Whatever is left (a failure stops the run): killed, and it must die. */
	for (int i = 0; i < procs; i++) {
		if (!child[i].pid)
			continue;
		child[i].killed = true;
		kill(child[i].pid, SIGKILL);
		if (!killed_in_time(&child[i])) {
			printf("FAIL worker seed %llu did not die within 10 s of SIGKILL\n",
			       (unsigned long long)child[i].seed);
			failed++;
		}
	}
	for (int op = 0; op < NUM_OPS; op++) {
		printf("op %-14s %7ld", op_names[op], tally->per_op[op]);
		for (int e = 1; e < MAX_ERRNO; e++)
			if (tally->errors[op][e])
				printf(" %s=%ld", e == MAX_ERRNO - 1 ? "other" : strerrorname_np(e),
				       tally->errors[op][e]);
		printf("\n");
	}
	printf("random: %ld calls, %llu processes, %d killed, %d exited early, %d failed\n",
	       tally->calls, (unsigned long long)seed_counter, killed, exited_early, failed);
	return failed != 0;
}
