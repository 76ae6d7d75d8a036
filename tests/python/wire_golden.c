/*
 * wire_golden.c: the C side of the Python codec's cross-check.
 *
 * `wire_golden write DIR` encodes a fixed set of request and reply headers
 * with fprep_request_encode / fprep_register_request_encode /
 * fprep_reply_encode and writes each to
 * DIR/NAME.bin; the checked-in copies under tests/python/golden/ must equal
 * what this writes, byte for byte.
 *
 * `wire_golden request FILE` and `wire_golden reply FILE` decode a message
 * with fprep_request_decode (and fprep_register_request_decode for REGISTER
 * and UNREGISTER) / fprep_reply_decode and print every decoded
 * field as one JSON object on stdout (floats with 9 significant digits, so
 * binary32 values round-trip), or exit 1 with the error name on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"

static int golden_write(const char *dir, const char *name, const void *buf,
                        size_t size)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.bin", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(buf, 1, size, f) != size) {
		perror(path);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	return fclose(f) == 0 ? 0 : -1;
}

static int golden_request(const char *dir, const char *name,
                          const fprep_request *req)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];

	fprep_request_encode(req, buf);
	return golden_write(dir, name, buf, sizeof(buf));
}

static int golden_register(const char *dir, const char *name,
                           const fprep_register_request *req)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];

	fprep_register_request_encode(req, buf);
	return golden_write(dir, name, buf, sizeof(buf));
}

static int golden_reply(const char *dir, const char *name,
                        const fprep_reply_header *rep)
{
	uint8_t buf[FPREP_REPLY_HEADER_SIZE];

	fprep_reply_encode(rep, buf);
	return golden_write(dir, name, buf, sizeof(buf));
}

static int golden_write_all(const char *dir)
{
	fprep_register_request reg;
	fprep_request req;
	fprep_reply_header rep;
	int err = 0;

	fprep_request_init(&req, FPREP_PIX_BGR8, 1920, 1080);
	req.request_id = 1;
	err |= golden_request(dir, "request_frame_default", &req);

	fprep_request_init(&req, FPREP_PIX_RGBA8, 333, 221);
	req.kind = FPREP_KIND_ECHO;
	req.request_id = 0x0123456789abcdefull;
	req.src_stride = 2048;
	req.input_size = 2048u * 220u + 333u * 4u;
	req.out_width = 416;
	req.out_height = 256;
	req.resize = FPREP_RESIZE_STRETCH;
	req.channel_order = FPREP_ORDER_BGR;
	req.dtype = FPREP_DTYPE_F16;
	req.layout = FPREP_LAYOUT_NHWC;
	req.pad_value = 0.5f;
	req.scale = 0.017f;
	req.mean[0] = 0.485f;
	req.mean[1] = 0.456f;
	req.mean[2] = 0.406f;
	req.std[0] = 0.229f;
	req.std[1] = 0.224f;
	req.std[2] = 0.225f;
	err |= golden_request(dir, "request_echo_options", &req);

	fprep_request_init(&req, FPREP_PIX_GRAY8, 640, 480);
	req.request_id = 77;
	req.channel_order = FPREP_ORDER_GRAY;
	req.dtype = FPREP_DTYPE_U8;
	req.input_loc = FPREP_LOC_SHM;
	req.output_loc = FPREP_LOC_SHM;
	req.in_region = 3;
	req.out_region = 4;
	req.in_offset = 0x100000000ull + 4096;
	req.out_offset = 8192;
	req.out_capacity = 640u * 640u;
	err |= golden_request(dir, "request_frame_shm", &req);

	/* A decoder's padded NV12 1080p frame (pitch 2048, 1088 rows). */
	fprep_request_init(&req, FPREP_PIX_NV12, 1920, 1080);
	req.request_id = 78;
	req.yuv_matrix = FPREP_MATRIX_BT709;
	req.yuv_range = FPREP_RANGE_FULL;
	req.src_stride = 2048;
	req.uv_stride = 2048;
	req.u_offset = 2048u * 1088u;
	req.input_size = 2048u * 1088u * 3u / 2u;
	req.input_loc = FPREP_LOC_SHM;
	req.in_region = 2;
	req.in_offset = 3u << 20;
	err |= golden_request(dir, "request_frame_nv12", &req);

	fprep_request_init(&req, FPREP_PIX_I420, 64, 48);
	req.request_id = 79;
	req.yuv_matrix = FPREP_MATRIX_BT2020;
	req.yuv_range = FPREP_RANGE_LIMITED;
	err |= golden_request(dir, "request_frame_i420", &req);

	fprep_request_init(&req, FPREP_PIX_JPEG, 0, 0);
	req.request_id = 80;
	req.input_size = 274321;
	req.channel_order = FPREP_ORDER_BGR;
	err |= golden_request(dir, "request_frame_jpeg", &req);

	memset(&req, 0, sizeof(req));
	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_INFO;
	req.request_id = 9;
	err |= golden_request(dir, "request_info", &req);

	memset(&reg, 0, sizeof(reg));
	reg.version = FPREP_PROTOCOL_VERSION;
	reg.kind = FPREP_KIND_REGISTER;
	reg.request_id = 10;
	reg.region_size = 3u << 20;
	snprintf(reg.region_name, sizeof(reg.region_name), "%s",
	         "/frameprep-py-1234-0");
	err |= golden_register(dir, "request_register", &reg);

	memset(&reg, 0, sizeof(reg));
	reg.version = FPREP_PROTOCOL_VERSION;
	reg.kind = FPREP_KIND_UNREGISTER;
	reg.request_id = 11;
	reg.region_id = 5;
	err |= golden_register(dir, "request_unregister", &reg);

	memset(&reg, 0, sizeof(reg));
	reg.version = FPREP_PROTOCOL_VERSION;
	reg.kind = FPREP_KIND_REGISTER_CUDA;
	reg.request_id = 12;
	reg.region_size = 8u * 3u * 640u * 640u * 4u;
	reg.cuda_offset = 3u * 640u * 640u * 4u + 512u;
	for (int i = 0; i < FPREP_CUDA_HANDLE_SIZE; i++)
		reg.cuda_handle[i] = (uint8_t)(i * 7 + 1);
	for (int i = 0; i < FPREP_CUDA_UUID_SIZE; i++)
		reg.cuda_uuid[i] = (uint8_t)(0xf0 - i);
	err |= golden_register(dir, "request_register_cuda", &reg);

	memset(&reg, 0, sizeof(reg));
	reg.version = FPREP_PROTOCOL_VERSION;
	reg.kind = FPREP_KIND_DOORBELL;
	reg.request_id = 14;
	reg.region_id = 5;
	reg.doorbell_entries = 4;
	reg.doorbell_offset = 8192;
	err |= golden_register(dir, "request_doorbell", &reg);

	fprep_request_init(&req, FPREP_PIX_BGR8, 1920, 1080);
	req.request_id = 13;
	req.input_loc = FPREP_LOC_CUDA;
	req.output_loc = FPREP_LOC_CUDA;
	req.in_region = 6;
	req.out_region = 7;
	req.in_offset = 1920u * 1080u * 3u;
	req.out_offset = 2u * 3u * 640u * 640u * 4u;
	req.out_capacity = 3u * 640u * 640u * 4u;
	err |= golden_request(dir, "request_frame_cuda", &req);

	memset(&rep, 0, sizeof(rep));
	rep.version = FPREP_PROTOCOL_VERSION;
	rep.kind = FPREP_KIND_FRAME;
	rep.request_id = 1;
	rep.dtype = FPREP_DTYPE_F32;
	rep.layout = FPREP_LAYOUT_NCHW;
	rep.ndim = 4;
	rep.output_loc = FPREP_LOC_INLINE;
	rep.shape[0] = 1;
	rep.shape[1] = 3;
	rep.shape[2] = 640;
	rep.shape[3] = 640;
	rep.scale_x = 0.333333343f;
	rep.scale_y = 0.333333343f;
	rep.pad_x = 0;
	rep.pad_y = 140;
	rep.t_queue_us = 12;
	rep.t_compute_us = 3456;
	rep.t_h2d_us = 7;
	rep.t_kernel_us = 8;
	rep.t_d2h_us = 9;
	rep.t_total_us = 3500;
	rep.tensor_size = 3u * 640u * 640u * 4u;
	rep.payload_size = rep.tensor_size;
	err |= golden_reply(dir, "reply_frame", &rep);

	rep.decoded_width = 1920;
	rep.decoded_height = 1080;
	rep.t_decode_us = 2345;
	err |= golden_reply(dir, "reply_frame_jpeg", &rep);
	rep.decoded_width = rep.decoded_height = 0;
	rep.t_decode_us = 0;

	rep.kind = FPREP_KIND_ECHO;
	rep.request_id = 0xfedcba9876543210ull;
	rep.dtype = FPREP_DTYPE_F16;
	rep.layout = FPREP_LAYOUT_NHWC;
	rep.output_loc = FPREP_LOC_SHM;
	rep.shape[1] = 256;
	rep.shape[2] = 416;
	rep.shape[3] = 3;
	rep.scale_x = 1.24924922f;
	rep.scale_y = 1.15837097f;
	rep.pad_x = 0.5f;
	rep.pad_y = 0;
	rep.tensor_size = 256u * 416u * 3u * 2u;
	rep.payload_size = 0;
	rep.flags = FPREP_REPLY_F_INPUT_RELEASED;
	err |= golden_reply(dir, "reply_echo_shm", &rep);

	memset(&rep, 0, sizeof(rep));
	rep.version = FPREP_PROTOCOL_VERSION;
	rep.kind = FPREP_KIND_FRAME;
	rep.request_id = 42;
	rep.status = FPREP_ELIMIT;
	snprintf(rep.message, sizeof(rep.message), "%s",
	         "src_width 9000 exceeds the limit 8192");
	err |= golden_reply(dir, "reply_error", &rep);

	memset(&rep, 0, sizeof(rep));
	rep.version = FPREP_PROTOCOL_VERSION;
	rep.kind = FPREP_KIND_REGISTER;
	rep.request_id = 10;
	rep.region_id = 5;
	memset(rep.message, 'm', sizeof(rep.message) - 1);
	err |= golden_reply(dir, "reply_register", &rep);
	return err ? 1 : 0;
}

/* golden_read reads a whole file into a malloc'd buffer. */
static uint8_t *golden_read(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		goto out;
	buf = malloc((size_t)n + 1);
	if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	*size = (size_t)n;
out:
	if (f != NULL)
		fclose(f);
	if (buf == NULL)
		perror(path);
	return buf;
}

static void golden_print_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static int golden_print_request(const uint8_t *buf, size_t size)
{
	const fprep_limits lim = {
	        .max_width = 1u << 16,
	        .max_height = 1u << 16,
	        .max_frame_bytes = 1ull << 34,
	        .max_out_width = 1u << 16,
	        .max_out_height = 1u << 16,
	        .max_tensor_bytes = 1ull << 36,
	};
	fprep_register_request g = {0};
	fprep_request r;
	char msg[FPREP_MESSAGE_SIZE];
	int err = fprep_request_decode(buf, size, &lim, &r, msg, sizeof(msg));

	if (err == 0 &&
	    (r.kind == FPREP_KIND_REGISTER || r.kind == FPREP_KIND_UNREGISTER ||
	     r.kind == FPREP_KIND_REGISTER_CUDA ||
	     r.kind == FPREP_KIND_DOORBELL))
		err = fprep_register_request_decode(buf, size, &g, msg,
		                                    sizeof(msg));
	if (err) {
		fprintf(stderr, "%s: %s\n", fprep_err_name(err), msg);
		return 1;
	}
	printf("{\"version\": %u, \"kind\": %u, \"request_id\": %llu, "
	       "\"src_format\": %u, \"yuv_matrix\": %u, \"yuv_range\": %u, "
	       "\"src_width\": %u, \"src_height\": %u, "
	       "\"src_stride\": %u, \"out_width\": %u, \"out_height\": %u, "
	       "\"resize\": %u, \"channel_order\": %u, \"dtype\": %u, "
	       "\"layout\": %u, \"pad_value\": %.9g, \"scale\": %.9g, "
	       "\"mean\": [%.9g, %.9g, %.9g], \"std\": [%.9g, %.9g, %.9g], "
	       "\"input_loc\": %u, \"output_loc\": %u, \"in_region\": %u, "
	       "\"out_region\": %u, \"in_offset\": %llu, \"out_offset\": "
	       "%llu, \"out_capacity\": %llu, \"input_size\": %llu, "
	       "\"uv_stride\": %u, \"u_offset\": %u, \"v_offset\": %u, "
	       "\"shm_reply\": %u, \"region_size\": %llu, \"region_id\": %u, "
	       "\"cuda_offset\": "
	       "%llu, \"cuda_handle\": \"",
	       r.version, r.kind, (unsigned long long)r.request_id,
	       r.src_format, r.yuv_matrix, r.yuv_range, r.src_width,
	       r.src_height, r.src_stride, r.out_width, r.out_height, r.resize,
	       r.channel_order, r.dtype, r.layout, (double)r.pad_value,
	       (double)r.scale, (double)r.mean[0], (double)r.mean[1],
	       (double)r.mean[2], (double)r.std[0], (double)r.std[1],
	       (double)r.std[2], r.input_loc, r.output_loc, r.in_region,
	       r.out_region, (unsigned long long)r.in_offset,
	       (unsigned long long)r.out_offset,
	       (unsigned long long)r.out_capacity,
	       (unsigned long long)r.input_size, r.uv_stride, r.u_offset,
	       r.v_offset, r.shm_reply, (unsigned long long)g.region_size,
	       g.region_id, (unsigned long long)g.cuda_offset);
	for (int i = 0; i < FPREP_CUDA_HANDLE_SIZE; i++)
		printf("%02x", g.cuda_handle[i]);
	printf("\", \"cuda_uuid\": \"");
	for (int i = 0; i < FPREP_CUDA_UUID_SIZE; i++)
		printf("%02x", g.cuda_uuid[i]);
	printf("\", \"region_name\": ");
	golden_print_string(g.region_name);
	printf(", \"doorbell_entries\": %u, \"doorbell_offset\": %llu}\n",
	       g.doorbell_entries, (unsigned long long)g.doorbell_offset);
	return 0;
}

static int golden_print_reply(const uint8_t *buf, size_t size)
{
	fprep_reply_header h;
	int err = fprep_reply_decode(buf, size, &h);

	if (err) {
		fprintf(stderr, "%s\n", fprep_err_name(err));
		return 1;
	}
	printf("{\"version\": %u, \"kind\": %u, \"request_id\": %llu, "
	       "\"status\": %u, \"dtype\": %u, \"layout\": %u, \"ndim\": %u, "
	       "\"output_loc\": %u, \"shape\": [%u, %u, %u, %u], "
	       "\"scale_x\": %.9g, \"scale_y\": %.9g, \"pad_x\": %.9g, "
	       "\"pad_y\": %.9g, \"t_queue_us\": %u, \"t_compute_us\": %u, "
	       "\"t_h2d_us\": %u, \"t_kernel_us\": %u, \"t_d2h_us\": %u, "
	       "\"t_total_us\": %u, \"payload_size\": %llu, "
	       "\"tensor_size\": %llu, \"region_id\": %u, \"flags\": %u, "
	       "\"decoded_width\": %u, \"decoded_height\": %u, "
	       "\"t_decode_us\": %u, \"message\": ",
	       h.version, h.kind, (unsigned long long)h.request_id, h.status,
	       h.dtype, h.layout, h.ndim, h.output_loc, h.shape[0], h.shape[1],
	       h.shape[2], h.shape[3], (double)h.scale_x, (double)h.scale_y,
	       (double)h.pad_x, (double)h.pad_y, h.t_queue_us, h.t_compute_us,
	       h.t_h2d_us, h.t_kernel_us, h.t_d2h_us, h.t_total_us,
	       (unsigned long long)h.payload_size,
	       (unsigned long long)h.tensor_size, h.region_id, h.flags,
	       h.decoded_width, h.decoded_height, h.t_decode_us);
	golden_print_string(h.message);
	printf("}\n");
	return 0;
}

int main(int argc, char **argv)
{
	uint8_t *buf;
	size_t size = 0;
	int ret;

	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return golden_write_all(argv[2]);
	if (argc != 3 || (strcmp(argv[1], "request") != 0 &&
	                  strcmp(argv[1], "reply") != 0)) {
		fprintf(stderr, "usage: wire_golden write DIR | request FILE | "
		                "reply FILE\n");
		return 2;
	}
	buf = golden_read(argv[2], &size);
	if (buf == NULL)
		return 2;
	ret = strcmp(argv[1], "request") == 0 ? golden_print_request(buf, size)
	                                      : golden_print_reply(buf, size);
	free(buf);
	return ret;
}
