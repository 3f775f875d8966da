// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_pmem: the IBTA 1.5 verbs for persistent memory between two hosts, any RDMA devices
 * (ferroce to rxe and back, in the verbs-interop scenario).
 *
 *   ferroce_pmem -d DEV -g GID [-p PORT]           the server (the responder)
 *   ferroce_pmem -d DEV -g GID [-p PORT] SERVER    the client (the requester)
 *
 * As ibv_rc_pingpong, the two exchange their QP numbers, PSNs and GIDs over TCP, and the
 * server its buffer's address and rkey. The server registers 64 KiB filled with 0xee for
 * remote write and FLUSH_GLOBAL, and its QP allows both. The client, through the ibv_wr_* API,
 * posts in one batch: an ATOMIC WRITE of 8 bytes at offset 8, an RDMA WRITE of a 4 KiB pattern
 * at 4096, a FLUSH of that range, a FLUSH of the whole MR, then a SEND "done". It checks each
 * completion (status, opcode, order) and prints them. The server, once "done" has arrived,
 * checks its buffer byte for byte. Each prints "pmem ok" and exits 0, or says what differed
 * and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs.h"

#define BUF_LEN (64 * 1024)
#define ATOMIC_AT 8
#define WRITE_AT 4096
#define WRITE_LEN 4096
#define VALUE 0x0123456789abcdefULL

static int fail(const char *what)
{
	fprintf(stderr, "pmem: %s: %s\n", what, strerror(errno));
	return 1;
}


static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 1);
}

static const char *opcode_name(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_ATOMIC_WRITE: return "ATOMIC_WRITE";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_FLUSH: return "FLUSH";
	case IBV_WC_SEND: return "SEND";
	default: return "other";
	}
}


static int server(struct ibv_context *ctx, int gid_index, int fd)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	uint8_t *buf = aligned_alloc(4096, BUF_LEN);
	char done[64] = { 0 };
	struct rc_peer mine = { .psn = 0x1234 }, theirs;
	struct ibv_mr *mr, *done_mr;
	struct ibv_sge sge;
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad_wr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	union ibv_gid gid;
	size_t i, bad = 0;

	if (!pd || !cq || !buf)
		return fail("pd, cq and buffer");
	init.send_cq = init.recv_cq = cq;
	qp = ibv_create_qp(pd, &init);
	memset(buf, 0xee, BUF_LEN);
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_FLUSH_GLOBAL);
	done_mr = ibv_reg_mr(pd, done, sizeof(done), IBV_ACCESS_LOCAL_WRITE);
	if (!qp || !mr || !done_mr || ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("qp, mrs and gid");
	mine.qpn = qp->qp_num;
	memcpy(mine.gid, gid.raw, 16);
	mine.addr = (uintptr_t)buf;
	mine.rkey = mr->rkey;
	if (exchange(fd, &mine, &theirs))
		return fail("exchanging addresses");
	if (connect_rc(qp, gid_index, theirs.gid, theirs.qpn, theirs.psn, mine.psn,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_FLUSH_GLOBAL))
		return fail("connecting the QP");
	sge = (struct ibv_sge){ .addr = (uintptr_t)done, .length = sizeof(done),
				.lkey = done_mr->lkey };
	if (ibv_post_recv(qp, &wr, &bad_wr))
		return fail("ibv_post_recv");
	/* Ready: the client may post. */
	if (write(fd, "R", 1) != 1)
		return fail("telling the client");
	if (wait_wc(cq, &wc) || wc.status != IBV_WC_SUCCESS)
		return fprintf(stderr, "pmem: no \"done\": %s\n", ibv_wc_status_str(wc.status)), 1;
	for (i = 0; i < BUF_LEN; i++) {
		uint8_t want = 0xee;

		if (i >= ATOMIC_AT && i < ATOMIC_AT + 8)
			want = (uint8_t)(VALUE >> (8 * (i - ATOMIC_AT)));
		else if (i >= WRITE_AT && i < WRITE_AT + WRITE_LEN)
			want = pattern(i - WRITE_AT);
		if (buf[i] != want && bad++ < 4)
			fprintf(stderr, "pmem: byte %zu is %#x, not %#x\n", i, buf[i], want);
	}
	if (bad)
		return printf("pmem: %zu bytes differ\n", bad), 1;
	printf("pmem ok: the atomic write and the write are in memory, byte for byte\n");
	return 0;
}

static int client(struct ibv_context *ctx, int gid_index, int fd)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex init = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_FLUSH | IBV_QP_EX_WITH_SEND,
	};
	const enum ibv_wc_opcode want[] = { IBV_WC_ATOMIC_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_FLUSH,
					    IBV_WC_FLUSH, IBV_WC_SEND };
	uint8_t *local = aligned_alloc(4096, WRITE_LEN + 64);
	struct rc_peer mine = { .psn = 0x5678 }, theirs;
	uint64_t value = VALUE;
	struct ibv_qp_ex *qpx;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	union ibv_gid gid;
	char ready;
	int i, rc = 0;

	if (!pd || !cq || !local)
		return fail("pd, cq and buffer");
	init.pd = pd;
	init.send_cq = init.recv_cq = cq;
	qp = ibv_create_qp_ex(ctx, &init);
	if (!qp || ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("ibv_create_qp_ex and gid");
	qpx = ibv_qp_to_qp_ex(qp);
	for (i = 0; i < WRITE_LEN; i++)
		local[i] = pattern(i);
	memcpy(local + WRITE_LEN, "done", 5);
	mr = ibv_reg_mr(pd, local, WRITE_LEN + 64, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return fail("ibv_reg_mr");
	mine.qpn = qp->qp_num;
	memcpy(mine.gid, gid.raw, 16);
	if (exchange(fd, &mine, &theirs))
		return fail("exchanging addresses");
	if (connect_rc(qp, gid_index, theirs.gid, theirs.qpn, theirs.psn, mine.psn, 0))
		return fail("connecting the QP");
	if (recv(fd, &ready, 1, MSG_WAITALL) != 1)
		return fail("waiting for the server");

	ibv_wr_start(qpx);
	qpx->wr_flags = IBV_SEND_SIGNALED;
	qpx->wr_id = 0;
	ibv_wr_atomic_write(qpx, theirs.rkey, theirs.addr + ATOMIC_AT, &value);
	qpx->wr_id = 1;
	ibv_wr_rdma_write(qpx, theirs.rkey, theirs.addr + WRITE_AT);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)local, WRITE_LEN);
	qpx->wr_id = 2;
	ibv_wr_flush(qpx, theirs.rkey, theirs.addr + WRITE_AT, WRITE_LEN, IBV_FLUSH_GLOBAL,
		     IBV_FLUSH_RANGE);
	qpx->wr_id = 3;
	ibv_wr_flush(qpx, theirs.rkey, 0, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
	qpx->wr_id = 4;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)local + WRITE_LEN, 8);
	if (ibv_wr_complete(qpx))
		return fail("ibv_wr_complete");
	for (i = 0; i < 5; i++) {
		struct ibv_wc wc;

		if (wait_wc(cq, &wc))
			return fail("ibv_poll_cq");
		printf("pmem: wr %llu %s %s\n", (unsigned long long)wc.wr_id, opcode_name(wc.opcode),
		       ibv_wc_status_str(wc.status));
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i || wc.opcode != want[i])
			rc = 1;
		if (wc.status != IBV_WC_SUCCESS)
			break;
	}
	if (!rc)
		printf("pmem ok: atomic write, write, flush of a range and of the MR, send\n");
	return rc;
}

int main(int argc, char **argv)
{
	struct pair p;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = pair_start(argc, argv, "18790", &p);
	if (rc)
		return rc;
	return p.client ? client(p.ctx, p.gid_index, p.fd) : server(p.ctx, p.gid_index, p.fd);
}
