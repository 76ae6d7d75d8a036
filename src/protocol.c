/*
 * protocol.c: encoder and validating decoder of the frameprep wire format
 * (version 1, see include/frameprep/protocol.h).
 *
 * Every field is read and written byte by byte at its documented offset in
 * little-endian order: a received nng body is only 4-byte aligned and the
 * host may be of either byte order, so wire bytes are never cast to
 * structs. The request decoder is the daemon's first line of defence: it
 * looks at nothing outside buf[0..len), checks every size from the peer
 * with overflow-checked 64-bit arithmetic before anything is allocated, and
 * explains each refusal with the field, the value and the bound.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"

/* Little-endian field access at byte offsets. */
static uint16_t proto_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t proto_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t proto_get64(const uint8_t *p)
{
	return (uint64_t)proto_get32(p) | (uint64_t)proto_get32(p + 4) << 32;
}

static float proto_getf(const uint8_t *p)
{
	uint32_t u = proto_get32(p);
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static void proto_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void proto_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void proto_put64(uint8_t *p, uint64_t v)
{
	proto_put32(p, (uint32_t)v);
	proto_put32(p + 4, (uint32_t)(v >> 32));
}

static void proto_putf(uint8_t *p, float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	proto_put32(p, u);
}

/* proto_fail writes the explanation of a refusal and returns err. */
static int proto_fail(char *msg, size_t msg_size, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static int proto_fail(char *msg, size_t msg_size, int err, const char *fmt, ...)
{
	va_list ap;

	if (msg != NULL && msg_size > 0) {
		va_start(ap, fmt);
		vsnprintf(msg, msg_size, fmt, ap);
		va_end(ap);
	}
	return err;
}

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
		return 1;
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
}

void fprep_request_encode(const fprep_request *req, void *buf)
{
	uint8_t *p = buf;
	size_t name_len;

	memset(p, 0, FPREP_REQUEST_HEADER_SIZE);
	proto_put32(p + 0, FPREP_REQUEST_MAGIC);
	proto_put16(p + 4, req->version);
	proto_put16(p + 6, req->kind);
	proto_put64(p + 8, req->request_id);
	if (req->kind == FPREP_KIND_REGISTER) {
		name_len = strnlen(req->region_name, FPREP_REGION_NAME_MAX);
		proto_put64(p + 16, req->region_size);
		proto_put32(p + 24, (uint32_t)name_len);
		memcpy(p + 32, req->region_name, name_len);
		return;
	}
	if (req->kind == FPREP_KIND_UNREGISTER) {
		proto_put32(p + 16, req->region_id);
		return;
	}
	proto_put16(p + 16, req->src_format);
	proto_put32(p + 20, req->src_width);
	proto_put32(p + 24, req->src_height);
	proto_put32(p + 28, req->src_stride);
	proto_put32(p + 32, req->out_width);
	proto_put32(p + 36, req->out_height);
	p[40] = req->resize;
	p[41] = req->channel_order;
	p[42] = req->dtype;
	p[43] = req->layout;
	proto_putf(p + 44, req->pad_value);
	proto_putf(p + 48, req->scale);
	for (int c = 0; c < 3; c++) {
		proto_putf(p + 52 + 4 * c, req->mean[c]);
		proto_putf(p + 64 + 4 * c, req->std[c]);
	}
	p[76] = req->input_loc;
	p[77] = req->output_loc;
	proto_put32(p + 80, req->in_region);
	proto_put32(p + 84, req->out_region);
	proto_put64(p + 88, req->in_offset);
	proto_put64(p + 96, req->out_offset);
	proto_put64(p + 104, req->out_capacity);
	proto_put64(p + 112, req->input_size);
}

/* proto_read_frame fills the FRAME/ECHO fields of *req from a whole
 * header. */
static void proto_read_frame(const uint8_t *p, fprep_request *req)
{
	req->src_format = proto_get16(p + 16);
	req->src_width = proto_get32(p + 20);
	req->src_height = proto_get32(p + 24);
	req->src_stride = proto_get32(p + 28);
	req->out_width = proto_get32(p + 32);
	req->out_height = proto_get32(p + 36);
	req->resize = p[40];
	req->channel_order = p[41];
	req->dtype = p[42];
	req->layout = p[43];
	req->pad_value = proto_getf(p + 44);
	req->scale = proto_getf(p + 48);
	for (int c = 0; c < 3; c++) {
		req->mean[c] = proto_getf(p + 52 + 4 * c);
		req->std[c] = proto_getf(p + 64 + 4 * c);
	}
	req->input_loc = p[76];
	req->output_loc = p[77];
	req->in_region = proto_get32(p + 80);
	req->out_region = proto_get32(p + 84);
	req->in_offset = proto_get64(p + 88);
	req->out_offset = proto_get64(p + 96);
	req->out_capacity = proto_get64(p + 104);
	req->input_size = proto_get64(p + 112);
}

/* proto_check_enums checks every enumerated field of a FRAME/ECHO request,
 * including the pairings that the enums alone do not express. */
static int proto_check_enums(const fprep_request *r, char *msg, size_t n)
{
	if (fprep_pixel_bytes(r->src_format) == 0)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "src_format %u is not a pixel format (1..5)",
		                  r->src_format);
	if (r->resize != FPREP_RESIZE_LETTERBOX &&
	    r->resize != FPREP_RESIZE_STRETCH)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "resize %u is not a resize mode (1..2)",
		                  r->resize);
	if (r->channel_order < FPREP_ORDER_RGB ||
	    r->channel_order > FPREP_ORDER_GRAY)
		return proto_fail(
		        msg, n, FPREP_EINVAL,
		        "channel_order %u is not a channel order (1..3)",
		        r->channel_order);
	if (r->channel_order == FPREP_ORDER_GRAY &&
	    r->src_format != FPREP_PIX_GRAY8)
		return proto_fail(
		        msg, n, FPREP_EINVAL,
		        "channel_order GRAY requires src_format GRAY8 "
		        "(5), got %u",
		        r->src_format);
	if (proto_dtype_bytes(r->dtype) == 0)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "dtype %u is not a dtype (1..3)", r->dtype);
	if (r->layout != FPREP_LAYOUT_NCHW && r->layout != FPREP_LAYOUT_NHWC)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "layout %u is not a layout (1..2)",
		                  r->layout);
	if (r->input_loc != FPREP_LOC_INLINE && r->input_loc != FPREP_LOC_SHM)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "input_loc %u is not a location (0..1)",
		                  r->input_loc);
	if (r->output_loc != FPREP_LOC_INLINE && r->output_loc != FPREP_LOC_SHM)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "output_loc %u is not a location (0..1)",
		                  r->output_loc);
	return FPREP_OK;
}

/* proto_check_dim checks one dimension: 1..max. */
static int proto_check_dim(const char *name, uint32_t v, uint32_t max,
                           const char *max_name, char *msg, size_t n)
{
	if (v == 0)
		return proto_fail(msg, n, FPREP_EINVAL, "%s is 0", name);
	if (v > max)
		return proto_fail(msg, n, FPREP_ELIMIT, "%s %u exceeds %s %u",
		                  name, v, max_name, max);
	return FPREP_OK;
}

static int proto_check_dims(const fprep_request *r, const fprep_limits *lim,
                            char *msg, size_t n)
{
	int err;

	if ((err = proto_check_dim("src_width", r->src_width, lim->max_width,
	                           "max_width", msg, n)) ||
	    (err = proto_check_dim("src_height", r->src_height, lim->max_height,
	                           "max_height", msg, n)) ||
	    (err = proto_check_dim("out_width", r->out_width,
	                           lim->max_out_width, "max_out_width", msg,
	                           n)) ||
	    (err = proto_check_dim("out_height", r->out_height,
	                           lim->max_out_height, "max_out_height", msg,
	                           n)))
		return err;
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

	if (__builtin_mul_overflow((uint64_t)r->src_width, bpp, &row))
		return proto_fail(msg, n, FPREP_ELIMIT,
		                  "src_width %u * bpp %u overflows",
		                  r->src_width, bpp);
	if (r->src_stride < row)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "src_stride %u < src_width*bpp = %llu",
		                  r->src_stride, (unsigned long long)row);
	if (__builtin_mul_overflow((uint64_t)r->src_stride,
	                           (uint64_t)r->src_height - 1, &body) ||
	    __builtin_add_overflow(body, row, &need))
		return proto_fail(msg, n, FPREP_ELIMIT,
		                  "src_stride %u * (src_height %u - 1) + "
		                  "src_width*bpp overflows 64 bits",
		                  r->src_stride, r->src_height);
	if (need > lim->max_frame_bytes)
		return proto_fail(
		        msg, n, FPREP_ELIMIT,
		        "frame bytes stride*(height-1)+width*bpp = %llu "
		        "exceed max_frame_bytes %llu",
		        (unsigned long long)need,
		        (unsigned long long)lim->max_frame_bytes);
	if (r->input_size < need)
		return proto_fail(
		        msg, n, FPREP_EINVAL,
		        "input_size %llu < stride*(height-1)+width*bpp "
		        "= %llu",
		        (unsigned long long)r->input_size,
		        (unsigned long long)need);
	if (r->input_size > lim->max_frame_bytes)
		return proto_fail(
		        msg, n, FPREP_ELIMIT,
		        "input_size %llu exceeds max_frame_bytes %llu",
		        (unsigned long long)r->input_size,
		        (unsigned long long)lim->max_frame_bytes);
	return FPREP_OK;
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
		return proto_fail(msg, n, FPREP_EINVAL, "%s %g is not finite",
		                  name, (double)v);
	return proto_fail(msg, n, FPREP_EINVAL, "%s[%d] %g is not finite", name,
	                  idx, (double)v);
}

static int proto_check_norm(const fprep_request *r, char *msg, size_t n)
{
	int err;

	if ((err = proto_check_float("pad_value", -1, r->pad_value, msg, n)))
		return err;
	if (r->pad_value < 0.0f || r->pad_value > 255.0f)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "pad_value %g is outside [0, 255]",
		                  (double)r->pad_value);
	if ((err = proto_check_float("scale", -1, r->scale, msg, n)))
		return err;
	for (int c = 0; c < 3; c++) {
		if ((err = proto_check_float("mean", c, r->mean[c], msg, n)) ||
		    (err = proto_check_float("std", c, r->std[c], msg, n)))
			return err;
		if (!(r->std[c] > 0.0f))
			return proto_fail(msg, n, FPREP_EINVAL,
			                  "std[%d] %g is not > 0", c,
			                  (double)r->std[c]);
	}
	if (r->dtype != FPREP_DTYPE_U8)
		return FPREP_OK;
	if (r->scale != 1.0f / 255.0f && r->scale != 1.0f)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "scale %g with dtype U8: must be 1/255 or 1",
		                  (double)r->scale);
	for (int c = 0; c < 3; c++) {
		if (r->mean[c] != 0.0f)
			return proto_fail(
			        msg, n, FPREP_EINVAL,
			        "mean[%d] %g with dtype U8: must be 0", c,
			        (double)r->mean[c]);
		if (r->std[c] != 1.0f)
			return proto_fail(msg, n, FPREP_EINVAL,
			                  "std[%d] %g with dtype U8: must be 1",
			                  c, (double)r->std[c]);
	}
	return FPREP_OK;
}

/* proto_check_frame validates a FRAME/ECHO request, in the order that
 * fprep_request_decode documents. payload is the number of bytes after the
 * header. */
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
		return proto_fail(msg, n, FPREP_ELIMIT,
		                  "tensor bytes %ux%ux%u x %u overflow 64 bits",
		                  r->out_width, r->out_height, channels,
		                  proto_dtype_bytes(r->dtype));
	if (tensor > lim->max_tensor_bytes)
		return proto_fail(msg, n, FPREP_ELIMIT,
		                  "tensor bytes %ux%ux%u x %u = %llu exceed "
		                  "max_tensor_bytes %llu",
		                  r->out_width, r->out_height, channels,
		                  proto_dtype_bytes(r->dtype),
		                  (unsigned long long)tensor,
		                  (unsigned long long)lim->max_tensor_bytes);
	if (r->input_loc == FPREP_LOC_INLINE && payload != r->input_size)
		return proto_fail(
		        msg, n, FPREP_EPROTO,
		        "inline payload %llu bytes != input_size %llu",
		        (unsigned long long)payload,
		        (unsigned long long)r->input_size);
	if (r->input_loc == FPREP_LOC_SHM && payload != 0)
		return proto_fail(msg, n, FPREP_EPROTO,
		                  "payload %llu bytes with input_loc SHM: must "
		                  "be 0",
		                  (unsigned long long)payload);
	if ((err = proto_check_norm(r, msg, n)))
		return err;
	if (r->output_loc == FPREP_LOC_SHM && r->out_capacity < tensor)
		return proto_fail(msg, n, FPREP_EINVAL,
		                  "out_capacity %llu < tensor bytes %llu",
		                  (unsigned long long)r->out_capacity,
		                  (unsigned long long)tensor);
	return FPREP_OK;
}

/* proto_read_register fills the REGISTER fields of *req. The name's
 * syntax is the shared-memory code's to check; here only its length. */
static int proto_read_register(const uint8_t *p, fprep_request *req, char *msg,
                               size_t msg_size)
{
	uint32_t name_len = proto_get32(p + 24);

	req->region_size = proto_get64(p + 16);
	if (name_len < 2 || name_len > FPREP_REGION_NAME_MAX)
		return proto_fail(msg, msg_size, FPREP_EINVAL,
		                  "name_len %u outside 2..%d", name_len,
		                  FPREP_REGION_NAME_MAX);
	memcpy(req->region_name, p + 32, name_len);
	req->region_name[name_len] = '\0';
	if (strlen(req->region_name) != name_len)
		return proto_fail(msg, msg_size, FPREP_EINVAL,
		                  "region name contains a NUL byte");
	return FPREP_OK;
}

int fprep_request_decode(const void *buf, size_t len, const fprep_limits *lim,
                         fprep_request *req, char *msg, size_t msg_size)
{
	const uint8_t *p = buf;
	uint32_t magic;

	memset(req, 0, sizeof(*req));
	if (msg != NULL && msg_size > 0)
		msg[0] = '\0';
	if (len >= 4) {
		magic = proto_get32(p);
		if (magic != FPREP_REQUEST_MAGIC)
			return proto_fail(msg, msg_size, FPREP_EPROTO,
			                  "magic 0x%08x != 0x%08x", magic,
			                  FPREP_REQUEST_MAGIC);
	}
	if (len >= 6)
		req->version = proto_get16(p + 4);
	if (len >= 8)
		req->kind = proto_get16(p + 6);
	if (len >= 16)
		req->request_id = proto_get64(p + 8);
	if (len < FPREP_REQUEST_HEADER_SIZE)
		return proto_fail(msg, msg_size, FPREP_EPROTO,
		                  "message length %zu < header size %d", len,
		                  FPREP_REQUEST_HEADER_SIZE);
	if (req->version != FPREP_PROTOCOL_VERSION)
		return proto_fail(msg, msg_size, FPREP_EVERSION,
		                  "version %u != %d", req->version,
		                  FPREP_PROTOCOL_VERSION);
	switch (req->kind) {
	case FPREP_KIND_FRAME:
	case FPREP_KIND_ECHO:
		proto_read_frame(p, req);
		return proto_check_frame(req, lim,
		                         len - FPREP_REQUEST_HEADER_SIZE, msg,
		                         msg_size);
	case FPREP_KIND_INFO:
		return FPREP_OK;
	case FPREP_KIND_REGISTER:
		return proto_read_register(p, req, msg, msg_size);
	case FPREP_KIND_UNREGISTER:
		req->region_id = proto_get32(p + 16);
		return FPREP_OK;
	}
	return proto_fail(msg, msg_size, FPREP_EINVAL,
	                  "kind %u is not a request kind (1..5)", req->kind);
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
	shape[0] = 1;
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
	size_t mlen = strnlen(rep->message, FPREP_MESSAGE_SIZE - 1);

	memset(p, 0, FPREP_REPLY_HEADER_SIZE);
	proto_put32(p + 0, FPREP_REPLY_MAGIC);
	proto_put16(p + 4, rep->version);
	proto_put16(p + 6, rep->kind);
	proto_put64(p + 8, rep->request_id);
	proto_put32(p + 16, rep->status);
	p[20] = rep->dtype;
	p[21] = rep->layout;
	p[22] = rep->ndim;
	p[23] = rep->output_loc;
	for (int i = 0; i < 4; i++)
		proto_put32(p + 24 + 4 * i, rep->shape[i]);
	proto_putf(p + 40, rep->scale_x);
	proto_putf(p + 44, rep->scale_y);
	proto_putf(p + 48, rep->pad_x);
	proto_putf(p + 52, rep->pad_y);
	proto_put32(p + 56, rep->t_queue_us);
	proto_put32(p + 60, rep->t_compute_us);
	proto_put32(p + 64, rep->t_h2d_us);
	proto_put32(p + 68, rep->t_kernel_us);
	proto_put32(p + 72, rep->t_d2h_us);
	proto_put32(p + 76, rep->t_total_us);
	proto_put64(p + 80, rep->payload_size);
	proto_put64(p + 88, rep->tensor_size);
	proto_put32(p + 96, rep->region_id);
	proto_put32(p + 100, rep->flags);
	memcpy(p + 104, rep->message, mlen);
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
	if (rep->output_loc == FPREP_LOC_INLINE &&
	    rep->payload_size != rep->tensor_size)
		return FPREP_EPROTO;
	return FPREP_OK;
}

int fprep_reply_decode(const void *buf, size_t len, fprep_reply_header *rep)
{
	const uint8_t *p = buf;

	memset(rep, 0, sizeof(*rep));
	if (len >= 4 && proto_get32(p) != FPREP_REPLY_MAGIC)
		return FPREP_EPROTO;
	if (len >= 6)
		rep->version = proto_get16(p + 4);
	if (len >= 8)
		rep->kind = proto_get16(p + 6);
	if (len >= 16)
		rep->request_id = proto_get64(p + 8);
	if (len < FPREP_REPLY_HEADER_SIZE)
		return FPREP_EPROTO;
	if (rep->version != FPREP_PROTOCOL_VERSION)
		return FPREP_EVERSION;
	rep->status = proto_get32(p + 16);
	rep->dtype = p[20];
	rep->layout = p[21];
	rep->ndim = p[22];
	rep->output_loc = p[23];
	for (int i = 0; i < 4; i++)
		rep->shape[i] = proto_get32(p + 24 + 4 * i);
	rep->scale_x = proto_getf(p + 40);
	rep->scale_y = proto_getf(p + 44);
	rep->pad_x = proto_getf(p + 48);
	rep->pad_y = proto_getf(p + 52);
	rep->t_queue_us = proto_get32(p + 56);
	rep->t_compute_us = proto_get32(p + 60);
	rep->t_h2d_us = proto_get32(p + 64);
	rep->t_kernel_us = proto_get32(p + 68);
	rep->t_d2h_us = proto_get32(p + 72);
	rep->t_total_us = proto_get32(p + 76);
	rep->payload_size = proto_get64(p + 80);
	rep->tensor_size = proto_get64(p + 88);
	rep->region_id = proto_get32(p + 96);
	rep->flags = proto_get32(p + 100);
	if (memchr(p + 104, '\0', FPREP_MESSAGE_SIZE) == NULL)
		return FPREP_EPROTO;
	memcpy(rep->message, p + 104, FPREP_MESSAGE_SIZE);
	if (rep->payload_size != len - FPREP_REPLY_HEADER_SIZE || rep->ndim > 4)
		return FPREP_EPROTO;
	if (rep->status == FPREP_OK &&
	    (rep->kind == FPREP_KIND_FRAME || rep->kind == FPREP_KIND_ECHO))
		return proto_check_tensor(rep);
	return FPREP_OK;
}
