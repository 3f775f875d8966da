// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_chain: RDMA WRITEs of 64 bytes posted in chains, inline or not, for make bench's
 * counted cost of a WR (perftest posts inline only on devices it knows by name).
 *
 *   ferroce_chain DEVICE GID_INDEX WRS CHAIN [inline]
 *
 * connects two RC QPs of DEVICE to each other through the port's own GID GID_INDEX (the NIC
 * loops the frames back), then posts WRS WRITEs from one to a buffer of the other, CHAIN WRs
 * per ibv_post_send (one linked list, the last WR signalled), with IBV_SEND_INLINE if asked,
 * waiting for each chain's completion before the next. It prints what it did and the average
 * time from a chain's post to its completion (CLOCK_MONOTONIC), or what failed, and exits 1 on
 * a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "verbs.h"

#define LEN 64
#define MAX_CHAIN 64
#define BUF (1 << 20)

static int fail(const char *what, int err)
{
	fprintf(stderr, "chain: %s: %s\n", what, strerror(err));
	return 1;
}


int main(int argc, char **argv)
{
	struct ibv_qp_init_attr init = { .qp_type = IBV_QPT_RC };
	struct ibv_send_wr wrs[MAX_CHAIN], *bad;
	struct ibv_sge sges[MAX_CHAIN];
	struct ibv_context *ctx;
	struct ibv_qp *qa, *qb;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	long total, chain, posted, done = 0;
	struct timespec start, end;
	int gid_index, inl, i, rc;
	long n;
	char *buf;

	if (argc < 5 || argc > 6 || (argc == 6 && strcmp(argv[5], "inline"))) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX WRS CHAIN [inline]\n", argv[0]);
		return 2;
	}
	gid_index = atoi(argv[2]);
	total = strtol(argv[3], NULL, 0);
	chain = strtol(argv[4], NULL, 0);
	inl = argc == 6;
	if (total < 1 || chain < 1 || chain > MAX_CHAIN) {
		fprintf(stderr, "chain: WRS >= 1, 1 <= CHAIN <= %d\n", MAX_CHAIN);
		return 2;
	}
	ctx = open_device(argv[1]);
	if (!ctx)
		return fail(argv[1], errno);
	rc = ibv_query_gid(ctx, 1, gid_index, &gid);
	if (rc)
		return fail("ibv_query_gid", rc);
	pd = ibv_alloc_pd(ctx);
	buf = calloc(1, BUF);
	if (!pd || !buf)
		return fail("ibv_alloc_pd", errno);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!mr || !cq)
		return fail("ibv_reg_mr / ibv_create_cq", errno);
	init.send_cq = init.recv_cq = cq;
	init.cap.max_send_wr = 2 * MAX_CHAIN;
	init.cap.max_recv_wr = 1;
	init.cap.max_send_sge = init.cap.max_recv_sge = 1;
	init.cap.max_inline_data = inl ? LEN : 0;
	qa = ibv_create_qp(pd, &init);
	qb = ibv_create_qp(pd, &init);
	if (!qa || !qb)
		return fail("ibv_create_qp", errno);
	rc = connect_rc(qa, gid_index, gid.raw, qb->qp_num, 1, 1, IBV_ACCESS_REMOTE_WRITE);
	if (!rc)
		rc = connect_rc(qb, gid_index, gid.raw, qa->qp_num, 1, 1, IBV_ACCESS_REMOTE_WRITE);
	if (rc)
		return fail("ibv_modify_qp", rc);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (posted = 0; posted < total; posted += n) {
		struct ibv_wc wc;

		n = total - posted < chain ? total - posted : chain;
		for (i = 0; i < n; i++) {
			sges[i] = (struct ibv_sge){
				.addr = (uintptr_t)buf + (size_t)i * LEN, .length = LEN, .lkey = mr->lkey,
			};
			wrs[i] = (struct ibv_send_wr){
				.wr_id = posted + i, .sg_list = &sges[i], .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .next = i + 1 < n ? &wrs[i + 1] : NULL,
				.send_flags = (inl ? IBV_SEND_INLINE : 0) |
					      (i + 1 == n ? IBV_SEND_SIGNALED : 0),
				.wr.rdma = { .remote_addr = (uintptr_t)buf + BUF / 2 + (size_t)i * LEN,
					     .rkey = mr->rkey },
			};
		}
		rc = ibv_post_send(qa, wrs, &bad);
		if (rc)
			return fail("ibv_post_send", rc);
		do
			rc = ibv_poll_cq(cq, 1, &wc);
		while (rc == 0);
		if (rc < 0 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "chain: completion %s after %ld WRs\n",
				rc < 0 ? "poll failed" : ibv_wc_status_str(wc.status), posted);
			return 1;
		}
		done++;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	printf("chain: %ld WRITEs of %d B in chains of %ld (%s): %ld completions, %.1f us per chain\n",
	       total, LEN, chain, inl ? "inline" : "not inline", done,
	       ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / 1e3 / done);
	return 0;
}
