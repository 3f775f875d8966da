// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_odp: on-demand paging with the registered memory taken away between transfers.
 *
 *   ferroce_odp -d DEV -g GID [-p PORT] [-r ROUNDS]           the server (the responder)
 *   ferroce_odp -d DEV -g GID [-p PORT] [-r ROUNDS] SERVER    the client (the requester)
 *   ferroce_odp -d DEV -H      on-demand memory with IBV_ACCESS_HUGETLB is refused
 *   ferroce_odp -d DEV -g GID -L [FILE]    one page fault: a QP writes to itself from an
 *                              on-demand MR over FILE's pages (anonymous memory without FILE)
 *   ferroce_odp -d DEV -R N    N on-demand MRs of 1 GiB over address space with no memory,
 *                              then other objects beside them
 *
 * Both sides register 1 MiB of anonymous memory with IBV_ACCESS_ON_DEMAND: nothing is pinned,
 * and madvise(MADV_DONTNEED) really frees the pages, so the kernel must invalidate them in the
 * NIC before they go. Each round r:
 *
 *   1. the client drops its buffer, fills it with pattern r (new pages), and RDMA WRITEs it
 *      over the server's whole buffer in 64 KiB WRs;
 *   2. the server checks every byte is pattern r, drops its buffer (now it reads as zeros),
 *      and writes pattern r + 100 into the even pages only: the odd ones stay unmapped;
 *   3. the client drops its buffer again and RDMA READs the server's whole buffer into it:
 *      even pages must hold pattern r + 100 and odd pages zeros. Then a fetch-and-add of
 *      r + 1 on the first word of an odd page (unmapped: the NIC must fault it writable)
 *      must return 0, and the server then finds r + 1 there.
 *
 * A NIC that kept a page the kernel took back would write where the server no longer looks
 * (step 2 sees the old round's bytes or zeros) or read what the server no longer has (step 3
 * sees the old round's pattern). Each side prints "odp ok rounds=R" and exits 0, or says
 * what differed and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "verbs.h"

#define BUF_LEN (1024 * 1024)
#define PAGE 4096
#define CHUNK (64 * 1024)
#define CHUNKS (BUF_LEN / CHUNK)
#define ODP_ACCESS (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static int fail(const char *what)
{
	fprintf(stderr, "odp: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Byte i of pattern `round`: differs from every other round's at every byte, never zero. */
static uint8_t pattern(unsigned round, size_t i)
{
	return (uint8_t)((i * 131 + (i >> 12) * 7 + round * 17) % 255 + 1);
}

/* What byte i of the server's buffer holds after step 2 of `round`. */
static uint8_t after_drop(unsigned round, size_t i)
{
	return (i / PAGE) % 2 ? 0 : pattern(round + 100, i);
}

/* The first word of the odd page the round's atomic goes to. */
static size_t atomic_at(unsigned round)
{
	return ((2 * round + 1) * PAGE) % BUF_LEN;
}

/* Gives `buf`'s pages back to the kernel: the next touch, by the CPU or the NIC, finds new ones. */
static int drop(void *buf)
{
	return madvise(buf, BUF_LEN, MADV_DONTNEED);
}

/* Counts the bytes of buf that differ from want(round, i), printing the first few. */
static size_t compare(const char *what, const uint8_t *buf, unsigned round,
		      uint8_t (*want)(unsigned, size_t))
{
	size_t i, bad = 0;

	for (i = 0; i < BUF_LEN; i++)
		if (buf[i] != want(round, i) && bad++ < 4)
			fprintf(stderr, "odp: round %u: %s: byte %zu (page %zu) is %#x, not %#x\n",
				round, what, i, i / PAGE, buf[i], want(round, i));
	return bad;
}

/* The two sides take their steps in turn, saying so with one byte over the TCP connection. */
static int say(int fd, char step)
{
	return write(fd, &step, 1) == 1 ? 0 : -1;
}

static int hear(int fd, char step)
{
	char got;

	return recv(fd, &got, 1, MSG_WAITALL) == 1 && got == step ? 0 : -1;
}

struct side {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct rc_peer theirs;
};

/* The PD, CQ, QP and on-demand MR of one side, connected to the other's. */
static int set_up(struct ibv_context *ctx, int gid_index, int fd, uint32_t psn, struct side *s)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = CHUNKS + 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rc_peer mine;
	union ibv_gid gid;

	s->pd = ibv_alloc_pd(ctx);
	s->cq = ibv_create_cq(ctx, CHUNKS + 1, NULL, NULL, 0);
	s->buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!s->pd || !s->cq || s->buf == MAP_FAILED)
		return fail("pd, cq and buffer");
	init.send_cq = init.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &init);
	/* Registered before any page exists: the NIC asks for each one as it needs it. */
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_LEN, ODP_ACCESS);
	if (!s->qp || !s->mr || ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("qp, on-demand mr and gid");
	mine = (struct rc_peer){ .qpn = s->qp->qp_num, .psn = psn, .addr = (uintptr_t)s->buf,
				 .rkey = s->mr->rkey };
	memcpy(mine.gid, gid.raw, 16);
	if (exchange(fd, &mine, &s->theirs))
		return fail("exchanging addresses");
	if (connect_rc(s->qp, gid_index, s->theirs.gid, s->theirs.qpn, s->theirs.psn, psn,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC))
		return fail("connecting the QP");
	return 0;
}

static int server(struct ibv_context *ctx, int gid_index, int fd, unsigned rounds)
{
	struct side s;
	unsigned r;
	size_t i;

	if (set_up(ctx, gid_index, fd, 0x1234, &s))
		return 1;
	for (r = 0; r < rounds; r++) {
		uint64_t word;

		if (say(fd, 'R') || hear(fd, 'W'))
			return fail("waiting for the client's writes");
		if (compare("the client's write", s.buf, r, pattern))
			return printf("odp: round %u: the writes did not land\n", r), 1;
		if (drop(s.buf))
			return fail("madvise(MADV_DONTNEED)");
		for (i = 0; i < BUF_LEN; i++)
			if (!((i / PAGE) % 2))
				s.buf[i] = after_drop(r, i);
		if (say(fd, 'D') || hear(fd, 'A'))
			return fail("waiting for the client's read and atomic");
		memcpy(&word, s.buf + atomic_at(r), sizeof(word));
		if (word != r + 1)
			return printf("odp: round %u: the atomic left %llu, not %u\n", r,
				      (unsigned long long)word, r + 1), 1;
	}
	printf("odp ok rounds=%u: each round's writes landed in the pages the server had then\n",
	       rounds);
	return 0;
}

/* Posts the whole buffer in CHUNKS signalled WRs of `opcode` and waits for them. */
static int transfer(struct side *s, enum ibv_wr_opcode opcode, const char *what)
{
	struct ibv_sge sge[CHUNKS];
	struct ibv_send_wr wr[CHUNKS], *bad_wr;
	struct ibv_wc wc;
	int i;

	for (i = 0; i < CHUNKS; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)s->buf + i * CHUNK, .length = CHUNK,
					   .lkey = s->mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = i, .next = i + 1 < CHUNKS ? &wr[i + 1] : NULL, .sg_list = &sge[i],
			.num_sge = 1, .opcode = opcode, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = s->theirs.addr + i * CHUNK,
				     .rkey = s->theirs.rkey },
		};
	}
	if (ibv_post_send(s->qp, wr, &bad_wr))
		return fail(what);
	for (i = 0; i < CHUNKS; i++)
		if (wait_wc(s->cq, &wc) || wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i)
			return fprintf(stderr, "odp: %s: wr %llu: %s\n", what,
				       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status)), 1;
	return 0;
}

/* Fetch-and-add of `add` at the server's `offset`, the original into our buffer's first word. */
static int fetch_add(struct side *s, size_t offset, uint64_t add, uint64_t *original)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf, .length = 8, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = s->theirs.addr + offset, .compare_add = add,
			       .rkey = s->theirs.rkey },
	}, *bad_wr;
	struct ibv_wc wc;

	if (ibv_post_send(s->qp, &wr, &bad_wr))
		return fail("posting the atomic");
	if (wait_wc(s->cq, &wc) || wc.status != IBV_WC_SUCCESS)
		return fprintf(stderr, "odp: atomic: %s\n", ibv_wc_status_str(wc.status)), 1;
	memcpy(original, s->buf, sizeof(*original));
	return 0;
}

static int client(struct ibv_context *ctx, int gid_index, int fd, unsigned rounds)
{
	struct side s;
	unsigned r;
	size_t i;

	if (set_up(ctx, gid_index, fd, 0x5678, &s))
		return 1;
	for (r = 0; r < rounds; r++) {
		uint64_t original;

		if (hear(fd, 'R'))
			return fail("waiting for the server");
		if (drop(s.buf))
			return fail("madvise(MADV_DONTNEED)");
		for (i = 0; i < BUF_LEN; i++)
			s.buf[i] = pattern(r, i);
		if (transfer(&s, IBV_WR_RDMA_WRITE, "rdma write"))
			return 1;
		/* The server checks, then drops its pages and rewrites half of them. */
		if (say(fd, 'W') || hear(fd, 'D'))
			return fail("waiting for the server's drop");
		if (drop(s.buf))
			return fail("madvise(MADV_DONTNEED)");
		if (transfer(&s, IBV_WR_RDMA_READ, "rdma read"))
			return 1;
		if (compare("the read", s.buf, r, after_drop))
			return printf("odp: round %u: the read did not see the server's pages\n", r), 1;
		if (fetch_add(&s, atomic_at(r), r + 1, &original))
			return 1;
		if (original)
			return printf("odp: round %u: the atomic found %llu, not 0\n", r,
				      (unsigned long long)original), 1;
		if (say(fd, 'A'))
			return fail("telling the server");
	}
	printf("odp ok rounds=%u: writes, reads and atomics of %u KiB each round, pages dropped "
	       "between them on both sides\n", rounds, BUF_LEN / 1024);
	return 0;
}

/*
 * -H: the device does not page huge pages on demand (its page table is in 4 KiB entries), so
 * registering on-demand memory with IBV_ACCESS_HUGETLB must fail with EOPNOTSUPP, whatever the
 * memory (before the driver refused it, it registered even this memory, which is not huge).
 */
static int hugetlb_refused(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	void *buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	if (!pd || buf == MAP_FAILED)
		return fail("setup");
	mr = ibv_reg_mr(pd, buf, BUF_LEN, ODP_ACCESS | IBV_ACCESS_HUGETLB);
	if (mr) {
		fprintf(stderr, "odp hugetlb: registered (lkey %#x), expected EOPNOTSUPP\n", mr->lkey);
		ibv_dereg_mr(mr);
		return 1;
	}
	if (errno != EOPNOTSUPP)
		return fail("odp hugetlb: expected EOPNOTSUPP");
	printf("odp hugetlb refused: %s\n", strerror(errno));
	ibv_dealloc_pd(pd);
	return 0;
}

#define GIB (1024UL * 1024 * 1024)

/*
 * -R N: registers up to N on-demand MRs of 1 GiB, each over a PROT_NONE reservation (address
 * space with no memory: nothing to pin, nothing present), and says how many it got and why it
 * stopped. Then, while they live, it creates what another process would: a CQ, a QP and a
 * pinned MR of 64 KiB. The NIC counts an on-demand MR's present pages only, so the MRs cost
 * the others nothing; the host bounds their number per process with the rdma cgroup
 * (rdma.max hca_object), which refuses the first one over it with EAGAIN.
 */
static int reserve(struct ibv_context *ctx, unsigned n)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	static uint8_t small[64 * 1024];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	unsigned i;

	if (!pd)
		return fail("pd");
	for (i = 0; i < n; i++) {
		void *space = mmap(NULL, GIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				   -1, 0);

		if (space == MAP_FAILED)
			return fail("reserving address space");
		if (!ibv_reg_mr(pd, space, GIB, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE))
			break;
	}
	if (i < n)
		printf("odp reserve: registered %u of %u on-demand MRs of 1 GiB: %s\n", i, n,
		       strerror(errno));
	else
		printf("odp reserve: registered %u on-demand MRs of 1 GiB over memory not there\n", n);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	init.send_cq = init.recv_cq = cq;
	qp = cq ? ibv_create_qp(pd, &init) : NULL;
	mr = qp ? ibv_reg_mr(pd, small, sizeof(small), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		printf("odp reserve: then %s failed: %s\n", !cq ? "a CQ" : !qp ? "a QP" : "an MR",
		       strerror(errno));
	else
		printf("odp reserve: then a CQ, a QP and a pinned MR of 64 KiB: ok\n");
	return 0;
}

#define LOOP_LEN (64 * 1024)

/*
 * -L [FILE]: an RC QP connected to itself RDMA WRITEs LOOP_LEN bytes from an on-demand MR over
 * FILE's first pages (read-only, shared) into an on-demand anonymous buffer, then checks that
 * the buffer holds the file's bytes. The NIC meets pages it lacks in both MRs and raises page
 * faults, which the driver serves from the file's page cache: if FILE is on a FUSE mount whose
 * daemon holds its reads (ferroce_fuse), the fault waits until the daemon answers. Without
 * FILE the source is anonymous memory the CPU filled first.
 */
static int loopback(struct ibv_context *ctx, int gid_index, const char *file)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
	uint8_t *src, *dst = mmap(NULL, LOOP_LEN, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *src_mr, *dst_mr;
	struct ibv_send_wr wr, *bad_wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	union ibv_gid gid;
	struct ibv_qp *qp;
	size_t i;

	if (!pd || !cq || dst == MAP_FAILED)
		return fail("pd, cq and buffer");
	if (file) {
		int fd = open(file, O_RDONLY);

		if (fd < 0)
			return fail(file);
		/* Mapped, not read: no page of it is in memory until the fault asks for it. */
		src = mmap(NULL, LOOP_LEN, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
	} else {
		src = mmap(NULL, LOOP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
		if (src != MAP_FAILED)
			for (i = 0; i < LOOP_LEN; i++)
				src[i] = pattern(0, i);
	}
	if (src == MAP_FAILED)
		return fail("mapping the source");
	init.send_cq = init.recv_cq = cq;
	qp = ibv_create_qp(pd, &init);
	src_mr = ibv_reg_mr(pd, src, LOOP_LEN, IBV_ACCESS_ON_DEMAND);
	dst_mr = ibv_reg_mr(pd, dst, LOOP_LEN, ODP_ACCESS);
	if (!qp || !src_mr || !dst_mr || ibv_query_gid(ctx, 1, gid_index, &gid))
		return fail("qp, on-demand mrs and gid");
	if (connect_rc(qp, gid_index, gid.raw, qp->qp_num, 0x42, 0x42, IBV_ACCESS_REMOTE_WRITE))
		return fail("connecting the QP to itself");
	sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = LOOP_LEN, .lkey = src_mr->lkey };
	wr = (struct ibv_send_wr){
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = dst_mr->rkey },
	};
	if (ibv_post_send(qp, &wr, &bad_wr))
		return fail("posting the write");
	printf("odp loopback: write posted from %s\n", file ? file : "anonymous memory");
	if (wait_wc(cq, &wc) || wc.status != IBV_WC_SUCCESS)
		return fprintf(stderr, "odp loopback: write: %s\n", ibv_wc_status_str(wc.status)), 1;
	if (memcmp(dst, src, LOOP_LEN))
		return printf("odp loopback: the buffer does not hold the source's bytes\n"), 1;
	printf("odp loopback ok: %u KiB from %s\n", LOOP_LEN / 1024,
	       file ? file : "anonymous memory");
	return 0;
}

int main(int argc, char **argv)
{
	const char *port = "18791", *dev = NULL;
	struct ibv_context *ctx;
	int opt, gid_index = -1, fd, hugetlb = 0, loop = 0, reserved = 0;
	unsigned rounds = 4;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "d:g:p:r:HLR:")) != -1) {
		switch (opt) {
		case 'R': reserved = atoi(optarg); break;
		case 'H': hugetlb = 1; break;
		case 'L': loop = 1; break;
		case 'd': dev = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 'p': port = optarg; break;
		case 'r': rounds = (unsigned)atoi(optarg); break;
		default: dev = NULL; break;
		}
	}
	if (!dev || (gid_index < 0 && !hugetlb && reserved <= 0) || !rounds) {
		fprintf(stderr, "usage: %s -d DEV -g GID [-p PORT] [-r ROUNDS] [SERVER] | -d DEV -H | "
			"-d DEV -g GID -L [FILE] | -d DEV -R N\n", argv[0]);
		return 2;
	}
	ctx = open_device(dev);
	if (!ctx)
		return fail(dev);
	if (hugetlb)
		return hugetlb_refused(ctx);
	if (loop)
		return loopback(ctx, gid_index, optind < argc ? argv[optind] : NULL);
	if (reserved > 0)
		return reserve(ctx, (unsigned)reserved);
	fd = tcp_pair(optind < argc ? argv[optind] : NULL, port);
	if (fd < 0)
		return fail("tcp");
	return optind < argc ? client(ctx, gid_index, fd, rounds) : server(ctx, gid_index, fd, rounds);
}
