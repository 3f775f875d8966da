// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_fuse: a FUSE file system of one read-only file whose reads wait until they are let go,
 * so that a page-in of that file blocks for as long as a test wants: what a FUSE daemon that
 * does not answer, or a hung network mount, does to the kernel.
 *
 *   ferroce_fuse DIR     mounts on DIR and serves DIR/data (DATA_LEN bytes, byte i = i % 251)
 *
 * It speaks the kernel's FUSE protocol on /dev/fuse itself (<linux/fuse.h>; no libfuse). Each
 * READ is held: the daemon prints "held read OFFSET+SIZE" and answers none until SIGUSR1, then
 * answers those and every later read at once ("released N reads"). It exits when DIR is
 * unmounted. Mount and protocol errors end it with a message and status 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define DATA_LEN (1024 * 1024)
#define DATA_INO 2
#define NAME "data"
/* Room for any request: the kernel's FUSE_MIN_READ_BUFFER and the largest write it sends. */
#define REQUEST_ROOM (128 * 1024 + 4096)
#define MAX_HELD 64

static volatile sig_atomic_t released;

static void release(int sig)
{
	(void)sig;
	released = 1;
}

static int fd;

/* Answers request `unique` with `error` (0 or -errno) and `len` bytes of `out`. */
static int reply(uint64_t unique, int error, const void *out, size_t len)
{
	struct fuse_out_header header = {
		.len = sizeof(header) + (error ? 0 : len), .error = error, .unique = unique,
	};
	struct iovec iov[2] = { { &header, sizeof(header) }, { (void *)out, error ? 0 : len } };

	if (writev(fd, iov, 2) != (ssize_t)header.len) {
		/* The request was interrupted (ENOENT): nobody waits for the answer any more. */
		if (errno == ENOENT)
			return 0;
		perror("ferroce_fuse: writing a reply");
		return -1;
	}
	return 0;
}

static void attr_of(uint64_t ino, struct fuse_attr *attr)
{
	*attr = (struct fuse_attr){ .ino = ino, .nlink = 1, .blksize = 4096 };
	if (ino == FUSE_ROOT_ID) {
		attr->mode = S_IFDIR | 0555;
		attr->nlink = 2;
	} else {
		attr->mode = S_IFREG | 0444;
		attr->size = DATA_LEN;
		attr->blocks = DATA_LEN / 512;
	}
}

struct held {
	uint64_t unique, offset;
	uint32_t size;
};

static int answer_read(const struct held *r)
{
	static uint8_t data[REQUEST_ROOM];
	uint64_t i, end = r->offset + r->size;

	if (r->offset >= DATA_LEN)
		return reply(r->unique, 0, data, 0);
	if (end > DATA_LEN)
		end = DATA_LEN;
	if (end - r->offset > sizeof(data))
		end = r->offset + sizeof(data);
	for (i = r->offset; i < end; i++)
		data[i - r->offset] = (uint8_t)(i % 251);
	return reply(r->unique, 0, data, end - r->offset);
}

/* Serves one request; 1 when the file system is gone. */
static int serve(const uint8_t *req, size_t len, struct held *held, unsigned *nheld)
{
	const struct fuse_in_header *in = (const void *)req;
	const void *arg = req + sizeof(*in);

	if (len < sizeof(*in) || in->len != len) {
		fprintf(stderr, "ferroce_fuse: a request of %zu bytes says %u\n", len,
			len >= sizeof(*in) ? in->len : 0);
		return -1;
	}
	switch (in->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in *init = arg;
		struct fuse_init_out out = {
			.major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION,
			.max_readahead = init->max_readahead, .max_write = 4096, .max_background = 16,
			.congestion_threshold = 12, .time_gran = 1,
		};

		if (init->major != FUSE_KERNEL_VERSION) {
			fprintf(stderr, "ferroce_fuse: kernel protocol %u, not %u\n", init->major,
				FUSE_KERNEL_VERSION);
			return -1;
		}
		return reply(in->unique, 0, &out, sizeof(out));
	}
	case FUSE_LOOKUP: {
		struct fuse_entry_out out = { .nodeid = DATA_INO, .generation = 1,
					      .entry_valid = 3600, .attr_valid = 3600 };

		if (in->nodeid != FUSE_ROOT_ID || strcmp(arg, NAME))
			return reply(in->unique, -ENOENT, NULL, 0);
		attr_of(DATA_INO, &out.attr);
		return reply(in->unique, 0, &out, sizeof(out));
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out out = { .attr_valid = 3600 };

		if (in->nodeid != FUSE_ROOT_ID && in->nodeid != DATA_INO)
			return reply(in->unique, -ENOENT, NULL, 0);
		attr_of(in->nodeid, &out.attr);
		return reply(in->unique, 0, &out, sizeof(out));
	}
	case FUSE_OPEN:
	case FUSE_OPENDIR: {
		struct fuse_open_out out = { .fh = in->nodeid };

		return reply(in->unique, 0, &out, sizeof(out));
	}
	case FUSE_READ: {
		const struct fuse_read_in *read = arg;
		struct held r = { in->unique, read->offset, read->size };

		if (released)
			return answer_read(&r);
		if (*nheld == MAX_HELD) {
			fprintf(stderr, "ferroce_fuse: more than %d reads held\n", MAX_HELD);
			return -1;
		}
		held[(*nheld)++] = r;
		printf("held read %llu+%u\n", (unsigned long long)r.offset, r.size);
		return 0;
	}
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FLUSH:
		return reply(in->unique, 0, NULL, 0);
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		/* No answer: a held read that is interrupted is still answered when let go. */
		return 0;
	case FUSE_DESTROY:
		reply(in->unique, 0, NULL, 0);
		return 1;
	default:
		return reply(in->unique, -ENOSYS, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	static uint8_t req[REQUEST_ROOM];
	struct sigaction sa = { .sa_handler = release };
	struct held held[MAX_HELD];
	unsigned nheld = 0, i;
	sigset_t blocked, waiting;
	char options[128];
	struct pollfd pfd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	/* The signal is taken only while waiting for a request (ppoll below), so that it never
	 * comes between the check for it and the wait. */
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGUSR1);
	if (sigaction(SIGUSR1, &sa, NULL) || sigprocmask(SIG_BLOCK, &blocked, &waiting))
		return perror("ferroce_fuse: signals"), 1;
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return perror("ferroce_fuse: /dev/fuse"), 1;
	snprintf(options, sizeof(options), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
	if (mount("ferroce_fuse", argv[1], "fuse", MS_NOSUID | MS_NODEV | MS_RDONLY, options))
		return perror("ferroce_fuse: mount"), 1;
	printf("mounted %s\n", argv[1]);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	for (;;) {
		ssize_t n;
		int done;

		if (released && nheld) {
			for (i = 0; i < nheld; i++)
				if (answer_read(&held[i]))
					return 1;
			printf("released %u reads\n", nheld);
			nheld = 0;
		}
		if (ppoll(&pfd, 1, NULL, &waiting) < 0) {
			if (errno == EINTR)
				continue;
			return perror("ferroce_fuse: waiting for a request"), 1;
		}
		n = read(fd, req, sizeof(req));
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			/* Unmounted. */
			if (errno == ENODEV)
				break;
			return perror("ferroce_fuse: reading a request"), 1;
		}
		done = serve(req, (size_t)n, held, &nheld);
		if (done < 0)
			return 1;
		if (done)
			break;
	}
	printf("unmounted\n");
	return 0;
}
