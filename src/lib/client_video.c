/*
 * client_video.c: video streams on a client (frameprep.h, fprep_stream_*;
 * protocol.h, "Video streams"). A stream is its id and its client: every
 * call is one request through nng (video_exchange), answered by
 * one reply, so a packet's frames come back with its reply;
 * fprep_stream_submit sends a packet on a context of its own
 * (fprep__client_submit_msg) and leaves the wait to fprep_pending_wait.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_conn.h"
#include "client_internal.h"
#include "frameprep/frameprep.h"

struct fprep_stream {
	fprep_client *client;
	uint32_t id;
	uint32_t seq; /* the number of its last request sent (protocol.h) */
	/* Where the tensors of its next PACKET and FLUSH go
	 * (fprep_stream_set_output): output_loc INLINE, or a region's. */
	uint8_t output_loc;
	uint32_t out_region;
	uint64_t out_offset, out_capacity;
};

/* video_set_id writes the client's next request id into msg's header
 * and returns it. */
static uint64_t video_set_id(fprep_client *c, nng_msg *msg)
{
	uint64_t id = atomic_fetch_add(&c->next_id, 1);

	/* The request id at offset 8 of the header (protocol.h). */
	for (int i = 0; i < 8; i++)
		((uint8_t *)nng_msg_body(msg))[8 + i] =
		        (uint8_t)(id >> (8 * i));
	return id;
}

/* video_exchange sends msg, a whole STREAM_* request of kind kind (taken,
 * also on failure), with the next request id written into its header,
 * through nng within the client's timeout, and stores the checked reply
 * in *res (an error reply too: its status is in res->header.status). */
static int video_exchange(fprep_client *c, nng_msg *msg, uint16_t kind,
                          fprep_result *res)
{
	uint64_t id = video_set_id(c, msg);

	memset(res, 0, sizeof(*res));
	fprep__client_error_clear(c);
	return fprep__client_exchange(c, msg, NULL, id, kind,
	                              fprep__client_deadline(c), res);
}

/* video_msg allocates a request of FPREP_REQUEST_HEADER_SIZE plus size
 * bytes, the payload copied from data. */
static nng_msg *video_msg(const void *data, size_t size)
{
	nng_msg *msg;

	if (nng_msg_alloc(&msg, FPREP_REQUEST_HEADER_SIZE + size) != 0)
		return NULL;
	if (size > 0)
		memcpy((uint8_t *)nng_msg_body(msg) + FPREP_REQUEST_HEADER_SIZE,
		       data, size);
	return msg;
}

int fprep_stream_open(fprep_client *client, const fprep_request *spec,
                      const void *params, size_t params_len, fprep_stream **sp)
{
	fprep_request req = *spec;
	fprep_stream *st;
	fprep_result res;
	nng_msg *msg;
	int err;

	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_STREAM_OPEN;
	/* The source is the stream's: its frames' size comes from the
	 * decoder. */
	req.src_width = req.src_height = req.src_stride = 0;
	req.uv_stride = 0;
	req.u_offset = req.v_offset = 0;
	req.input_size = params_len;
	if ((msg = video_msg(params, params_len)) == NULL)
		return fprep__client_set_error(client, FPREP_ENOMEM,
		                               "no memory for STREAM_OPEN");
	fprep_request_encode(&req, nng_msg_body(msg));
	err = video_exchange(client, msg, FPREP_KIND_STREAM_OPEN, &res);
	if (err)
		return err;
	err = (int)res.header.status;
	if (err == FPREP_OK) {
		st = calloc(1, sizeof(*st));
		if (st == NULL)
			err = fprep__client_set_error(client, FPREP_ENOMEM,
			                              "no memory for a stream");
		else {
			st->client = client;
			st->id = res.header.region_id;
			*sp = st;
		}
	}
	fprep_result_fini(&res);
	return err;
}

/* video_packet_msg makes a STREAM_* request of kind on st with size
 * bytes of packet, numbered after st's last (st->seq + 1), with the next
 * request id in *id; NULL after recording FPREP_ENOMEM. */
static nng_msg *video_packet_msg(fprep_stream *st, uint16_t kind,
                                 const void *packet, size_t size, int64_t pts,
                                 uint64_t *id)
{
	fprep_stream_request req = {
	        .version = FPREP_PROTOCOL_VERSION,
	        .kind = kind,
	        .stream_id = st->id,
	        .seq = st->seq + 1,
	        .pts = pts,
	        .packet_size = size,
	};
	if (kind != FPREP_KIND_STREAM_CLOSE) {
		req.output_loc = st->output_loc;
		req.out_region = st->out_region;
		req.out_offset = st->out_offset;
		req.out_capacity = st->out_capacity;
	}
	nng_msg *msg = video_msg(packet, size);

	if (msg == NULL) {
		fprep__client_set_error(st->client, FPREP_ENOMEM,
		                        "no memory for a packet");
		return NULL;
	}
	fprep_stream_request_encode(&req, nng_msg_body(msg));
	*id = video_set_id(st->client, msg);
	return msg;
}

/* video_submit sends a STREAM_* request of kind on st with size bytes
 * of packet, the stream's next number, without waiting (*pp: as for
 * fprep_client_submit). The number is spent only once the request is
 * handed to nng, so that the daemon never waits for one not sent. */
static int video_submit(fprep_stream *st, uint16_t kind, const void *packet,
                        size_t size, int64_t pts, fprep_done_fn cb, void *arg,
                        fprep_pending **pp)
{
	uint64_t id;
	nng_msg *msg;
	int err;

	*pp = NULL;
	fprep__client_error_clear(st->client);
	if (fprep__client_forked(st->client))
		return fprep__client_forked_error(st->client);
	msg = video_packet_msg(st, kind, packet, size, pts, &id);
	if (msg == NULL)
		return FPREP_ENOMEM;
	err = fprep__client_submit_msg(st->client, msg, id, kind, cb, arg, pp);
	if (err == 0)
		st->seq++;
	return err;
}

/* video_request sends a STREAM_* request of kind on st with size bytes
 * of packet (video_submit), and waits for its reply. */
static int video_request(fprep_stream *st, uint16_t kind, const void *packet,
                         size_t size, int64_t pts, fprep_result *res)
{
	fprep_pending *p;
	int err = video_submit(st, kind, packet, size, pts, NULL, NULL, &p);

	memset(res, 0, sizeof(*res));
	return err ? err : fprep_pending_wait(p, res);
}

int fprep_stream_submit(fprep_stream *st, const void *packet, size_t size,
                        int64_t pts, fprep_done_fn cb, void *arg,
                        fprep_pending **pp)
{
	*pp = NULL;
	if (size == 0 || packet == NULL)
		return fprep__client_set_error(st->client, FPREP_EINVAL,
		                               "an empty packet");
	return video_submit(st, FPREP_KIND_STREAM_PACKET, packet, size, pts, cb,
	                    arg, pp);
}

int fprep_stream_send(fprep_stream *st, const void *packet, size_t size,
                      int64_t pts, fprep_result *res)
{
	memset(res, 0, sizeof(*res));
	if (size == 0 || packet == NULL)
		return fprep__client_set_error(st->client, FPREP_EINVAL,
		                               "an empty packet");
	return video_request(st, FPREP_KIND_STREAM_PACKET, packet, size, pts,
	                     res);
}

int fprep_stream_flush(fprep_stream *st, fprep_result *res)
{
	return video_request(st, FPREP_KIND_STREAM_FLUSH, NULL, 0, 0, res);
}

int fprep_stream_set_output(fprep_stream *st, const fprep_region *out,
                            uint64_t offset, uint64_t capacity)
{
	if (out == NULL)
		return fprep_stream_set_output_id(st, FPREP_LOC_INLINE, 0, 0,
		                                  0);
	if (capacity == 0 || offset > fprep_region_size(out) ||
	    capacity > fprep_region_size(out) - offset) {
		char why[128];

		snprintf(why, sizeof(why),
		         "stream output: %" PRIu64 " bytes at offset %" PRIu64
		         " of a region of %zu bytes",
		         capacity, offset, fprep_region_size(out));
		return fprep__client_set_error(st->client, FPREP_EINVAL, why);
	}
	return fprep_stream_set_output_id(st, fprep_region_location(out),
	                                  fprep_region_id(out), offset,
	                                  capacity);
}

int fprep_stream_set_output_id(fprep_stream *st, int location, uint32_t region,
                               uint64_t offset, uint64_t capacity)
{
	if (location == FPREP_LOC_INLINE) {
		st->output_loc = FPREP_LOC_INLINE;
		st->out_region = 0;
		st->out_offset = st->out_capacity = 0;
		return FPREP_OK;
	}
	if ((location != FPREP_LOC_SHM && location != FPREP_LOC_CUDA) ||
	    capacity == 0) {
		char why[128];

		snprintf(why, sizeof(why),
		         "stream output: location %d, capacity %" PRIu64
		         " (SHM or CUDA, capacity > 0)",
		         location, capacity);
		return fprep__client_set_error(st->client, FPREP_EINVAL, why);
	}
	st->output_loc = (uint8_t)location;
	st->out_region = region;
	st->out_offset = offset;
	st->out_capacity = capacity;
	return FPREP_OK;
}

int fprep_stream_recv(const fprep_result *res, uint32_t k,
                      fprep_stream_frame *frame, const void **tensor)
{
	const fprep_reply_header *h = &res->header;
	uint64_t one;

	/* Tensors in a region: only the records are in the payload. */
	uint64_t inline_bytes =
	        h->output_loc == FPREP_LOC_INLINE ? h->tensor_size : 0;

	if ((h->kind != FPREP_KIND_STREAM_PACKET &&
	     h->kind != FPREP_KIND_STREAM_FLUSH) ||
	    h->status != FPREP_OK || k >= h->shape[0] ||
	    inline_bytes + (uint64_t)h->shape[0] * FPREP_STREAM_FRAME_SIZE !=
	            res->payload_size)
		return FPREP_EINVAL;
	one = h->tensor_size / h->shape[0];
	fprep_stream_frame_decode((const uint8_t *)res->payload + inline_bytes +
	                                  (size_t)k * FPREP_STREAM_FRAME_SIZE,
	                          frame);
	if (tensor != NULL)
		*tensor = inline_bytes > 0
		                  ? (const uint8_t *)res->payload + one * k
		                  : NULL;
	return FPREP_OK;
}

int fprep_stream_close(fprep_stream *st)
{
	fprep_result res;
	int err = video_request(st, FPREP_KIND_STREAM_CLOSE, NULL, 0, 0, &res);

	if (err == 0)
		err = (int)res.header.status;
	fprep_result_fini(&res);
	free(st);
	return err;
}

void fprep_stream_drop(fprep_stream *st)
{
	free(st);
}

uint32_t fprep_stream_id(const fprep_stream *st)
{
	return st->id;
}
