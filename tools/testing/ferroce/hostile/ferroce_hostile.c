// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_hostile: a process that talks to ferroce0 as a hostile one would.
 *
 * It opens the uverbs device itself (no libibverbs: it builds every command by hand, in the
 * legacy write() format), and checks that each malformed request of the ferroce user ABI
 * (include/uapi/rdma/ferroce-abi.h) is refused with the expected errno, then rings its
 * doorbell page with values the device must reject (unmapped queue numbers, producer
 * indexes out of range, unknown registers, a garbage push window) and corrupts its doorbell
 * records. It exits without destroying anything, as a crashed process would: the kernel
 * must clean up. One line per case; the exit status is the number of failed cases.
 *
 * "ferroce_hostile hold" instead opens a context with a PD, a CQ and the doorbell page
 * mapped, prints "holding", and waits on the context's async event file: when the device goes
 * away (rmmod) ib_core must cut the context off (disassociate_ucontext) and report
 * IB_EVENT_DEVICE_FATAL. It prints the event and exits 0 for that one, 1 otherwise.
 *
 * "ferroce_hostile cqs" opens a context and creates CQs until the kernel refuses one (each
 * takes a local QID of the context's doorbell page), then prints "created N CQs, then errno E
 * (message)" and exits 0, leaving the cleanup to the kernel.
 *
 * "ferroce_hostile flood SECONDS" opens a context with a CQ and rings the CQ's arm doorbell
 * (a valid doorbell the device services each time) as fast as it can for SECONDS, then prints
 * "flood: N doorbells in S s (R per second)": a function that floods its NIC's device thread.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ferroce-abi.h>

#define PAGE 4096
#define DB_SQ 0x000
#define DB_RQ 0x004
#define DB_CQ_ARM 0x00c
#define DB_PUSH 0x010
/* enum ib_event_type (kernel) = enum ibv_event_type (libibverbs): not in the uapi headers. */
#define IB_EVENT_DEVICE_FATAL 8

static int failures;
static int uverbs_fd;

/* One legacy write() command: header, core request, driver request; returns 0 or errno. */
static int command(uint32_t cmd, const void *core, size_t core_len, const void *drv,
		   size_t drv_len, size_t out_len)
{
	uint8_t buf[512];
	struct ib_uverbs_cmd_hdr hdr = {
		.command = cmd,
		.in_words = (sizeof(hdr) + core_len + drv_len) / 4,
		.out_words = out_len / 4,
	};

	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), core, core_len);
	memcpy(buf + sizeof(hdr) + core_len, drv, drv_len);
	if (write(uverbs_fd, buf, sizeof(hdr) + core_len + drv_len) < 0)
		return errno;
	return 0;
}

static void expect(const char *name, int got, int want)
{
	if (got == want) {
		printf("ok   %-34s %s\n", name, want ? strerror(want) : "accepted");
		return;
	}
	printf("FAIL %-34s got %s, expected %s\n", name, got ? strerror(got) : "success",
	       want ? strerror(want) : "success");
	failures++;
}

static int open_uverbs(const char *ibdev)
{
	DIR *dir = opendir("/sys/class/infiniband_verbs");
	struct dirent *d;
	char path[300], name[64];

	while (dir && (d = readdir(dir))) {
		FILE *f;

		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, ibdev, strlen(ibdev))) {
			fclose(f);
			snprintf(path, sizeof(path), "/dev/infiniband/%s", d->d_name);
			closedir(dir);
			return open(path, O_RDWR | O_CLOEXEC);
		}
		fclose(f);
	}
	if (dir)
		closedir(dir);
	return -1;
}

/* Page-aligned, zeroed queue memory. */
static void *queue_memory(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(100);
	}
	return p;
}

struct cq_resp {
	struct ib_uverbs_create_cq_resp core;
	struct ferroce_create_cq_resp drv;
};

static int create_cq(struct ferroce_create_cq_req *req, uint32_t cqe, struct cq_resp *resp)
{
	struct ib_uverbs_create_cq core = {
		.response = (uintptr_t)resp,
		.cqe = cqe,
		.comp_channel = -1,
	};

	return command(IB_USER_VERBS_CMD_CREATE_CQ, &core, sizeof(core), req, sizeof(*req),
		       sizeof(*resp));
}

struct context_resp {
	struct ib_uverbs_get_context_resp core;
	struct ferroce_alloc_ucontext_resp drv;
};

/* GET_CONTEXT: allocates the process's NIC context; 0 or errno. */
static int get_context(struct context_resp *resp)
{
	struct ib_uverbs_get_context get_ctx = { .response = (uintptr_t)resp };

	return command(IB_USER_VERBS_CMD_GET_CONTEXT, &get_ctx, sizeof(get_ctx), NULL, 0,
		       sizeof(*resp));
}

struct qp_resp {
	struct ib_uverbs_create_qp_resp core;
	struct ferroce_create_qp_resp drv;
};

static int create_qp(uint32_t pd, uint32_t cq, struct ferroce_create_qp_req *req,
		     struct qp_resp *resp)
{
	struct ib_uverbs_create_qp core = {
		.response = (uintptr_t)resp,
		.pd_handle = pd,
		.send_cq_handle = cq,
		.recv_cq_handle = cq,
		.max_send_wr = 16,
		.max_recv_wr = 16,
		.max_send_sge = 1,
		.max_recv_sge = 1,
		.qp_type = IB_UVERBS_QPT_RC,
	};

	return command(IB_USER_VERBS_CMD_CREATE_QP, &core, sizeof(core), req, sizeof(*req),
		       sizeof(*resp));
}

static int create_srq(uint32_t pd, uint32_t max_wr, uint32_t limit,
		      struct ferroce_create_srq_req *req, void *resp, size_t resp_len)
{
	struct ib_uverbs_create_srq core = {
		.response = (uintptr_t)resp,
		.pd_handle = pd,
		.max_wr = max_wr,
		.max_sge = 1,
		.srq_limit = limit,
	};

	return command(IB_USER_VERBS_CMD_CREATE_SRQ, &core, sizeof(core), req, sizeof(*req),
		       resp_len);
}

/*
 * Opens ferroce0 with a context, a PD and a CQ (of 64 CQEs), and maps the context's doorbell
 * page into *db; returns 0, or 100 after saying what failed.
 */
static int context_with_cq(struct context_resp *ctx_resp, struct cq_resp *cq_resp,
			   volatile uint32_t **db)
{
	struct ib_uverbs_alloc_pd_resp pd_resp = { 0 };
	struct ib_uverbs_alloc_pd alloc_pd = { .response = (uintptr_t)&pd_resp };
	uint8_t *cq_buf = queue_memory(2 * PAGE);
	struct ferroce_create_cq_req cq_req = {
		.buf_addr = (uintptr_t)cq_buf, .buf_size = 2 * PAGE, .log_size = 6,
		.dbrec_offset = PAGE,
	};
	void *page;

	setvbuf(stdout, NULL, _IOLBF, 0);
	uverbs_fd = open_uverbs("ferroce0");
	if (uverbs_fd < 0 || !cq_buf) {
		perror("ferroce0");
		return 100;
	}
	if (get_context(ctx_resp) ||
	    command(IB_USER_VERBS_CMD_ALLOC_PD, &alloc_pd, sizeof(alloc_pd), NULL, 0,
		    sizeof(pd_resp)) ||
	    create_cq(&cq_req, 64, cq_resp)) {
		perror("setting up the context");
		return 100;
	}
	page = mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, uverbs_fd, ctx_resp->drv.db_mmap_offset);
	if (page == MAP_FAILED) {
		perror("mmap doorbell page");
		return 100;
	}
	*db = page;
	return 0;
}

/* Holds a context until the device goes away; see the top of the file. */
static int hold(void)
{
	struct context_resp ctx_resp = { 0 };
	struct ib_uverbs_async_event_desc event = { 0 };
	struct cq_resp cq_resp;
	volatile uint32_t *db;
	ssize_t got;
	int err = context_with_cq(&ctx_resp, &cq_resp, &db);

	if (err)
		return err;
	printf("holding\n");
	got = read(ctx_resp.core.async_fd, &event, sizeof(event));
	if (got != sizeof(event)) {
		perror("reading the async event file");
		return 1;
	}
	printf("event %u%s\n", event.event_type,
	       event.event_type == IB_EVENT_DEVICE_FATAL ? " IB_EVENT_DEVICE_FATAL" : "");
	return event.event_type == IB_EVENT_DEVICE_FATAL ? 0 : 1;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Rings its CQ's arm doorbell as fast as it can for `seconds`; see the top of the file. */
static int flood(double seconds)
{
	struct context_resp ctx_resp = { 0 };
	struct cq_resp cq_resp;
	volatile uint32_t *db;
	unsigned long rung = 0;
	double start, elapsed;
	int err = context_with_cq(&ctx_resp, &cq_resp, &db);

	if (err)
		return err;
	start = now_s();
	do {
		for (int i = 0; i < 256; i++)
			db[DB_CQ_ARM / 4] = cq_resp.drv.db_qid << 16;
		rung += 256;
		elapsed = now_s() - start;
	} while (elapsed < seconds);
	printf("flood: %lu doorbells in %.1f s (%.0f per second)\n", rung, elapsed, rung / elapsed);
	return 0;
}

/* Creates CQs until one is refused; at most 2048 (more than any QID table). */
static int many_cqs(void)
{
	struct context_resp ctx_resp = { 0 };
	struct cq_resp cq_resp;
	int created, err = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	uverbs_fd = open_uverbs("ferroce0");
	if (uverbs_fd < 0 || get_context(&ctx_resp)) {
		perror("ferroce0");
		return 100;
	}
	for (created = 0; created < 2048; created++) {
		uint8_t *buf = queue_memory(2 * PAGE);
		struct ferroce_create_cq_req req = {
			.buf_addr = (uintptr_t)buf, .buf_size = 2 * PAGE, .log_size = 6,
			.dbrec_offset = PAGE,
		};

		err = create_cq(&req, 64, &cq_resp);
		if (err)
			break;
	}
	printf("created %d CQs, then errno %d (%s)\n", created, err,
	       err ? strerror(err) : "no refusal");
	return 0;
}

int main(int argc, char **argv)
{
	struct context_resp ctx_resp = { 0 };
	struct ib_uverbs_alloc_pd_resp pd_resp = { 0 };
	struct ib_uverbs_alloc_pd alloc_pd = { .response = (uintptr_t)&pd_resp };
	struct cq_resp cq_resp;
	struct qp_resp qp_resp;
	struct {
		struct ib_uverbs_create_srq_resp core;
		struct ferroce_create_srq_resp drv;
	} srq_resp;
	volatile uint32_t *db;
	volatile uint64_t *push;
	uint8_t *cq_buf, *qp_buf, *srq_buf;
	uint32_t pd, cq, qp_qid, cq_qid;
	int i;

	if (argc > 1 && !strcmp(argv[1], "hold"))
		return hold();
	if (argc > 1 && !strcmp(argv[1], "cqs"))
		return many_cqs();
	if (argc > 2 && !strcmp(argv[1], "flood"))
		return flood(atof(argv[2]));
	setvbuf(stdout, NULL, _IOLBF, 0);
	uverbs_fd = open_uverbs("ferroce0");
	if (uverbs_fd < 0) {
		perror("no uverbs device for ferroce0");
		return 100;
	}
	expect("get_context", get_context(&ctx_resp), 0);
	expect("alloc_pd", command(IB_USER_VERBS_CMD_ALLOC_PD, &alloc_pd, sizeof(alloc_pd), NULL,
				    0, sizeof(pd_resp)), 0);
	pd = pd_resp.pd_handle;

	/* CQ: 64 CQEs of 64 bytes (one page), the record on the second page. */
	cq_buf = queue_memory(2 * PAGE);
	struct ferroce_create_cq_req good_cq = {
		.buf_addr = (uintptr_t)cq_buf, .buf_size = 2 * PAGE, .log_size = 6,
		.dbrec_offset = PAGE,
	};
	struct ferroce_create_cq_req bad;

#define BAD_CQ(name, field, value, err)						\
	do {									\
		bad = good_cq;							\
		bad.field = value;						\
		expect("create_cq: " name, create_cq(&bad, 64, &cq_resp), err); \
	} while (0)
	BAD_CQ("reserved field set", reserved, 1, EINVAL);
	BAD_CQ("buffer not page-aligned", buf_addr, (uintptr_t)cq_buf + 64, EINVAL);
	BAD_CQ("buffer size 0", buf_size, 0, EINVAL);
	BAD_CQ("buffer size not whole pages", buf_size, PAGE + 8, EINVAL);
	BAD_CQ("buffer not mapped", buf_addr, 0x10000, EFAULT);
	BAD_CQ("buffer in kernel space", buf_addr, 0xffff888000000000ULL, EFAULT);
	BAD_CQ("ring of 2^31 CQEs", log_size, 31, EINVAL);
	BAD_CQ("ring of 2^64 CQEs", log_size, 64, EINVAL);
	BAD_CQ("ring larger than the buffer", log_size, 8, EINVAL);
	BAD_CQ("record inside the ring", dbrec_offset, 128, EINVAL);
	BAD_CQ("record not 64-byte aligned", dbrec_offset, PAGE + 8, EINVAL);
	BAD_CQ("record past the buffer", dbrec_offset, 2 * PAGE, EINVAL);
	BAD_CQ("record offset wraps", dbrec_offset, 0xffffffc0, EINVAL);
	expect("create_cq: more CQEs than the ring", create_cq(&good_cq, 65, &cq_resp), EINVAL);
	{
		struct {
			struct ferroce_create_cq_req req;
			uint64_t unknown;
		} longer = { good_cq, 1 };
		struct ib_uverbs_create_cq core = {
			.response = (uintptr_t)&cq_resp, .cqe = 64, .comp_channel = -1,
		};

		expect("create_cq: unknown trailing bytes",
		       command(IB_USER_VERBS_CMD_CREATE_CQ, &core, sizeof(core), &longer,
			       sizeof(longer), sizeof(cq_resp)), EOPNOTSUPP);
	}
	expect("create_cq: valid", create_cq(&good_cq, 64, &cq_resp), 0);
	cq = cq_resp.core.cq_handle;
	cq_qid = cq_resp.drv.db_qid;

	/* QP: SQ of 16 x 128 B at 0, RQ of 16 x 64 B at page 1, record on page 2. */
	qp_buf = queue_memory(3 * PAGE);
	struct ferroce_create_qp_req good_qp = {
		.buf_addr = (uintptr_t)qp_buf, .buf_size = 3 * PAGE,
		.sq_log_size = 4, .sq_log_stride = 7,
		.rq_offset = PAGE, .rq_log_size = 4, .rq_log_stride = 6,
		.dbrec_offset = 2 * PAGE,
	};
	struct ferroce_create_qp_req badq;

#define BAD_QP(name, field, value, err)						\
	do {									\
		badq = good_qp;							\
		badq.field = value;						\
		expect("create_qp: " name, create_qp(pd, cq, &badq, &qp_resp), err); \
	} while (0)
	BAD_QP("undefined flag", flags, 1 << 1, EINVAL);
	BAD_QP("defined and undefined flags", flags, FERROCE_CREATE_QP_DB_RECORD | 1 << 5, EINVAL);
	BAD_QP("send stride below 64 B", sq_log_stride, 5, EINVAL);
	BAD_QP("send stride above 1 KiB", sq_log_stride, 11, EINVAL);
	BAD_QP("send stride 2^255", sq_log_stride, 255, EINVAL);
	BAD_QP("send ring of 2^16", sq_log_size, 16, EINVAL);
	BAD_QP("fewer WQEs than asked", sq_log_size, 2, EINVAL);
	BAD_QP("receive ring overlaps send ring", rq_offset, 0, EINVAL);
	BAD_QP("receive ring not page-aligned", rq_offset, PAGE + 64, EINVAL);
	BAD_QP("receive ring past the buffer", rq_offset, 3 * PAGE, EINVAL);
	BAD_QP("receive stride 0", rq_log_stride, 0, EINVAL);
	BAD_QP("record inside the send ring", dbrec_offset, 64, EINVAL);
	BAD_QP("record inside the receive ring", dbrec_offset, PAGE + 512, EINVAL);
	BAD_QP("buffer not mapped", buf_addr, 0x20000, EFAULT);
	expect("create_qp: valid", create_qp(pd, cq, &good_qp, &qp_resp), 0);
	qp_qid = qp_resp.drv.db_qid;

	/* SRQ: 16 x 64 B at 0, record on page 1. */
	srq_buf = queue_memory(2 * PAGE);
	struct ferroce_create_srq_req good_srq = {
		.buf_addr = (uintptr_t)srq_buf, .buf_size = 2 * PAGE, .log_size = 4,
		.log_stride = 6, .dbrec_offset = PAGE,
	};
	struct ferroce_create_srq_req bads;

	bads = good_srq;
	bads.log_stride = 3;
	expect("create_srq: stride below 64 B",
	       create_srq(pd, 16, 0, &bads, &srq_resp, sizeof(srq_resp)), EINVAL);
	bads = good_srq;
	bads.reserved = 1;
	expect("create_srq: reserved field set",
	       create_srq(pd, 16, 0, &bads, &srq_resp, sizeof(srq_resp)), EINVAL);
	expect("create_srq: limit beyond the ring",
	       create_srq(pd, 16, 16, &good_srq, &srq_resp, sizeof(srq_resp)), EINVAL);
	expect("create_srq: more WQEs than the ring",
	       create_srq(pd, 17, 0, &good_srq, &srq_resp, sizeof(srq_resp)), EINVAL);
	expect("create_srq: valid",
	       create_srq(pd, 16, 4, &good_srq, &srq_resp, sizeof(srq_resp)), 0);

	/* The doorbell page: only this context's, and only what was mapped for it. */
	db = mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, uverbs_fd, ctx_resp.drv.db_mmap_offset);
	expect("mmap doorbell page", db == MAP_FAILED ? errno : 0, 0);
	expect("mmap doorbell page privately",
	       mmap(NULL, PAGE, PROT_WRITE, MAP_PRIVATE, uverbs_fd,
		    ctx_resp.drv.db_mmap_offset) == MAP_FAILED ? errno : 0, EINVAL);
	expect("mmap two pages",
	       mmap(NULL, 2 * PAGE, PROT_WRITE, MAP_SHARED, uverbs_fd,
		    ctx_resp.drv.db_mmap_offset) == MAP_FAILED ? errno : 0, EINVAL);
	expect("mmap unknown offset",
	       mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, uverbs_fd,
		    ctx_resp.drv.db_mmap_offset + 64 * PAGE) == MAP_FAILED ? errno : 0, EINVAL);
	if (db == MAP_FAILED)
		return failures;

	/* Each of these must be rejected by the device (bad_doorbells), none may hurt it. */
	db[DB_SQ / 4] = 999u << 16 | 1;			/* a QID that is not mapped */
	db[DB_SQ / 4] = cq_qid << 16 | 1;		/* a CQ's QID on the SQ register */
	db[DB_SQ / 4] = qp_qid << 16 | 0x8000;		/* far past the ring */
	db[DB_CQ_ARM / 4] = 1023u << 16;			/* an unmapped CQ */
	db[0x20 / 4] = 0xdeadbeef;			/* no such register */
	printf("rang 5 doorbells the device must reject\n");
	/* A garbage WQE pushed for the QP (in RESET: the device may not run it). */
	push = (volatile uint64_t *)((volatile uint8_t *)db + ctx_resp.drv.push_window_offset);
	for (i = 0; i < 16; i++)
		push[i] = 0xa5a5a5a5a5a5a5a5ULL;
	db[DB_PUSH / 4] = qp_qid << 16 | 1;
	/* Doorbell records with producer indexes far out of range. */
	*(volatile uint32_t *)(qp_buf + 2 * PAGE) = 0xfff0;
	*(volatile uint32_t *)(qp_buf + 2 * PAGE + 4) = 0x7777;
	db[DB_RQ / 4] = qp_qid << 16 | 0x7777;
	*(volatile uint32_t *)(srq_buf + PAGE) = 0xffff;
	*(volatile uint32_t *)(cq_buf + PAGE) = 0xabcd;
	db[DB_CQ_ARM / 4] = cq_qid << 16;
	printf("pushed a garbage WQE and wrote hostile doorbell records\n");
	/* A flood: the kernel's log and the device's async EQ must both survive it. */
	for (i = 0; i < 20000; i++)
		db[0x20 / 4] = i;
	printf("rang 20000 garbage doorbells\n");
	usleep(200 * 1000);

	printf("%d failed\n", failures);
	/* Exit with everything still created: the kernel cleans up after a crashed process. */
	return failures;
}
