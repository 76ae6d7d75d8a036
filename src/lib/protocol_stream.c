/*
 * protocol_stream.c: the video stream messages of the wire format
 * (include/frameprep/protocol.h): the STREAM_PACKET, STREAM_FLUSH and
 * STREAM_CLOSE header, the frame record of a stream reply, the rules of a
 * STREAM_OPEN that a FRAME does not have, and a stream reply's payload.
 *
 * A STREAM_OPEN travels in the FRAME header (protocol.c encodes and reads
 * it, then asks this file about its codec fields); the other three have a
 * table of their own here. Like the rest of the codec, the decoder looks at
 * nothing outside buf[0..len) and names field, value and bound in each
 * refusal. protocol.c calls this file, never the other way round.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "protocol_stream.h"
#include "protocol_wire.h"
#include "yuv.h"

/* The rest of a STREAM_PACKET, STREAM_FLUSH or STREAM_CLOSE request
 * header (fprep_stream_request). */
#define PROTO_STREAM(X, R)                                                     \
	X(16, u32, stream_id)                                                  \
	X(20, u32, seq)                                                        \
	X(24, i64, pts)                                                        \
	X(32, u64, packet_size)                                                \
	X(40, u8, output_loc)                                                  \
	R(41, 3)                                                               \
	X(44, u32, out_region)                                                 \
	X(48, u64, out_offset)                                                 \
	X(56, u64, out_capacity)                                               \
	R(64, 64)

/* A frame record of a stream reply (fprep_stream_frame), from its start. */
#define PROTO_STREAM_FRAME(X, R)                                               \
	X(0, i64, pts)                                                         \
	X(8, u32, width)                                                       \
	X(12, u32, height)                                                     \
	X(16, f32, scale_x)                                                    \
	X(20, f32, scale_y)                                                    \
	X(24, f32, pad_x)                                                      \
	X(28, f32, pad_y)

#define PROTO_CHECK_STREAM(off, type, field)                                   \
	PROTO_CHECK(proto_stream_layout, fprep_stream_request, off, type, field)
#define PROTO_CHECK_STREAM_FRAME(off, type, field)                             \
	PROTO_CHECK(proto_stream_frame_layout, fprep_stream_frame, off, type,  \
	            field)

struct proto_stream_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_STREAM(PROTO_LAYOUT, PROTO_LAYOUT_R)
};
struct proto_stream_frame_layout {
	PROTO_STREAM_FRAME(PROTO_LAYOUT, PROTO_LAYOUT_R)
};

PROTO_HEAD(PROTO_CHECK_STREAM, PROTO_SKIP)
PROTO_STREAM(PROTO_CHECK_STREAM, PROTO_SKIP)
PROTO_STREAM_FRAME(PROTO_CHECK_STREAM_FRAME, PROTO_SKIP)
_Static_assert(sizeof(struct proto_stream_layout) == FPREP_REQUEST_HEADER_SIZE,
               "the STREAM table does not end at the request header size");
_Static_assert(sizeof(struct proto_stream_frame_layout) ==
                       FPREP_STREAM_FRAME_SIZE,
               "the stream frame record does not end at its size");

void fprep_stream_request_encode(const fprep_stream_request *req, void *buf)
{
	uint8_t *p = buf;
	const fprep_stream_request *obj = req;

	proto_head_encode(p, FPREP_REQUEST_HEADER_SIZE, FPREP_REQUEST_MAGIC,
	                  obj->version, obj->kind, obj->request_id);
	PROTO_STREAM(PROTO_ENCODE, PROTO_SKIP)
}

void fprep_stream_frame_encode(const fprep_stream_frame *f, void *buf)
{
	uint8_t *p = buf;
	const fprep_stream_frame *obj = f;

	PROTO_STREAM_FRAME(PROTO_ENCODE, PROTO_SKIP)
}

void fprep_stream_frame_decode(const void *buf, fprep_stream_frame *f)
{
	const uint8_t *p = buf;
	fprep_stream_frame *obj = f;

	PROTO_STREAM_FRAME(PROTO_DECODE, PROTO_SKIP)
}

/* stream_output_check checks where a request's tensors go: inline (no
 * region fields), or a PACKET's or FLUSH's to a region (SHM or CUDA) with
 * room for at least one byte. */
static int stream_output_check(const fprep_stream_request *req, char *msg,
                               size_t msg_size)
{
	if (req->output_loc == FPREP_LOC_INLINE)
		return req->out_region != 0 || req->out_offset != 0 ||
		                       req->out_capacity != 0
		               ? fprep__fail(msg, msg_size, FPREP_EINVAL,
		                             "out_region, out_offset and "
		                             "out_capacity with output_loc "
		                             "INLINE: must be 0")
		               : FPREP_OK;
	if (req->output_loc != FPREP_LOC_SHM &&
	    req->output_loc != FPREP_LOC_CUDA)
		return fprep__fail(
		        msg, msg_size, FPREP_EINVAL,
		        "output_loc %u is not INLINE (0), SHM (1) or "
		        "CUDA (2)",
		        req->output_loc);
	if (req->kind == FPREP_KIND_STREAM_CLOSE)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "output_loc %u with STREAM_CLOSE: must be "
		                   "INLINE (0)",
		                   req->output_loc);
	if (req->out_region == 0)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "out_region is 0 with output_loc %u",
		                   req->output_loc);
	if (req->out_capacity == 0)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "out_capacity is 0 with output_loc %u",
		                   req->output_loc);
	return FPREP_OK;
}

int fprep_stream_request_decode(const void *buf, size_t len,
                                const fprep_limits *lim,
                                fprep_stream_request *req, char *msg,
                                size_t msg_size)
{
	const uint8_t *p = buf;
	fprep_stream_request *obj = req;
	uint64_t payload;
	int err;

	memset(req, 0, sizeof(*req));
	err = proto_read_head(p, len, &req->version, &req->kind,
	                      &req->request_id, msg, msg_size);
	if (err != FPREP_OK)
		return err;
	if (req->kind != FPREP_KIND_STREAM_PACKET &&
	    req->kind != FPREP_KIND_STREAM_FLUSH &&
	    req->kind != FPREP_KIND_STREAM_CLOSE)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "kind %u is not STREAM_PACKET (11), "
		                   "STREAM_FLUSH (12) or STREAM_CLOSE (13)",
		                   req->kind);
	PROTO_STREAM(PROTO_DECODE, PROTO_SKIP)
	payload = len - FPREP_REQUEST_HEADER_SIZE;
	if (req->stream_id == 0)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "stream_id is 0");
	if (req->packet_size != payload)
		return fprep__fail(msg, msg_size, FPREP_EPROTO,
		                   "inline payload %" PRIu64
		                   " bytes != packet_size %" PRIu64,
		                   payload, req->packet_size);
	err = stream_output_check(req, msg, msg_size);
	if (err != FPREP_OK)
		return err;
	if (req->kind != FPREP_KIND_STREAM_PACKET)
		return req->packet_size != 0 || req->pts != 0
		               ? fprep__fail(msg, msg_size, FPREP_EINVAL,
		                             "packet_size %" PRIu64
		                             " and pts %" PRId64
		                             " with kind %u: must be 0",
		                             req->packet_size, req->pts,
		                             req->kind)
		               : FPREP_OK;
	if (req->packet_size == 0)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "packet_size is 0");
	if (req->packet_size > lim->max_packet_bytes)
		return fprep__fail(msg, msg_size, FPREP_ELIMIT,
		                   "packet_size %" PRIu64
		                   " exceeds max_packet_bytes %" PRIu64,
		                   req->packet_size, lim->max_packet_bytes);
	return FPREP_OK;
}

int fprep__stream_open_check(const fprep_request *r, const fprep_limits *lim,
                             uint64_t payload, fprep_request *frame,
                             fprep_limits *frame_lim, char *msg, size_t n)
{

	if (r->src_format != FPREP_PIX_H264 && r->src_format != FPREP_PIX_HEVC)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "src_format %u is not a codec: H264 (10) or "
		                   "HEVC (11)",
		                   r->src_format);
	if (r->src_width != 0 || r->src_height != 0)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "src_width %u x src_height %u: must be 0 "
		                   "(the bitstream gives the size)",
		                   r->src_width, r->src_height);
	if (r->input_loc != FPREP_LOC_INLINE ||
	    r->output_loc != FPREP_LOC_INLINE || r->shm_reply)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "input_loc %u, output_loc %u%s: a stream's "
		                   "are inline (0) without SHM_REPLY",
		                   r->input_loc, r->output_loc,
		                   r->shm_reply ? " with SHM_REPLY" : "");
	if (r->channel_order == FPREP_ORDER_GRAY)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "channel_order GRAY with a stream: RGB (1) or "
		        "BGR (2)");
	if (r->input_size > lim->max_packet_bytes)
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "input_size %" PRIu64 " (parameter sets) "
		                   "exceeds max_packet_bytes %" PRIu64,
		                   r->input_size, lim->max_packet_bytes);
	if (payload != r->input_size)
		return fprep__fail(msg, n, FPREP_EPROTO,
		                   "inline payload %" PRIu64
		                   " bytes != input_size %" PRIu64,
		                   payload, r->input_size);
	*frame = *r;
	frame->kind = FPREP_KIND_FRAME;
	frame->src_format = FPREP_PIX_I420;
	frame->src_width = 2;
	frame->src_height = 2;
	frame->src_stride = 2;
	fprep__yuv_default_planes(frame);
	*frame_lim = *lim;
	frame_lim->max_width = frame_lim->max_height = UINT32_MAX;
	frame_lim->max_frame_bytes = UINT64_MAX;
	return FPREP_OK;
}

int fprep__stream_reply_check(const fprep_reply_header *rep)
{
	uint64_t want = (uint64_t)rep->shape[0] * FPREP_STREAM_FRAME_SIZE;

	/* Tensors in a region (SHM or CUDA): only the records travel. */
	if (rep->output_loc != FPREP_LOC_INLINE &&
	    rep->output_loc != FPREP_LOC_SHM &&
	    rep->output_loc != FPREP_LOC_CUDA)
		return FPREP_EPROTO;
	if ((rep->output_loc == FPREP_LOC_INLINE &&
	     __builtin_add_overflow(want, rep->tensor_size, &want)) ||
	    rep->payload_size != want)
		return FPREP_EPROTO;
	return FPREP_OK;
}
