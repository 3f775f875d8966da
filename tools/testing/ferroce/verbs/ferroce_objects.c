// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_objects: holds verbs objects so that what they cost the device can be read while
 * they live (make bench's nic-memory benchmark reads the NIC process's memory).
 *
 *   ferroce_objects DEVICE QPS MIB [once]
 *
 * opens DEVICE, creates a PD, one CQ of 1024 entries and QPS RC QPs on it (128 send and 128
 * receive WRs each, moved to INIT), and registers MIB MiB of memory (touched first, so that
 * every page is there). It prints "holding QPS QPs, MIB MiB" and waits until it is killed, or
 * with "once" exits at once; the kernel releases everything when the process ends. Any failure
 * is printed with its errno and exits 1 (driver-lies runs it against a NIC that lies about
 * command completions).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs.h"

static int fail(const char *what, int err)
{
	fprintf(stderr, "objects: %s: %s\n", what, strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	long qps, mib;
	int i;

	if ((argc != 4 && argc != 5) || (argc == 5 && strcmp(argv[4], "once"))) {
		fprintf(stderr, "usage: %s DEVICE QPS MIB [once]\n", argv[0]);
		return 2;
	}
	qps = strtol(argv[2], NULL, 0);
	mib = strtol(argv[3], NULL, 0);
	if (qps < 0 || mib < 0 || qps > 65536 || mib > 65536) {
		fprintf(stderr, "objects: QPS and MIB from 0 to 65536\n");
		return 2;
	}
	ctx = open_device(argv[1]);
	if (!ctx)
		return fail(argv[1], errno);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fail("ibv_alloc_pd", errno);
	cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
	if (!cq)
		return fail("ibv_create_cq", errno);
	for (i = 0; i < qps; i++) {
		struct ibv_qp_init_attr init = {
			.send_cq = cq,
			.recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 128, .max_recv_wr = 128,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};
		struct ibv_qp_attr attr = {
			.qp_state = IBV_QPS_INIT,
			.port_num = 1,
			.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
		};
		struct ibv_qp *qp = ibv_create_qp(pd, &init);
		int rc;

		if (!qp)
			return fail("ibv_create_qp", errno);
		rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS);
		if (rc)
			return fail("ibv_modify_qp INIT", rc);
	}
	if (mib > 0) {
		size_t len = (size_t)mib << 20;
		void *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				 -1, 0);

		if (buf == MAP_FAILED)
			return fail("mmap", errno);
		memset(buf, 0x5a, len);
		if (!ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
			return fail("ibv_reg_mr", errno);
	}
	printf("holding %ld QPs, %ld MiB\n", qps, mib);
	fflush(stdout);
	if (argc == 5)
		return 0;
	for (;;)
		pause();
}
