/*
 * protocol.c: encoder and validating decoder of the frameprep wire format
 * (version 1, see include/frameprep/protocol.h).
 *
 * This file holds the FRAME (ECHO, ROIS, BATCH, STREAM_OPEN), REGISTER
 * and reply headers and the request dispatch; the stream messages live in
 * protocol_stream.c, the byte access and the table machinery both use in
 * protocol_wire.h. The reads and writes are generated from one table per
 * header, which the compiler checks against the header sizes. The request
 * decoder is
 * the daemon's first line of defence: it looks at nothing outside buf[0..len),
 * checks every size from the peer with overflow-checked 64-bit arithmetic
 * before anything is allocated, and explains each refusal with the field, the
 * value and the bound.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "ops.h"
#include "protocol_stream.h"
#include "protocol_wire.h"
#include "yuv.h"

/* The rest of a FRAME or ECHO request header (fprep_request). */
#define PROTO_FRAME(X, R)                                                      \
	X(16, u16, src_format)                                                 \
	X(18, u8, yuv_matrix)                                                  \
	X(19, u8, yuv_range)                                                   \
	X(20, u32, src_width)                                                  \
	X(24, u32, src_height)                                                 \
	X(28, u32, src_stride)                                                 \
	X(32, u32, out_width)                                                  \
	X(36, u32, out_height)                                                 \
	X(40, u8, resize)                                                      \
	X(41, u8, channel_order)                                               \
	X(42, u8, dtype)                                                       \
	X(43, u8, layout)                                                      \
	X(44, f32, pad_value)                                                  \
	X(48, f32, scale)                                                      \
	X(52, f32x3, mean)                                                     \
	X(64, f32x3, std)                                                      \
	X(76, u8, input_loc)                                                   \
	X(77, u8, output_loc)                                                  \
	X(78, u16, uv_stride)                                                  \
	X(80, u32, in_region)                                                  \
	X(84, u32, out_region)                                                 \
	X(88, u64, in_offset)                                                  \
	X(96, u64, out_offset)                                                 \
	X(104, u64, out_capacity)                                              \
	X(112, u64, input_size)                                                \
	X(120, u32, u_offset)                                                  \
	X(124, u32, v_offset)

/* The rest of a REGISTER request header (proto_register); the bytes after
 * the name are reserved. */
#define PROTO_REGISTER(X, R)                                                   \
	X(16, u64, region_size)                                                \
	X(24, u32, name_len)                                                   \
	R(28, 4)                                                               \
	X(32, char64, name)

/* The rest of a REGISTER_CUDA request header (fprep_register_request). */
#define PROTO_REGISTER_CUDA(X, R)                                              \
	X(16, u64, region_size)                                                \
	X(24, u64, cuda_offset)                                                \
	X(32, u8x64, cuda_handle)                                              \
	X(96, u8x16, cuda_uuid)                                                \
	R(112, 16)

/* The rest of an UNREGISTER request header (fprep_register_request); the
 * bytes after region_id are reserved. */
#define PROTO_UNREGISTER(X, R) X(16, u32, region_id)

/* The rest of a DOORBELL request header (fprep_register_request); the
 * bytes after doorbell_offset are reserved. */
#define PROTO_DOORBELL(X, R)                                                   \
	X(16, u32, region_id)                                                  \
	X(20, u32, doorbell_entries)                                           \
	X(24, u64, doorbell_offset)

/* The rest of a reply header (fprep_reply_header). */
#define PROTO_REPLY(X, R)                                                      \
	X(16, u32, status)                                                     \
	X(20, u8, dtype)                                                       \
	X(21, u8, layout)                                                      \
	X(22, u8, ndim)                                                        \
	X(23, u8, output_loc)                                                  \
	X(24, u32x4, shape)                                                    \
	X(40, f32, scale_x)                                                    \
	X(44, f32, scale_y)                                                    \
	X(48, f32, pad_x)                                                      \
	X(52, f32, pad_y)                                                      \
	X(56, u32, t_queue_us)                                                 \
	X(60, u32, t_compute_us)                                               \
	X(64, u32, t_h2d_us)                                                   \
	X(68, u32, t_kernel_us)                                                \
	X(72, u32, t_d2h_us)                                                   \
	X(76, u32, t_total_us)                                                 \
	X(80, u64, payload_size)                                               \
	X(88, u64, tensor_size)                                                \
	X(96, u32, region_id)                                                  \
	X(100, u32, flags)                                                     \
	X(104, char144, message)                                               \
	X(248, u16, decoded_width)                                             \
	X(250, u16, decoded_height)                                            \
	X(252, u32, t_decode_us)

/* proto_register: the REGISTER fields as the table names them. */
struct proto_register {
	uint64_t region_size;
	uint32_t name_len;
	char name[FPREP_REGION_NAME_MAX + 1];
};

#define PROTO_CHECK_FRAME(off, type, field)                                    \
	PROTO_CHECK(proto_frame_layout, fprep_request, off, type, field)
#define PROTO_CHECK_REGISTER(off, type, field)                                 \
	PROTO_CHECK(proto_register_layout, struct proto_register, off, type,   \
	            field)
#define PROTO_CHECK_REGISTER_CUDA(off, type, field)                            \
	PROTO_CHECK(proto_register_cuda_layout, fprep_register_request, off,   \
	            type, field)
#define PROTO_CHECK_UNREGISTER(off, type, field)                               \
	PROTO_CHECK(proto_unregister_layout, fprep_register_request, off,      \
	            type, field)
#define PROTO_CHECK_DOORBELL(off, type, field)                                 \
	PROTO_CHECK(proto_doorbell_layout, fprep_register_request, off, type,  \
	            field)
#define PROTO_CHECK_REPLY(off, type, field)                                    \
	PROTO_CHECK(proto_reply_layout, fprep_reply_header, off, type, field)

struct proto_frame_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_FRAME(PROTO_LAYOUT, PROTO_LAYOUT_R)
};
struct proto_register_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_REGISTER(PROTO_LAYOUT, PROTO_LAYOUT_R)
};
struct proto_register_cuda_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_REGISTER_CUDA(PROTO_LAYOUT, PROTO_LAYOUT_R)
};
struct proto_unregister_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_UNREGISTER(PROTO_LAYOUT, PROTO_LAYOUT_R)
};
struct proto_doorbell_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_DOORBELL(PROTO_LAYOUT, PROTO_LAYOUT_R)
};
struct proto_reply_layout {
	uint8_t magic[4];
	PROTO_HEAD(PROTO_LAYOUT, PROTO_LAYOUT_R)
	PROTO_REPLY(PROTO_LAYOUT, PROTO_LAYOUT_R)
};

PROTO_HEAD(PROTO_CHECK_FRAME, PROTO_SKIP)
PROTO_FRAME(PROTO_CHECK_FRAME, PROTO_SKIP)
PROTO_HEAD(PROTO_CHECK_REPLY, PROTO_SKIP)
PROTO_REPLY(PROTO_CHECK_REPLY, PROTO_SKIP)
PROTO_REGISTER(PROTO_CHECK_REGISTER, PROTO_SKIP)
PROTO_UNREGISTER(PROTO_CHECK_UNREGISTER, PROTO_SKIP)
PROTO_REGISTER_CUDA(PROTO_CHECK_REGISTER_CUDA, PROTO_SKIP)
PROTO_DOORBELL(PROTO_CHECK_DOORBELL, PROTO_SKIP)
_Static_assert(sizeof(struct proto_register_cuda_layout) ==
                       FPREP_REQUEST_HEADER_SIZE,
               "the REGISTER_CUDA table does not end at the header size");
_Static_assert(sizeof(struct proto_frame_layout) == FPREP_REQUEST_HEADER_SIZE,
               "the FRAME table does not end at the request header size");
_Static_assert(sizeof(struct proto_reply_layout) == FPREP_REPLY_HEADER_SIZE,
               "the reply table does not end at the reply header size");
_Static_assert(sizeof(struct proto_register_layout) <=
                       FPREP_REQUEST_HEADER_SIZE,
               "the REGISTER table exceeds the request header size");
_Static_assert(sizeof(struct proto_unregister_layout) <=
                       FPREP_REQUEST_HEADER_SIZE,
               "the UNREGISTER table exceeds the request header size");
_Static_assert(sizeof(struct proto_doorbell_layout) <=
                       FPREP_REQUEST_HEADER_SIZE,
               "the DOORBELL table exceeds the request header size");

uint32_t fprep_pixel_bytes(uint16_t format)
{
	switch (format) {
	case FPREP_PIX_BGR8:
	case FPREP_PIX_RGB8:
		return 3;
	case FPREP_PIX_BGRA8:
	case FPREP_PIX_RGBA8:
		return 4;
	case FPREP_PIX_GRAY8:
	case FPREP_PIX_NV12:
	case FPREP_PIX_I420:
	case FPREP_PIX_JPEG:
		return 1;
	case FPREP_PIX_YUYV:
		return 2;
	}
	return 0;
}

/* proto_dtype_bytes: bytes per tensor element, 0 for an unknown dtype. */
static uint32_t proto_dtype_bytes(uint8_t dtype)
{
	switch (dtype) {
	case FPREP_DTYPE_F32:
		return 4;
	case FPREP_DTYPE_F16:
		return 2;
	case FPREP_DTYPE_U8:
		return 1;
	}
	return 0;
}

const char *fprep_dtype_typestr(uint8_t dtype)
{
	switch (dtype) {
	case FPREP_DTYPE_F32:
		return "<f4";
	case FPREP_DTYPE_F16:
		return "<f2";
	case FPREP_DTYPE_U8:
		return "|u1";
	}
	return NULL;
}

void fprep_request_init(fprep_request *req, uint16_t src_format,
                        uint32_t src_width, uint32_t src_height)
{
	uint32_t bpp = fprep_pixel_bytes(src_format);

	memset(req, 0, sizeof(*req));
	req->version = FPREP_PROTOCOL_VERSION;
	req->kind = FPREP_KIND_FRAME;
	req->src_format = src_format;
	req->src_width = src_width;
	req->src_height = src_height;
	req->src_stride = src_width * bpp;
	req->out_width = 640;
	req->out_height = 640;
	req->resize = FPREP_RESIZE_LETTERBOX;
	req->channel_order = FPREP_ORDER_RGB;
	req->dtype = FPREP_DTYPE_F32;
	req->layout = FPREP_LAYOUT_NCHW;
	req->pad_value = 114.0f;
	req->scale = 1.0f / 255.0f;
	for (int c = 0; c < 3; c++) {
		req->mean[c] = 0.0f;
		req->std[c] = 1.0f;
	}
	req->input_loc = FPREP_LOC_INLINE;
	req->output_loc = FPREP_LOC_INLINE;
	req->input_size = (uint64_t)req->src_stride * src_height;
	fprep__yuv_default_planes(req);
	if (src_format == FPREP_PIX_JPEG)
		req->src_stride = 0, req->input_size = 0;
}

/* proto_register_encode writes the REGISTER fields of *obj. */
static void proto_register_encode(uint8_t *p, const struct proto_register *obj)
{
	PROTO_REGISTER(PROTO_ENCODE, PROTO_SKIP)
}

void fprep_request_encode(const fprep_request *req, void *buf)
{
	uint8_t *p = buf;
	const fprep_request *obj = req;

	proto_head_encode(p, FPREP_REQUEST_HEADER_SIZE, FPREP_REQUEST_MAGIC,
	                  obj->version, obj->kind, obj->request_id);
	if (req->kind == FPREP_KIND_FRAME || req->kind == FPREP_KIND_ECHO ||
	    req->kind == FPREP_KIND_ROIS || req->kind == FPREP_KIND_BATCH ||
	    req->kind == FPREP_KIND_STREAM_OPEN) {
		PROTO_FRAME(PROTO_ENCODE, PROTO_SKIP)
		if (req->shm_reply)
			p[77] |= FPREP_LOC_F_SHM_REPLY;
		p[40] |=
		        (uint8_t)(req->rounding << FPREP_RESIZE_ROUNDING_SHIFT);
	}
}

void fprep_stream_request_init(fprep_request *req, uint16_t codec)
{
	fprep_request_init(req, FPREP_PIX_I420, 2, 2);
	req->kind = FPREP_KIND_STREAM_OPEN;
	req->src_format = codec;
	req->src_width = 0;
	req->src_height = 0;
	req->src_stride = 0;
	req->uv_stride = 0;
	req->u_offset = 0;
	req->v_offset = 0;
	req->input_size = 0;
}

void fprep_register_request_encode(const fprep_register_request *req, void *buf)
{
	uint8_t *p = buf;
	const fprep_register_request *obj = req;
	struct proto_register reg;

	proto_head_encode(p, FPREP_REQUEST_HEADER_SIZE, FPREP_REQUEST_MAGIC,
	                  obj->version, obj->kind, obj->request_id);
	if (req->kind == FPREP_KIND_UNREGISTER) {
		PROTO_UNREGISTER(PROTO_ENCODE, PROTO_SKIP)
		return;
	}
	if (req->kind == FPREP_KIND_REGISTER_CUDA) {
		PROTO_REGISTER_CUDA(PROTO_ENCODE, PROTO_SKIP)
		return;
	}
	if (req->kind == FPREP_KIND_DOORBELL) {
		PROTO_DOORBELL(PROTO_ENCODE, PROTO_SKIP)
		return;
	}
	memset(&reg, 0, sizeof(reg));
	reg.region_size = req->region_size;
	reg.name_len =
	        (uint32_t)strnlen(req->region_name, FPREP_REGION_NAME_MAX);
	memcpy(reg.name, req->region_name, reg.name_len);
	proto_register_encode(p, &reg);
}

/* The element table (protocol.h, "ROIS and BATCH requests"): a record's
 * fields at their offsets. BOX and AFFINE share one layout, FRAME has its
 * own. */
#define PROTO_ELEM_TYPE   0
#define PROTO_ELEM_RESIZE 1
#define PROTO_ELEM_V      4
#define PROTO_ELEM_OFFSET 8

void fprep_elements_encode(const fprep_element *elements, uint32_t n, void *buf)
{
	uint8_t *p = buf, *e;

	memset(p, 0, FPREP_TABLE_HEADER_SIZE + (size_t)n * FPREP_ELEMENT_SIZE);
	proto_put32(p, n);
	for (uint32_t k = 0; k < n; k++) {
		e = p + FPREP_TABLE_HEADER_SIZE +
		    (size_t)k * FPREP_ELEMENT_SIZE;
		e[PROTO_ELEM_TYPE] = elements[k].type;
		if (elements[k].type == FPREP_ELEM_FRAME) {
			proto_put64(e + PROTO_ELEM_OFFSET, elements[k].offset);
			continue;
		}
		e[PROTO_ELEM_RESIZE] = elements[k].resize;
		proto_putf_array(e + PROTO_ELEM_V, elements[k].v, 6);
	}
}

void fprep_element_get(const void *table, uint32_t k, fprep_element *el)
{
	const uint8_t *e = (const uint8_t *)table + FPREP_TABLE_HEADER_SIZE +
	                   (size_t)k * FPREP_ELEMENT_SIZE;

	memset(el, 0, sizeof(*el));
	el->type = e[PROTO_ELEM_TYPE];
	if (el->type == FPREP_ELEM_FRAME) {
		el->offset = proto_get64(e + PROTO_ELEM_OFFSET);
		return;
	}
	el->resize = e[PROTO_ELEM_RESIZE];
	proto_getf_array(e + PROTO_ELEM_V, el->v, 6);
}

/* The reply's transform record, in the order of its fields. */
void fprep_element_xf_encode(const fprep_element_xf *xf, void *buf)
{
	uint8_t *p = buf;

	proto_put32(p, xf->resized_w);
	proto_put32(p + 4, xf->resized_h);
	proto_put32(p + 8, xf->pad_x);
	proto_put32(p + 12, xf->pad_y);
	proto_putf(p + 16, xf->scale_x);
	proto_putf(p + 20, xf->scale_y);
	proto_putf(p + 24, xf->origin_x);
	proto_putf(p + 28, xf->origin_y);
}

void fprep_element_xf_decode(const void *buf, fprep_element_xf *xf)
{
	const uint8_t *p = buf;

	xf->resized_w = proto_get32(p);
	xf->resized_h = proto_get32(p + 4);
	xf->pad_x = proto_get32(p + 8);
	xf->pad_y = proto_get32(p + 12);
	xf->scale_x = proto_getf(p + 16);
	xf->scale_y = proto_getf(p + 20);
	xf->origin_x = proto_getf(p + 24);
	xf->origin_y = proto_getf(p + 28);
}

size_t fprep_request_payload_offset(const fprep_request *req)
{
	if (req->kind != FPREP_KIND_ROIS && req->kind != FPREP_KIND_BATCH)
		return FPREP_REQUEST_HEADER_SIZE;
	return FPREP_REQUEST_HEADER_SIZE + FPREP_TABLE_HEADER_SIZE +
	       (size_t)req->elements * FPREP_ELEMENT_SIZE;
}

/* proto_check_enums checks every enumerated field of a FRAME/ECHO request,
 * including the pairings that the enums alone do not express. */
static int proto_check_enums(const fprep_request *r, char *msg, size_t n)
{
	if (fprep_pixel_bytes(r->src_format) == 0)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "src_format %u is not a pixel format (1..9)",
		                   r->src_format);
	if (r->resize != FPREP_RESIZE_LETTERBOX &&
	    r->resize != FPREP_RESIZE_STRETCH)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "resize %u is not a resize mode (1..2)",
		                   r->resize);
	if (r->rounding > FPREP_ROUNDING_OPENCV)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "rounding %u is not a rounding mode (0..1)",
		                   r->rounding);
	if (r->channel_order < FPREP_ORDER_RGB ||
	    r->channel_order > FPREP_ORDER_GRAY)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "channel_order %u is not a channel order (1..3)",
		        r->channel_order);
	if (r->channel_order == FPREP_ORDER_GRAY &&
	    r->src_format != FPREP_PIX_GRAY8 && r->src_format != FPREP_PIX_JPEG)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "channel_order GRAY requires src_format GRAY8 "
		        "(5) or JPEG (9), got %u",
		        r->src_format);
	if (proto_dtype_bytes(r->dtype) == 0)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "dtype %u is not a dtype (1..3)", r->dtype);
	if (fprep__yuv_is_yuv(r->src_format) &&
	    r->yuv_matrix > FPREP_MATRIX_BT2020)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "yuv_matrix %u is not a colour matrix (0..3)",
		        r->yuv_matrix);
	if (fprep__yuv_is_yuv(r->src_format) && r->yuv_range > FPREP_RANGE_FULL)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "yuv_range %u is not a range (0..2)",
		                   r->yuv_range);
	if (r->layout != FPREP_LAYOUT_NCHW && r->layout != FPREP_LAYOUT_NHWC)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "layout %u is not a layout (1..2)",
		                   r->layout);
	if (r->input_loc > FPREP_LOC_CUDA)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "input_loc %u is not a location (0..2)",
		                   r->input_loc);
	if (r->output_loc > FPREP_LOC_CUDA)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "output_loc %u is not a location (0..2)",
		                   r->output_loc);
	return FPREP_OK;
}

/* proto_split_flags moves the flags that share a byte with a field into
 * fields of their own: SHM_REPLY (output_loc bit 7) and the rounding
 * (resize bits 4-7). */
static void proto_split_flags(fprep_request *req)
{
	req->shm_reply = (req->output_loc & FPREP_LOC_F_SHM_REPLY) != 0;
	req->output_loc &= (uint8_t)~FPREP_LOC_F_SHM_REPLY;
	req->rounding = (uint8_t)(req->resize >> FPREP_RESIZE_ROUNDING_SHIFT);
	req->resize &= (uint8_t)((1u << FPREP_RESIZE_ROUNDING_SHIFT) - 1u);
}

/* proto_check_shm_reply checks a request that asks for its reply in the
 * output region: SHM output with room for the tensor and the reply header,
 * the header 8-byte aligned (its request_id is stored atomically). */
static int proto_check_shm_reply(const fprep_request *r, uint64_t tensor,
                                 char *msg, size_t n)
{
	if (r->output_loc != FPREP_LOC_SHM)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "output_loc flag SHM_REPLY needs output_loc "
		                   "SHM (1), got %u",
		                   r->output_loc);
	if (r->out_capacity - tensor < FPREP_REPLY_HEADER_SIZE)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "out_capacity %llu < tensor bytes %llu + %d "
		                   "(SHM_REPLY's reply header)",
		                   (unsigned long long)r->out_capacity,
		                   (unsigned long long)tensor,
		                   FPREP_REPLY_HEADER_SIZE);
	if (r->out_offset > UINT64_MAX - r->out_capacity ||
	    (r->out_offset + r->out_capacity) % 8 != 0)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "out_offset %llu + out_capacity %llu is not a "
		        "multiple of 8 (SHM_REPLY's reply header)",
		        (unsigned long long)r->out_offset,
		        (unsigned long long)r->out_capacity);
	return FPREP_OK;
}

/* proto_check_dim checks one dimension: 1..max. */
static int proto_check_dim(const char *name, uint32_t v, uint32_t max,
                           const char *max_name, char *msg, size_t n)
{
	if (v == 0)
		return fprep__fail(msg, n, FPREP_EINVAL, "%s is 0", name);
	if (v > max)
		return fprep__fail(msg, n, FPREP_ELIMIT, "%s %u exceeds %s %u",
		                   name, v, max_name, max);
	return FPREP_OK;
}

static int proto_check_dims(const fprep_request *r, const fprep_limits *lim,
                            char *msg, size_t n)
{
	/* A JPEG's size is in its header: 0 x 0 here, or checked against it
	 * by the daemon. */
	int sized = r->src_format != FPREP_PIX_JPEG || r->src_width != 0 ||
	            r->src_height != 0;
	int err;

	if (sized &&
	    ((err = proto_check_dim("src_width", r->src_width, lim->max_width,
	                            "max_width", msg, n)) ||
	     (err = proto_check_dim("src_height", r->src_height,
	                            lim->max_height, "max_height", msg, n))))
		return err;
	if ((err = proto_check_dim("out_width", r->out_width,
	                           lim->max_out_width, "max_out_width", msg,
	                           n)) ||
	    (err = proto_check_dim("out_height", r->out_height,
	                           lim->max_out_height, "max_out_height", msg,
	                           n)))
		return err;
	return FPREP_OK;
}

/* proto_input_too_big refuses an input_size over max_frame_bytes. */
static int proto_input_too_big(const fprep_request *r, const fprep_limits *lim,
                               char *msg, size_t n)
{
	return fprep__fail(msg, n, FPREP_ELIMIT,
	                   "input_size %llu exceeds max_frame_bytes %llu",
	                   (unsigned long long)r->input_size,
	                   (unsigned long long)lim->max_frame_bytes);
}

/* proto_check_jpeg checks a JPEG source's bytes: at least 4 (SOI and EOI),
 * at most max_frame_bytes, not in device memory (the decode runs on a
 * CPU). Its header is the daemon's to check (backend/jpeg.h). */
static int proto_check_jpeg(const fprep_request *r, const fprep_limits *lim,
                            char *msg, size_t n)
{
	if (r->input_size < 4)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "input_size %llu: a JPEG frame has at least "
		                   "4 bytes",
		                   (unsigned long long)r->input_size);
	if (r->input_size > lim->max_frame_bytes)
		return proto_input_too_big(r, lim, msg, n);
	if (r->input_loc == FPREP_LOC_CUDA)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "src_format JPEG needs input_loc INLINE or "
		                   "SHM: it is decoded on a CPU");
	return FPREP_OK;
}

/* proto_check_input checks the stride and input_size of the source frame:
 * stride >= width * bpp, stride * (height - 1) + width * bpp <= input_size
 * <= max_frame_bytes. */
static int proto_check_input(const fprep_request *r, const fprep_limits *lim,
                             char *msg, size_t n)
{
	uint64_t row, body, need;
	uint32_t bpp = fprep_pixel_bytes(r->src_format);

	if (r->src_format == FPREP_PIX_JPEG)
		return proto_check_jpeg(r, lim, msg, n);
	if (__builtin_mul_overflow((uint64_t)r->src_width, bpp, &row))
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "src_width %u * bpp %u overflows",
		                   r->src_width, bpp);
	if (r->src_stride < row)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "src_stride %u < src_width*bpp = %llu",
		                   r->src_stride, (unsigned long long)row);
	if (__builtin_mul_overflow((uint64_t)r->src_stride,
	                           (uint64_t)r->src_height - 1, &body) ||
	    __builtin_add_overflow(body, row, &need))
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "src_stride %u * (src_height %u - 1) + "
		                   "src_width*bpp overflows 64 bits",
		                   r->src_stride, r->src_height);
	if (need > lim->max_frame_bytes)
		return fprep__fail(
		        msg, n, FPREP_ELIMIT,
		        "frame bytes stride*(height-1)+width*bpp = %llu "
		        "exceed max_frame_bytes %llu",
		        (unsigned long long)need,
		        (unsigned long long)lim->max_frame_bytes);
	if (r->input_size < need)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "input_size %llu < stride*(height-1)+width*bpp "
		        "= %llu",
		        (unsigned long long)r->input_size,
		        (unsigned long long)need);
	if (r->input_size > lim->max_frame_bytes)
		return proto_input_too_big(r, lim, msg, n);
	return fprep__yuv_check_planes(r, msg, n);
}

/* proto_tensor_bytes computes the tensor size of a request whose enums are
 * valid; returns nonzero on 64-bit overflow. */
static int proto_tensor_bytes(const fprep_request *r, uint64_t *bytes)
{
	uint64_t c = r->channel_order == FPREP_ORDER_GRAY ? 1 : 3;
	uint64_t v;

	return __builtin_mul_overflow((uint64_t)r->out_width,
	                              (uint64_t)r->out_height, &v) ||
	       __builtin_mul_overflow(v, c * proto_dtype_bytes(r->dtype), &v) ||
	       (*bytes = v, 0);
}

/* proto_check_float checks that a normalisation value is finite. */
static int proto_check_float(const char *name, int idx, float v, char *msg,
                             size_t n)
{
	if (isfinite(v))
		return FPREP_OK;
	if (idx < 0)
		return fprep__fail(msg, n, FPREP_EINVAL, "%s %g is not finite",
		                   name, (double)v);
	return fprep__fail(msg, n, FPREP_EINVAL, "%s[%d] %g is not finite",
	                   name, idx, (double)v);
}

static int proto_check_norm(const fprep_request *r, char *msg, size_t n)
{
	int err;

	if ((err = proto_check_float("pad_value", -1, r->pad_value, msg, n)))
		return err;
	if (r->pad_value < 0.0f || r->pad_value > 255.0f)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "pad_value %g is outside [0, 255]",
		                   (double)r->pad_value);
	if ((err = proto_check_float("scale", -1, r->scale, msg, n)))
		return err;
	for (int c = 0; c < 3; c++) {
		if ((err = proto_check_float("mean", c, r->mean[c], msg, n)) ||
		    (err = proto_check_float("std", c, r->std[c], msg, n)))
			return err;
		if (!(r->std[c] > 0.0f))
			return fprep__fail(msg, n, FPREP_EINVAL,
			                   "std[%d] %g is not > 0", c,
			                   (double)r->std[c]);
	}
	if (r->dtype != FPREP_DTYPE_U8)
		return FPREP_OK;
	if (r->scale != 1.0f / 255.0f && r->scale != 1.0f)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "scale %g with dtype U8: must be 1/255 or 1",
		                   (double)r->scale);
	for (int c = 0; c < 3; c++) {
		if (r->mean[c] != 0.0f)
			return fprep__fail(
			        msg, n, FPREP_EINVAL,
			        "mean[%d] %g with dtype U8: must be 0", c,
			        (double)r->mean[c]);
		if (r->std[c] != 1.0f)
			return fprep__fail(
			        msg, n, FPREP_EINVAL,
			        "std[%d] %g with dtype U8: must be 1", c,
			        (double)r->std[c]);
	}
	return FPREP_OK;
}

/* proto_check_payload checks the payload length of a request message:
 * input_size for inline input, nothing for shared-memory or CUDA input. */
static int proto_check_payload(const fprep_request *r, uint64_t payload,
                               char *msg, size_t n)
{
	if (r->kind == FPREP_KIND_BATCH && r->input_loc == FPREP_LOC_INLINE &&
	    payload != r->input_span)
		return fprep__fail(msg, n, FPREP_EPROTO,
		                   "inline payload %llu bytes != the frames' "
		                   "span %llu (max offset + input_size)",
		                   (unsigned long long)payload,
		                   (unsigned long long)r->input_span);
	if (r->kind != FPREP_KIND_BATCH && r->input_loc == FPREP_LOC_INLINE &&
	    payload != r->input_size)
		return fprep__fail(
		        msg, n, FPREP_EPROTO,
		        "inline payload %llu bytes != input_size %llu",
		        (unsigned long long)payload,
		        (unsigned long long)r->input_size);
	if (r->input_loc != FPREP_LOC_INLINE && payload != 0)
		return fprep__fail(msg, n, FPREP_EPROTO,
		                   "payload %llu bytes with input_loc %s: must "
		                   "be 0",
		                   (unsigned long long)payload,
		                   r->input_loc == FPREP_LOC_SHM ? "SHM"
		                                                 : "CUDA");
	return FPREP_OK;
}

/* proto_check_packed refuses a ROIS or BATCH request whose source is not
 * a packed format (YUV, JPEG). */
static int proto_check_packed(const fprep_request *r, char *msg, size_t n)
{
	if (r->src_format >= 1 && r->src_format <= FPREP_PIX_GRAY8)
		return FPREP_OK;
	return fprep__fail(msg, n, FPREP_EINVAL,
	                   "src_format %u in a %s request: only packed formats "
	                   "(1..5)",
	                   r->src_format,
	                   r->kind == FPREP_KIND_ROIS ? "ROIS" : "BATCH");
}

/* proto_check_batch checks what a ROIS or BATCH request asks of the
 * whole: a packed source, no SHM_REPLY, the whole tensor (N times one
 * element's tensor bytes, returned in *tensor) and the input span (a
 * ROIS's frame, a BATCH's frames) within max_batch_bytes; inline frames
 * within max_frame_bytes. */
static int proto_check_batch(const fprep_request *r, const fprep_limits *lim,
                             uint64_t *tensor, char *msg, size_t n)
{
	int err;
	const char *kind = r->kind == FPREP_KIND_ROIS ? "ROIS" : "BATCH";
	uint64_t total, table = FPREP_TABLE_HEADER_SIZE +
	                        (uint64_t)r->elements * FPREP_ELEMENT_SIZE;

	if ((err = proto_check_packed(r, msg, n)))
		return err;
	if (r->rounding != FPREP_ROUNDING_FLOAT)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "rounding %u in a %s request: only float (0)",
		        r->rounding, kind);
	if (r->shm_reply)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "output_loc flag SHM_REPLY in a %s request: "
		                   "its transforms come in the nng reply",
		                   kind);
	if (__builtin_mul_overflow(*tensor, (uint64_t)r->elements, &total) ||
	    total > lim->max_batch_bytes)
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "%u elements x %llu tensor bytes exceed "
		                   "max_batch_bytes %llu",
		                   r->elements, (unsigned long long)*tensor,
		                   (unsigned long long)lim->max_batch_bytes);
	if (r->input_span > lim->max_batch_bytes)
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "the frames' span %llu bytes exceeds "
		                   "max_batch_bytes %llu",
		                   (unsigned long long)r->input_span,
		                   (unsigned long long)lim->max_batch_bytes);
	/* The message limit (header + max_frame_bytes) holds the table. */
	if (r->input_loc == FPREP_LOC_INLINE &&
	    r->input_span + table > lim->max_frame_bytes)
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "inline frames of %llu bytes and a table of "
		                   "%llu exceed max_frame_bytes %llu (use a "
		                   "region)",
		                   (unsigned long long)r->input_span,
		                   (unsigned long long)table,
		                   (unsigned long long)lim->max_frame_bytes);
	*tensor = total;
	return FPREP_OK;
}

/* proto_check_value checks one BOX or AFFINE value: finite, within
 * +-FPREP_ELEMENT_COORD_MAX. */
static int proto_check_value(uint32_t k, const char *name, float v, char *msg,
                             size_t n)
{
	if (!isfinite(v))
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "element %u: %s %g is not finite", k, name,
		                   (double)v);
	if (fabsf(v) > FPREP_ELEMENT_COORD_MAX)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "element %u: %s %g is beyond +-%g", k, name,
		                   (double)v, (double)FPREP_ELEMENT_COORD_MAX);
	return FPREP_OK;
}

/* proto_check_element checks element k of a ROIS or BATCH request and
 * widens *span by a FRAME's bytes. */
static int proto_check_element(const fprep_request *r, uint32_t k,
                               const fprep_element *el, uint64_t *span,
                               char *msg, size_t n)
{
	static const char *const box[6] = {"x", "y", "w", "h", "v[4]", "v[5]"};
	static const char *const aff[6] = {"m00", "m01", "m02",
	                                   "m10", "m11", "m12"};
	uint64_t end;
	int err;

	if (r->kind == FPREP_KIND_BATCH) {
		if (el->type != FPREP_ELEM_FRAME)
			return fprep__fail(
			        msg, n, FPREP_EINVAL,
			        "element %u: type %u in a BATCH: must "
			        "be FRAME (3)",
			        k, el->type);
		if (__builtin_add_overflow(el->offset, r->input_size, &end))
			return fprep__fail(
			        msg, n, FPREP_EINVAL,
			        "element %u: offset %llu + input_size "
			        "overflows 64 bits",
			        k, (unsigned long long)el->offset);
		if (end > *span)
			*span = end;
		return FPREP_OK;
	}
	if (el->type != FPREP_ELEM_BOX && el->type != FPREP_ELEM_AFFINE)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "element %u: type %u in a ROIS: must be BOX "
		                   "(1) or AFFINE (2)",
		                   k, el->type);
	for (int i = 0; i < 6; i++)
		if ((err = proto_check_value(
		             k, el->type == FPREP_ELEM_BOX ? box[i] : aff[i],
		             el->v[i], msg, n)))
			return err;
	if (el->type == FPREP_ELEM_AFFINE)
		return FPREP_OK;
	if (el->resize > FPREP_RESIZE_STRETCH)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "element %u: resize %u is not a resize mode "
		                   "(0..2)",
		                   k, el->resize);
	if (!(el->v[2] > 0.0f) || !(el->v[3] > 0.0f))
		return fprep__fail(
		        msg, n, FPREP_EINVAL, "element %u: %s %g is not > 0", k,
		        el->v[2] > 0.0f ? "h" : "w",
		        (double)(el->v[2] > 0.0f ? el->v[3] : el->v[2]));
	return FPREP_OK;
}

int fprep__element_check(const fprep_request *r, uint32_t k,
                         const fprep_element *el, uint64_t *span, char *msg,
                         size_t msg_size)
{
	return proto_check_element(r, k, el, span, msg, msg_size);
}

/* proto_read_elements reads and checks the element table of a ROIS or
 * BATCH message of len bytes (its count against lim->max_elements before
 * anything else), and sets r->elements and r->input_span. */
static int proto_read_elements(const uint8_t *p, size_t len, fprep_request *r,
                               const fprep_limits *lim, char *msg, size_t n)
{
	const uint8_t *table = p + FPREP_REQUEST_HEADER_SIZE;
	fprep_element el;
	uint64_t span = r->kind == FPREP_KIND_ROIS ? r->input_size : 0;
	uint32_t count;
	int err;

	if ((err = proto_check_packed(r, msg, n)))
		return err;
	if (len < FPREP_REQUEST_HEADER_SIZE + FPREP_TABLE_HEADER_SIZE)
		return fprep__fail(
		        msg, n, FPREP_EPROTO,
		        "message length %zu < header + element table "
		        "header %d",
		        len,
		        FPREP_REQUEST_HEADER_SIZE + FPREP_TABLE_HEADER_SIZE);
	count = proto_get32(table);
	if (count == 0)
		return fprep__fail(msg, n, FPREP_EINVAL, "elements is 0");
	if (count > lim->max_elements || count > FPREP_ELEMENTS_MAX)
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "elements %u exceeds max_elements %u", count,
		                   lim->max_elements < FPREP_ELEMENTS_MAX
		                           ? lim->max_elements
		                           : FPREP_ELEMENTS_MAX);
	if ((len - FPREP_REQUEST_HEADER_SIZE - FPREP_TABLE_HEADER_SIZE) /
	            FPREP_ELEMENT_SIZE <
	    count)
		return fprep__fail(msg, n, FPREP_EPROTO,
		                   "message length %zu < the table of %u "
		                   "elements of %d bytes",
		                   len, count, FPREP_ELEMENT_SIZE);
	r->elements = count;
	for (uint32_t k = 0; k < count; k++) {
		fprep_element_get(table, k, &el);
		if ((err = proto_check_element(r, k, &el, &span, msg, n)))
			return err;
	}
	r->input_span = span;
	return FPREP_OK;
}

/* proto_check_frame validates a FRAME/ECHO request, in the order that
 * fprep_request_decode documents. payload is the number of bytes after the
 * header, or PROTO_NO_MESSAGE for a request that is not in a message (its
 * payload is not checked). */
#define PROTO_NO_MESSAGE UINT64_MAX
static int proto_check_frame(const fprep_request *r, const fprep_limits *lim,
                             uint64_t payload, char *msg, size_t n)
{
	unsigned channels = r->channel_order == FPREP_ORDER_GRAY ? 1 : 3;
	uint64_t tensor;
	int err;

	if ((err = proto_check_enums(r, msg, n)) ||
	    (err = proto_check_dims(r, lim, msg, n)) ||
	    (err = proto_check_input(r, lim, msg, n)))
		return err;
	if (proto_tensor_bytes(r, &tensor))
		return fprep__fail(
		        msg, n, FPREP_ELIMIT,
		        "tensor bytes %ux%ux%u x %u overflow 64 bits",
		        r->out_width, r->out_height, channels,
		        proto_dtype_bytes(r->dtype));
	if (tensor > lim->max_tensor_bytes)
		return fprep__fail(msg, n, FPREP_ELIMIT,
		                   "tensor bytes %ux%ux%u x %u = %llu exceed "
		                   "max_tensor_bytes %llu",
		                   r->out_width, r->out_height, channels,
		                   proto_dtype_bytes(r->dtype),
		                   (unsigned long long)tensor,
		                   (unsigned long long)lim->max_tensor_bytes);
	if (payload != PROTO_NO_MESSAGE &&
	    (err = proto_check_payload(r, payload, msg, n)))
		return err;
	if ((err = proto_check_norm(r, msg, n)))
		return err;
	if ((r->elements > 0) !=
	    (r->kind == FPREP_KIND_ROIS || r->kind == FPREP_KIND_BATCH))
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "elements %u with kind %u: ROIS and BATCH "
		                   "have 1 or more, the others none",
		                   r->elements, r->kind);
	if (r->elements > 0 &&
	    (err = proto_check_batch(r, lim, &tensor, msg, n)))
		return err;
	if (r->output_loc != FPREP_LOC_INLINE && r->out_capacity < tensor)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "out_capacity %llu < tensor bytes %llu",
		                   (unsigned long long)r->out_capacity,
		                   (unsigned long long)tensor);
	/* The tensor's elements are stored as what they are (float, half):
	 * at an address that is not a multiple of their size those stores
	 * are undefined in C and fault on some devices. Regions are
	 * page-aligned, so the offset decides. */
	if (r->output_loc != FPREP_LOC_INLINE &&
	    r->out_offset % proto_dtype_bytes(r->dtype) != 0)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "out_offset %llu is not a multiple of %u, "
		                   "the tensor's element size",
		                   (unsigned long long)r->out_offset,
		                   proto_dtype_bytes(r->dtype));
	if (r->shm_reply)
		return proto_check_shm_reply(r, tensor, msg, n);
	return FPREP_OK;
}

/* proto_read_register fills the REGISTER fields of *req. The name's
 * syntax is the shared-memory code's to check; here only its length. */
static int proto_read_register(const uint8_t *p, fprep_register_request *req,
                               char *msg, size_t msg_size)
{
	struct proto_register reg, *obj = &reg;

	PROTO_REGISTER(PROTO_DECODE, PROTO_SKIP)
	req->region_size = reg.region_size;
	if (reg.name_len < 2 || reg.name_len > FPREP_REGION_NAME_MAX)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "name_len %u outside 2..%d", reg.name_len,
		                   FPREP_REGION_NAME_MAX);
	reg.name[reg.name_len] = '\0';
	if (strlen(reg.name) != reg.name_len)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "region name contains a NUL byte");
	memcpy(req->region_name, reg.name, reg.name_len + 1);
	return FPREP_OK;
}

/* proto_check_register_cuda checks what a REGISTER_CUDA says of itself:
 * a non-empty buffer whose end does not overflow 64 bits. */
static int proto_check_register_cuda(const fprep_register_request *r, char *msg,
                                     size_t n)
{
	uint64_t end;

	if (r->region_size == 0)
		return fprep__fail(msg, n, FPREP_EINVAL, "region_size is 0");
	if (__builtin_add_overflow(r->cuda_offset, r->region_size, &end))
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "cuda_offset %llu + region_size %llu "
		                   "overflows 64 bits",
		                   (unsigned long long)r->cuda_offset,
		                   (unsigned long long)r->region_size);
	return FPREP_OK;
}

/* proto_kind_names: every request kind's name, indexed by kind. */
static const char *const proto_kind_names[FPREP_KIND_LIMIT] = {
        [FPREP_KIND_FRAME] = "frame",
        [FPREP_KIND_INFO] = "info",
        [FPREP_KIND_ECHO] = "echo",
        [FPREP_KIND_REGISTER] = "register",
        [FPREP_KIND_UNREGISTER] = "unregister",
        [FPREP_KIND_REGISTER_CUDA] = "register_cuda",
        [FPREP_KIND_DOORBELL] = "doorbell",
        [FPREP_KIND_ROIS] = "rois",
        [FPREP_KIND_BATCH] = "batch",
        [FPREP_KIND_STREAM_OPEN] = "stream_open",
        [FPREP_KIND_STREAM_PACKET] = "stream_packet",
        [FPREP_KIND_STREAM_FLUSH] = "stream_flush",
        [FPREP_KIND_STREAM_CLOSE] = "stream_close",
};
_Static_assert(FPREP_KIND_STREAM_CLOSE == FPREP_KIND_LIMIT - 1,
               "FPREP_KIND_LIMIT is one more than the largest kind");

const char *fprep_kind_name(unsigned kind)
{
	return kind < FPREP_KIND_LIMIT ? proto_kind_names[kind] : NULL;
}

int fprep_register_request_decode(const void *buf, size_t len,
                                  fprep_register_request *req, char *msg,
                                  size_t msg_size)
{
	const uint8_t *p = buf;
	fprep_register_request *obj = req;
	int err;

	memset(req, 0, sizeof(*req));
	err = proto_read_head(p, len, &req->version, &req->kind,
	                      &req->request_id, msg, msg_size);
	if (err != FPREP_OK)
		return err;
	switch (req->kind) {
	case FPREP_KIND_REGISTER:
		return proto_read_register(p, req, msg, msg_size);
	case FPREP_KIND_UNREGISTER:
		PROTO_UNREGISTER(PROTO_DECODE, PROTO_SKIP)
		return FPREP_OK;
	case FPREP_KIND_REGISTER_CUDA:
		PROTO_REGISTER_CUDA(PROTO_DECODE, PROTO_SKIP)
		return proto_check_register_cuda(req, msg, msg_size);
	case FPREP_KIND_DOORBELL:
		PROTO_DOORBELL(PROTO_DECODE, PROTO_SKIP)
		if (req->doorbell_entries > FPREP_DOORBELL_ENTRIES_MAX)
			return fprep__fail(msg, msg_size, FPREP_EINVAL,
			                   "entries: %" PRIu32 " > %d",
			                   req->doorbell_entries,
			                   FPREP_DOORBELL_ENTRIES_MAX);
		if (req->doorbell_offset % 64 != 0)
			return fprep__fail(msg, msg_size, FPREP_EINVAL,
			                   "offset: %" PRIu64
			                   " is not a multiple of 64",
			                   req->doorbell_offset);
		return FPREP_OK;
	}
	return fprep__fail(msg, msg_size, FPREP_EINVAL,
	                   "kind %u is not REGISTER (4), UNREGISTER (5), "
	                   "REGISTER_CUDA (6) or DOORBELL (7)",
	                   req->kind);
}

int fprep_request_decode(const void *buf, size_t len, const fprep_limits *lim,
                         fprep_request *req, char *msg, size_t msg_size)
{
	const uint8_t *p = buf;
	fprep_request *obj = req;
	fprep_register_request reg;
	fprep_stream_request stream;
	fprep_request frame;
	fprep_limits frame_lim;
	int err;

	memset(req, 0, sizeof(*req));
	err = proto_read_head(p, len, &req->version, &req->kind,
	                      &req->request_id, msg, msg_size);
	if (err != FPREP_OK)
		return err;
	switch (req->kind) {
	case FPREP_KIND_FRAME:
	case FPREP_KIND_ECHO:
		PROTO_FRAME(PROTO_DECODE, PROTO_SKIP)
		proto_split_flags(req);
		return proto_check_frame(req, lim,
		                         len - FPREP_REQUEST_HEADER_SIZE, msg,
		                         msg_size);
	case FPREP_KIND_ROIS:
	case FPREP_KIND_BATCH:
		PROTO_FRAME(PROTO_DECODE, PROTO_SKIP)
		proto_split_flags(req);
		err = proto_read_elements(p, len, req, lim, msg, msg_size);
		if (err != FPREP_OK)
			return err;
		return proto_check_frame(
		        req, lim, len - fprep_request_payload_offset(req), msg,
		        msg_size);
	case FPREP_KIND_STREAM_OPEN:
		PROTO_FRAME(PROTO_DECODE, PROTO_SKIP)
		proto_split_flags(req);
		err = fprep__stream_open_check(
		        req, lim, len - FPREP_REQUEST_HEADER_SIZE, &frame,
		        &frame_lim, msg, msg_size);
		if (err != FPREP_OK)
			return err;
		return proto_check_frame(&frame, &frame_lim, PROTO_NO_MESSAGE,
		                         msg, msg_size);
	case FPREP_KIND_STREAM_PACKET:
	case FPREP_KIND_STREAM_FLUSH:
	case FPREP_KIND_STREAM_CLOSE:
		return fprep_stream_request_decode(buf, len, lim, &stream, msg,
		                                   msg_size);
	case FPREP_KIND_INFO:
		return FPREP_OK;
	case FPREP_KIND_REGISTER:
	case FPREP_KIND_UNREGISTER:
	case FPREP_KIND_REGISTER_CUDA:
	case FPREP_KIND_DOORBELL:
		return fprep_register_request_decode(buf, len, &reg, msg,
		                                     msg_size);
	}
	return fprep__fail(msg, msg_size, FPREP_EINVAL,
	                   "kind %u is not a request kind (1..13)", req->kind);
}

int fprep__request_check(const fprep_request *req, char *msg, size_t msg_size)
{
	/* No limits: the daemon's are for peers, not for in-memory use. */
	static const fprep_limits none = {
	        .max_width = UINT32_MAX,
	        .max_height = UINT32_MAX,
	        .max_frame_bytes = UINT64_MAX,
	        .max_out_width = UINT32_MAX,
	        .max_out_height = UINT32_MAX,
	        .max_tensor_bytes = UINT64_MAX,
	        .max_elements = UINT32_MAX,
	        .max_batch_bytes = UINT64_MAX,
	};

	if (msg != NULL && msg_size > 0)
		msg[0] = '\0';
	return proto_check_frame(req, &none, PROTO_NO_MESSAGE, msg, msg_size);
}

int fprep_tensor_shape(const fprep_request *req, uint32_t shape[4],
                       uint64_t *bytes)
{
	uint32_t c = req->channel_order == FPREP_ORDER_GRAY ? 1 : 3;

	if (req->channel_order < FPREP_ORDER_RGB ||
	    req->channel_order > FPREP_ORDER_GRAY ||
	    proto_dtype_bytes(req->dtype) == 0 || req->out_width == 0 ||
	    req->out_height == 0 ||
	    (req->layout != FPREP_LAYOUT_NCHW &&
	     req->layout != FPREP_LAYOUT_NHWC) ||
	    proto_tensor_bytes(req, bytes))
		return FPREP_EINVAL;
	shape[0] = req->elements > 0 ? req->elements : 1;
	if (req->elements > 0 &&
	    __builtin_mul_overflow(*bytes, (uint64_t)req->elements, bytes))
		return FPREP_EINVAL;
	if (req->layout == FPREP_LAYOUT_NCHW) {
		shape[1] = c;
		shape[2] = req->out_height;
		shape[3] = req->out_width;
	} else {
		shape[1] = req->out_height;
		shape[2] = req->out_width;
		shape[3] = c;
	}
	return FPREP_OK;
}

void fprep_reply_encode(const fprep_reply_header *rep, void *buf)
{
	uint8_t *p = buf;
	const fprep_reply_header *obj = rep;

	proto_head_encode(p, FPREP_REPLY_HEADER_SIZE, FPREP_REPLY_MAGIC,
	                  obj->version, obj->kind, obj->request_id);
	PROTO_REPLY(PROTO_ENCODE, PROTO_SKIP)
}

/* proto_check_batch_reply checks a successful ROIS or BATCH reply's
 * payload: the tensor (inline output) and one transform record per
 * element (shape[0] of them). */
static int proto_check_batch_reply(const fprep_reply_header *rep)
{
	uint64_t xf = (uint64_t)rep->shape[0] * FPREP_ELEMENT_XF_SIZE;
	uint64_t want =
	        rep->output_loc == FPREP_LOC_INLINE ? rep->tensor_size : 0;

	if (rep->shape[0] == 0 || __builtin_add_overflow(want, xf, &want) ||
	    rep->payload_size != want)
		return FPREP_EPROTO;
	return FPREP_OK;
}

/* proto_check_tensor checks that a successful FRAME/ECHO reply describes
 * its tensor consistently: ndim 4, a known dtype, shape product * element
 * size == tensor_size, and for inline output payload_size == tensor_size. */
static int proto_check_tensor(const fprep_reply_header *rep)
{
	uint64_t v = proto_dtype_bytes(rep->dtype);

	if (v == 0 || rep->ndim != 4 ||
	    (rep->layout != FPREP_LAYOUT_NCHW &&
	     rep->layout != FPREP_LAYOUT_NHWC))
		return FPREP_EPROTO;
	for (int i = 0; i < 4; i++)
		if (__builtin_mul_overflow(v, (uint64_t)rep->shape[i], &v))
			return FPREP_EPROTO;
	if (v != rep->tensor_size)
		return FPREP_EPROTO;
	if (rep->kind == FPREP_KIND_ROIS || rep->kind == FPREP_KIND_BATCH)
		return proto_check_batch_reply(rep);
	if (rep->kind == FPREP_KIND_STREAM_PACKET ||
	    rep->kind == FPREP_KIND_STREAM_FLUSH)
		return fprep__stream_reply_check(rep);
	if (rep->output_loc == FPREP_LOC_INLINE &&
	    rep->payload_size != rep->tensor_size)
		return FPREP_EPROTO;
	return FPREP_OK;
}

int fprep_reply_decode(const void *buf, size_t len, fprep_reply_header *rep)
{
	const uint8_t *p = buf;
	fprep_reply_header *obj = rep;

	memset(rep, 0, sizeof(*rep));
	if (len >= 4 && proto_get32(p) != FPREP_REPLY_MAGIC)
		return FPREP_EPROTO;
	PROTO_HEAD(PROTO_DECODE_IN, PROTO_SKIP)
	if (len < FPREP_REPLY_HEADER_SIZE)
		return FPREP_EPROTO;
	if (rep->version != FPREP_PROTOCOL_VERSION)
		return FPREP_EVERSION;
	PROTO_REPLY(PROTO_DECODE, PROTO_SKIP)
	if (memchr(rep->message, '\0', sizeof(rep->message)) == NULL) {
		memset(rep->message, 0, sizeof(rep->message));
		return FPREP_EPROTO;
	}
	if (rep->payload_size != len - FPREP_REPLY_HEADER_SIZE || rep->ndim > 4)
		return FPREP_EPROTO;
	if (rep->status == FPREP_OK &&
	    (rep->kind == FPREP_KIND_FRAME || rep->kind == FPREP_KIND_ECHO ||
	     rep->kind == FPREP_KIND_ROIS || rep->kind == FPREP_KIND_BATCH ||
	     rep->kind == FPREP_KIND_STREAM_PACKET ||
	     rep->kind == FPREP_KIND_STREAM_FLUSH))
		return proto_check_tensor(rep);
	return FPREP_OK;
}
