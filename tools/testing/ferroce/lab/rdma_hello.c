// SPDX-License-Identifier: GPL-2.0
/*
 * rdma_hello: a small RDMA program, written the way a lab user would write one, that make
 * check compiles and runs in the lab (tools/ferroce lab exec): librdmacm connects an RC QP over
 * ferroce0 (or rxe0), the server tells the client where its buffer is, the client writes a
 * greeting there with an RDMA WRITE and SENDs its length, and the server prints what it found
 * and answers with a SEND.
 *
 *   rdma_hello -l [PORT]     server: prints "listening on PORT" once it listens, serves one client
 *   rdma_hello HOST [PORT]   client
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define BUF_SIZE 4096

struct region {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;
};

static char host[64];

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", host, what, strerror(errno));
	exit(1);
}

static void completed(struct rdma_cm_id *id, int send, const char *what)
{
	struct ibv_wc wc;
	int n = send ? rdma_get_send_comp(id, &wc) : rdma_get_recv_comp(id, &wc);

	if (n <= 0)
		die(what);
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "%s: %s: %s\n", host, what, ibv_wc_status_str(wc.status));
		exit(1);
	}
}

static struct rdma_cm_id *endpoint(const char *node, const char *port, int passive)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	struct rdma_cm_id *id;

	if (passive)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(node, port, &hints, &res))
		die(node ? node : "rdma_getaddrinfo");
	if (rdma_create_ep(&id, res, NULL, &attr))
		die("rdma_create_ep");
	rdma_freeaddrinfo(res);
	return id;
}

static int serve(const char *port)
{
	struct rdma_cm_id *listener = endpoint(NULL, port, 1), *id;
	struct region *where = calloc(1, sizeof(*where));
	char *buf = calloc(1, BUF_SIZE), reply[128];
	uint32_t *len = calloc(1, sizeof(*len));
	struct ibv_mr *buf_mr, *where_mr, *len_mr, *reply_mr;

	if (rdma_listen(listener, 1))
		die("rdma_listen");
	printf("listening on %s\n", port);
	fflush(stdout);
	if (rdma_get_request(listener, &id))
		die("rdma_get_request");
	buf_mr = rdma_reg_write(id, buf, BUF_SIZE);
	where_mr = rdma_reg_msgs(id, where, sizeof(*where));
	len_mr = rdma_reg_msgs(id, len, sizeof(*len));
	reply_mr = rdma_reg_msgs(id, reply, sizeof(reply));
	if (!buf_mr || !where_mr || !len_mr || !reply_mr)
		die("rdma_reg_*");
	if (rdma_post_recv(id, NULL, len, sizeof(*len), len_mr))
		die("rdma_post_recv");
	if (rdma_accept(id, NULL))
		die("rdma_accept");

	where->addr = htobe64((uintptr_t)buf);
	where->rkey = htobe32(buf_mr->rkey);
	where->size = htobe32(BUF_SIZE);
	if (rdma_post_send(id, NULL, where, sizeof(*where), where_mr, 0))
		die("rdma_post_send");
	completed(id, 1, "SEND of the buffer's address");
	completed(id, 0, "RECV of the greeting's length");
	*len = be32toh(*len);
	if (*len >= BUF_SIZE) {
		fprintf(stderr, "%s: a greeting of %u bytes cannot be\n", host, *len);
		return 1;
	}
	printf("%s: found \"%.*s\" in its buffer (%u bytes, by RDMA WRITE)\n", host, (int)*len, buf, *len);
	snprintf(reply, sizeof(reply), "hello back from %s", host);
	if (rdma_post_send(id, NULL, reply, strlen(reply) + 1, reply_mr, 0))
		die("rdma_post_send");
	completed(id, 1, "SEND of the reply");
	rdma_disconnect(id);
	rdma_dereg_mr(buf_mr);
	rdma_dereg_mr(where_mr);
	rdma_dereg_mr(len_mr);
	rdma_dereg_mr(reply_mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listener);
	return 0;
}

static int client(const char *node, const char *port)
{
	struct rdma_cm_id *id = endpoint(node, port, 0);
	struct region *where = calloc(1, sizeof(*where));
	char greeting[128], reply[128];
	uint32_t *len = calloc(1, sizeof(*len));
	struct ibv_mr *where_mr, *greeting_mr, *len_mr, *reply_mr;

	where_mr = rdma_reg_msgs(id, where, sizeof(*where));
	greeting_mr = rdma_reg_msgs(id, greeting, sizeof(greeting));
	len_mr = rdma_reg_msgs(id, len, sizeof(*len));
	reply_mr = rdma_reg_msgs(id, reply, sizeof(reply));
	if (!where_mr || !greeting_mr || !len_mr || !reply_mr)
		die("rdma_reg_msgs");
	if (rdma_post_recv(id, NULL, where, sizeof(*where), where_mr) ||
	    rdma_post_recv(id, NULL, reply, sizeof(reply), reply_mr))
		die("rdma_post_recv");
	if (rdma_connect(id, NULL))
		die("rdma_connect");

	completed(id, 0, "RECV of the server's buffer");
	snprintf(greeting, sizeof(greeting), "hello from %s", host);
	*len = strlen(greeting);
	if (*len > be32toh(where->size)) {
		fprintf(stderr, "%s: the server's buffer is too small\n", host);
		return 1;
	}
	if (rdma_post_write(id, NULL, greeting, *len, greeting_mr, 0, be64toh(where->addr),
			    be32toh(where->rkey)))
		die("rdma_post_write");
	completed(id, 1, "RDMA WRITE of the greeting");
	*len = htobe32(*len);
	if (rdma_post_send(id, NULL, len, sizeof(*len), len_mr, 0))
		die("rdma_post_send");
	completed(id, 1, "SEND of the greeting's length");
	completed(id, 0, "RECV of the reply");
	reply[sizeof(reply) - 1] = 0;
	printf("%s: %s says \"%s\"\n", host, node, reply);
	rdma_disconnect(id);
	rdma_dereg_mr(where_mr);
	rdma_dereg_mr(greeting_mr);
	rdma_dereg_mr(len_mr);
	rdma_dereg_mr(reply_mr);
	rdma_destroy_ep(id);
	return 0;
}

int main(int argc, char **argv)
{
	gethostname(host, sizeof(host) - 1);
	if (argc >= 2 && !strcmp(argv[1], "-l"))
		return serve(argc > 2 ? argv[2] : "18600");
	if (argc >= 2 && argv[1][0] != '-')
		return client(argv[1], argc > 2 ? argv[2] : "18600");
	fprintf(stderr, "usage: rdma_hello -l [PORT] | rdma_hello HOST [PORT]\n");
	return 2;
}
