// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_rnr: one SEND that finds no receive posted, by construction rather than by timing.
 *
 *   ferroce_rnr -d DEV -g GID [-p PORT]           the receiver (the server)
 *   ferroce_rnr -d DEV -g GID [-p PORT] SERVER    the sender
 *
 * The two connect RC QPs (RNR retries without limit, 0.64 ms RNR timer). The receiver posts no
 * receive and tells the sender to go; the sender posts one signalled SEND of 64 bytes. The
 * receiver's NIC answers it with an RNR NAK, which the receiver sees in its port's naks_sent
 * counter (sysfs hw_counters); only then does it post a receive. The sender's NIC sends the SEND
 * again after the RNR timer, and both sides see it complete. Each prints what happened and exits
 * 0, or says what failed and exits 1.
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

#define LEN 64

static int fail(const char *what)
{
	fprintf(stderr, "rnr: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Port 1's RNR NAKs and other NAKs sent so far by DEV's NIC (its naks_sent counter), or -1. */
static long long naks_sent(const char *dev)
{
	char path[256];
	long long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/naks_sent", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

static int run(struct ibv_context *ctx, const char *dev, int gid_index, int fd, int sender)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	static uint8_t buf[LEN];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	struct rc_peer mine, theirs;
	struct ibv_sge sge;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	union ibv_gid gid;
	struct ibv_wc wc;
	long long before, now;
	char go = 'G';
	size_t i;

	if (!pd || !cq)
		return fail("pd and cq");
	init.send_cq = init.recv_cq = cq;
	qp = ibv_create_qp(pd, &init);
	mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!qp || !mr || ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("qp, mr and gid");
	mine = (struct rc_peer){ .qpn = qp->qp_num, .psn = sender ? 0x100 : 0x200 };
	memcpy(mine.gid, gid.raw, 16);
	if (exchange(fd, &mine, &theirs))
		return fail("exchanging addresses");
	if (connect_rc(qp, gid_index, theirs.gid, theirs.qpn, theirs.psn, mine.psn, 0))
		return fail("connecting the QP");
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = LEN, .lkey = mr->lkey };
	if (sender) {
		struct ibv_send_wr wr = {
			.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		for (i = 0; i < LEN; i++)
			buf[i] = (uint8_t)(i + 1);
		if (recv(fd, &go, 1, MSG_WAITALL) != 1)
			return fail("waiting for the receiver");
		if (ibv_post_send(qp, &wr, &bad))
			return fail("posting the send");
		if (wait_wc(cq, &wc) || wc.status != IBV_WC_SUCCESS)
			return fprintf(stderr, "rnr: send: %s\n", ibv_wc_status_str(wc.status)), 1;
		printf("rnr ok: the SEND completed after the receiver's RNR NAK\n");
		return 0;
	}
	before = naks_sent(dev);
	if (before < 0)
		return fail("reading naks_sent");
	if (write(fd, &go, 1) != 1)
		return fail("telling the sender");
	/* No receive is posted: the SEND can only be RNR NAKed. */
	do {
		usleep(100);
		now = naks_sent(dev);
	} while (now == before);
	if (now < 0)
		return fail("reading naks_sent");
	{
		struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			return fail("posting the receive");
	}
	if (wait_wc(cq, &wc) || wc.status != IBV_WC_SUCCESS || wc.byte_len != LEN)
		return fprintf(stderr, "rnr: receive: %s, %u bytes\n", ibv_wc_status_str(wc.status),
			       wc.byte_len), 1;
	for (i = 0; i < LEN; i++)
		if (buf[i] != (uint8_t)(i + 1))
			return printf("rnr: byte %zu is %u\n", i, buf[i]), 1;
	printf("rnr ok: %lld NAK(s) sent before the receive was posted, then %u bytes received\n",
	       now - before, wc.byte_len);
	return 0;
}

int main(int argc, char **argv)
{
	struct pair p;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = pair_start(argc, argv, "18792", &p);
	if (rc)
		return rc;
	return run(p.ctx, p.dev, p.gid_index, p.fd, p.client);
}
