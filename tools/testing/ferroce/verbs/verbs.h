/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest's verbs programs (ferroce_pmem, ferroce_odp, ferroce_chain, ferroce_objects,
 * ferroce_xrc) share: opening a device by name, taking an RC QP to RTS, ibv_rc_pingpong's way,
 * and for the two-host ones a TCP connection to exchange their QPs and buffers over.
 */
#ifndef FERROCE_TEST_VERBS_H
#define FERROCE_TEST_VERBS_H

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* The device named `name`, opened; NULL (errno set) if there is none. */
static inline struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return ibv_open_device(list[i]);
	errno = ENODEV;
	return NULL;
}

/*
 * INIT, RTR and RTS towards QP `dest_qpn` at `dgid` (from our GID `gid_index`), with remote
 * access `access`: path MTU 1024, 4 READs or atomics each way, 7 retries. 0, or the error of
 * the transition that failed (also in errno).
 */
static inline int connect_rc(struct ibv_qp *qp, int gid_index, const uint8_t dgid[16],
			     uint32_t dest_qpn, uint32_t dest_psn, uint32_t psn, int access)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access,
	};
	int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_ACCESS_FLAGS);

	if (rc)
		goto out;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = dest_psn;
	attr.max_dest_rd_atomic = 4;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.port_num = 1;
	attr.ah_attr.grh.hop_limit = 64;
	attr.ah_attr.grh.sgid_index = gid_index;
	memcpy(attr.ah_attr.grh.dgid.raw, dgid, 16);
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			   IBV_QP_MIN_RNR_TIMER);
	if (rc)
		goto out;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.sq_psn = psn;
	attr.max_rd_atomic = 4;
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
out:
	if (rc)
		errno = rc;
	return rc;
}

/* What each side of a two-host program tells the other: its QP, and its buffer for RDMA. */
struct rc_peer {
	uint32_t qpn;
	uint32_t psn;
	uint8_t gid[16];
	uint64_t addr;
	uint32_t rkey;
} __attribute__((packed));

/* Connects to SERVER:PORT, or (server NULL) takes one connection on PORT; the socket, or -1. */
static inline int tcp_pair(const char *server, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
				  .ai_flags = server ? 0 : AI_PASSIVE };
	struct addrinfo *res;
	int fd, conn, one = 1, tries;

	if (getaddrinfo(server, port, &hints, &res))
		return -1;
	fd = socket(res->ai_family, res->ai_socktype, 0);
	if (fd < 0)
		return -1;
	if (server) {
		/* The server may not listen yet. */
		for (tries = 0; connect(fd, res->ai_addr, res->ai_addrlen); tries++) {
			if (tries > 100)
				return -1;
			close(fd);
			sleep(1);
			fd = socket(res->ai_family, res->ai_socktype, 0);
		}
		return fd;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 1))
		return -1;
	conn = accept(fd, NULL, NULL);
	close(fd);
	return conn;
}

/* Sends ours and receives theirs over `fd`; 0, or -1. */
static inline int exchange(int fd, const struct rc_peer *mine, struct rc_peer *theirs)
{
	if (write(fd, mine, sizeof(*mine)) != sizeof(*mine))
		return -1;
	return recv(fd, theirs, sizeof(*theirs), MSG_WAITALL) == sizeof(*theirs) ? 0 : -1;
}

/* Polls `cq` until one completion is in `wc`; 0, or -1 if polling failed. */
/* A two-host program's start: its device, GID, and TCP connection to the other host. */
struct pair {
	const char *dev;
	struct ibv_context *ctx;
	int gid_index;
	/* The connection; this host is the client (it named the server). */
	int fd, client;
};

/*
 * Parses -d DEV -g GID [-p PORT] [SERVER] (PORT by default `port`), opens DEV and connects to
 * SERVER, or takes one connection on PORT without it: 0, or the exit status after saying why
 * (2 for a usage error, 1 for a failure).
 */
static inline int pair_start(int argc, char **argv, const char *port, struct pair *p)
{
	int opt;

	*p = (struct pair){ .gid_index = -1 };
	while ((opt = getopt(argc, argv, "d:g:p:")) != -1) {
		switch (opt) {
		case 'd': p->dev = optarg; break;
		case 'g': p->gid_index = atoi(optarg); break;
		case 'p': port = optarg; break;
		default: p->dev = NULL; break;
		}
	}
	if (!p->dev || p->gid_index < 0) {
		fprintf(stderr, "usage: %s -d DEV -g GID [-p PORT] [SERVER]\n", argv[0]);
		return 2;
	}
	p->ctx = open_device(p->dev);
	if (!p->ctx) {
		fprintf(stderr, "%s: %s: %s\n", argv[0], p->dev, strerror(errno));
		return 1;
	}
	p->client = optind < argc;
	p->fd = tcp_pair(p->client ? argv[optind] : NULL, port);
	if (p->fd < 0) {
		fprintf(stderr, "%s: tcp: %s\n", argv[0], strerror(errno));
		return 1;
	}
	return 0;
}

static inline int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n;

	do
		n = ibv_poll_cq(cq, 1, wc);
	while (n == 0);
	return n < 0 ? -1 : 0;
}

#endif
