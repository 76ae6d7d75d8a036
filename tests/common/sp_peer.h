/*
 * sp_peer.h: a REQ peer that speaks nng's SP protocol over an ipc://
 * socket by hand, so that nothing reads replies on its behalf: the tests
 * of what the daemon does about connections that never read. Header-only.
 */
#ifndef FPREP_TESTS_SP_PEER_H
#define FPREP_TESTS_SP_PEER_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "frameprep/protocol.h"

/* SP_PEER_BODY: the bytes of an sp_peer_frame request (the header and an
 * 8 x 8 BGR8 frame). */
#define SP_PEER_BODY (FPREP_REQUEST_HEADER_SIZE + 8 * 8 * 3)

/* sp_peer_frame: one FRAME request of an 8 x 8 BGR8 frame into an
 * out_side x out_side tensor, framed as nng's ipc transport does (type 1,
 * a 64-bit big-endian length, the REQ request id, the request): bytes is
 * what goes on the socket. */
struct sp_peer_frame {
	fprep_request req;
	uint8_t bytes[1 + 8 + 4 + SP_PEER_BODY];
};

/* sp_peer_frame_init readies *f (a zero frame) for tensors of out_side. */
static inline void sp_peer_frame_init(struct sp_peer_frame *f,
                                      uint32_t out_side)
{
	uint64_t len = 4 + SP_PEER_BODY;

	fprep_request_init(&f->req, FPREP_PIX_BGR8, 8, 8);
	f->req.out_width = out_side;
	f->req.out_height = out_side;
	memset(f->bytes, 0, sizeof(f->bytes));
	f->bytes[0] = 1;
	for (int i = 8; i >= 1; i--, len >>= 8)
		f->bytes[i] = (uint8_t)len;
}

/* sp_peer_frame_id gives f the REQ request id sp_id (its high bit set,
 * as nng's are) and the request id request_id. */
static inline void sp_peer_frame_id(struct sp_peer_frame *f, uint32_t sp_id,
                                    uint64_t request_id)
{
	f->bytes[9] = (uint8_t)(sp_id >> 24);
	f->bytes[10] = (uint8_t)(sp_id >> 16);
	f->bytes[11] = (uint8_t)(sp_id >> 8);
	f->bytes[12] = (uint8_t)sp_id;
	f->req.request_id = request_id;
	fprep_request_encode(&f->req, f->bytes + 13);
}

/* sp_peer_connect connects to the socket of the ipc:// URL url as a REQ
 * peer with a 4 KiB receive buffer and exchanges the SP hello; tries
 * connect up to tries times, 10 ms apart (while the server starts); with
 * timeout_s > 0, sends and receives time out after it. Returns the
 * descriptor, or -1. */
static inline int sp_peer_connect(const char *url, int tries, int timeout_s)
{
	static const uint8_t hello[8] = {0, 'S', 'P', 0, 0x00, 0x30, 0, 0};
	struct timeval tv = {timeout_s, 0};
	struct sockaddr_un a;
	uint8_t peer[8];
	int fd = -1, small = 4096;

	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", url + strlen("ipc://"));
	for (int k = 0; k < tries && fd < 0; k++) {
		if (k > 0)
			usleep(10000);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		REQUIRE(fd >= 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		if (timeout_s > 0) {
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
			           sizeof(tv));
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
			           sizeof(tv));
		}
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0 &&
	    (write(fd, hello, sizeof(hello)) != (ssize_t)sizeof(hello) ||
	     read(fd, peer, sizeof(peer)) != (ssize_t)sizeof(peer))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

#endif /* FPREP_TESTS_SP_PEER_H */
