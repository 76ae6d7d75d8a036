/*
 * fuzz_driver.c: runs the fuzz target of fuzz_request.c without libFuzzer.
 *
 * It generates its corpus: valid requests of every kind and location and
 * valid replies, then every truncation of each, and 10,000 seeded mutations
 * (bit flips, byte overwrites with boundary values, length changes) per
 * seed. Each input is copied into a buffer of exactly its size so that a
 * sanitizer build catches any read past the end. Deterministic: the seed
 * is fixed, or given as the first argument.
 *
 * "fuzz_driver --write-seeds DIR" writes the seeds alone into DIR, one
 * file each, and runs nothing: the corpus a libFuzzer run starts from.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "fuzz_util.h"

#define DRIVER_MUTATIONS 10000

/* With --write-seeds: where the seeds go, and how many were written. */
static const char *driver_seed_dir;
static unsigned driver_seeds;

/* driver_mutate runs DRIVER_MUTATIONS random variations of a seed, mostly
 * in the header, where the parser looks. */
static void driver_mutate(const uint8_t *seed, size_t size)
{
	static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};

	driver_mutations(seed, size, 256, DRIVER_MUTATIONS, special,
	                 sizeof(special), 0);
}

/* driver_write writes a seed into driver_seed_dir. */
static void driver_write(const uint8_t *seed, size_t size)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%02u", driver_seed_dir,
	         driver_seeds++);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(seed, 1, size, f) != size || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void driver_seed(const uint8_t *seed, size_t size)
{
	if (driver_seed_dir != NULL) {
		driver_write(seed, size);
		return;
	}
	for (size_t len = 0; len <= size; len++)
		driver_run(seed, len);
	driver_mutate(seed, size);
}

/* driver_request seeds with a request, its payload filled. */
static void driver_request(const fprep_request *req, size_t payload)
{
	size_t size = FPREP_REQUEST_HEADER_SIZE + payload;
	uint8_t *buf = calloc(1, size);

	if (buf == NULL)
		abort();
	fprep_request_encode(req, buf);
	for (size_t i = 0; i < payload; i++)
		buf[FPREP_REQUEST_HEADER_SIZE + i] = (uint8_t)i;
	driver_seed(buf, size);
	free(buf);
}

/* driver_register seeds with a REGISTER, UNREGISTER or REGISTER_CUDA. */
static void driver_register(const fprep_register_request *req)
{
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];

	fprep_register_request_encode(req, buf);
	driver_seed(buf, sizeof(buf));
}

/* driver_elements seeds with a ROIS or BATCH request: header, element
 * table, payload filled. */
static void driver_elements(const fprep_request *req, const fprep_element *el,
                            uint32_t n, size_t payload)
{
	size_t table = FPREP_TABLE_HEADER_SIZE + (size_t)n * FPREP_ELEMENT_SIZE;
	size_t at = FPREP_REQUEST_HEADER_SIZE + table;
	uint8_t *buf = calloc(1, at + payload);

	if (buf == NULL)
		abort();
	fprep_request_encode(req, buf);
	fprep_elements_encode(el, n, buf + FPREP_REQUEST_HEADER_SIZE);
	for (size_t i = 0; i < payload; i++)
		buf[at + i] = (uint8_t)(i * 7);
	driver_seed(buf, at + payload);
	free(buf);
}

/* driver_stream seeds with a STREAM_PACKET, STREAM_FLUSH or
 * STREAM_CLOSE request, its packet filled with start codes and bytes. */
static void driver_stream(const fprep_stream_request *req)
{
	size_t size = FPREP_REQUEST_HEADER_SIZE + (size_t)req->packet_size;
	uint8_t *buf = calloc(1, size);

	if (buf == NULL)
		abort();
	fprep_stream_request_encode(req, buf);
	for (size_t i = 0; i < req->packet_size; i++)
		buf[FPREP_REQUEST_HEADER_SIZE + i] =
		        i % 8 < 3 ? (uint8_t)(i % 8 == 2) : (uint8_t)(i * 5);
	driver_seed(buf, size);
	free(buf);
}

static void driver_reply(const fprep_reply_header *rep)
{
	size_t size = FPREP_REPLY_HEADER_SIZE + (size_t)rep->payload_size;
	uint8_t *buf = calloc(1, size);

	if (buf == NULL)
		abort();
	fprep_reply_encode(rep, buf);
	driver_seed(buf, size);
	free(buf);
}

int main(int argc, char **argv)
{
	fprep_register_request reg;
	fprep_request req;
	fprep_reply_header rep;

	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		driver_seed_dir = argv[2];
	else if (argc > 1)
		driver_state = strtoull(argv[1], NULL, 0) | 1;

	fprep_request_init(&req, FPREP_PIX_BGR8, 8, 6);
	req.out_width = 16;
	req.out_height = 12;
	req.request_id = 77;
	driver_request(&req, (size_t)req.input_size);

	/* JPEG frames: the size from the header (0x0) or on the wire. */
	fprep_request_init(&req, FPREP_PIX_JPEG, 0, 0);
	req.out_width = 16;
	req.out_height = 12;
	req.input_size = 40;
	driver_request(&req, (size_t)req.input_size);
	req.src_width = 8;
	req.src_height = 6;
	req.channel_order = FPREP_ORDER_GRAY;
	driver_request(&req, (size_t)req.input_size);

	/* YUV frames with padded rows and chroma planes after gaps. */
	for (uint16_t f = FPREP_PIX_NV12; f <= FPREP_PIX_YUYV; f++) {
		fprep_request_init(&req, f, 8, 6);
		req.out_width = 16;
		req.out_height = 12;
		req.yuv_matrix = (uint8_t)(f - FPREP_PIX_GRAY8);
		req.yuv_range = FPREP_RANGE_FULL;
		req.src_stride += 3;
		req.input_size = (uint64_t)req.src_stride * 6;
		if (f != FPREP_PIX_YUYV) {
			req.uv_stride = (uint16_t)(req.uv_stride + 2);
			req.u_offset = req.src_stride * 6 + 5;
			req.v_offset =
			        f == FPREP_PIX_I420
			                ? req.u_offset + req.uv_stride * 3
			                : 0;
			req.input_size = (f == FPREP_PIX_I420 ? req.v_offset
			                                      : req.u_offset) +
			                 req.uv_stride * 3u;
		}
		driver_request(&req, (size_t)req.input_size);
	}

	fprep_request_init(&req, FPREP_PIX_BGR8, 8, 6);
	req.out_width = 16;
	req.out_height = 12;
	req.request_id = 77;
	req.kind = FPREP_KIND_ECHO;
	req.src_format = FPREP_PIX_GRAY8;
	req.channel_order = FPREP_ORDER_GRAY;
	req.dtype = FPREP_DTYPE_U8;
	req.layout = FPREP_LAYOUT_NHWC;
	req.src_stride = 9;
	req.input_size = 9 * 5 + 8;
	driver_request(&req, (size_t)req.input_size);

	req.input_loc = FPREP_LOC_SHM;
	req.output_loc = FPREP_LOC_SHM;
	req.in_region = 3;
	req.out_region = 4;
	req.in_offset = 4096;
	req.out_capacity = 16 * 12;
	driver_request(&req, 0);

	req.input_loc = FPREP_LOC_CUDA;
	req.output_loc = FPREP_LOC_CUDA;
	driver_request(&req, 0);

	/* ROIS: boxes inside, across the edge, fractional, an affine; BATCH:
	 * two frames inline and in a region. */
	{
		fprep_element el[4] = {
		        {.type = FPREP_ELEM_BOX, .v = {1, 1, 4, 3}},
		        {.type = FPREP_ELEM_BOX,
		         .resize = FPREP_RESIZE_STRETCH,
		         .v = {-2.5f, 3.25f, 5.5f, 6}},
		        {.type = FPREP_ELEM_AFFINE,
		         .v = {0.8f, -0.6f, 4, 0.6f, 0.8f, -1}},
		        {.type = FPREP_ELEM_FRAME, .offset = 0},
		};

		fprep_request_init(&req, FPREP_PIX_BGR8, 8, 6);
		req.kind = FPREP_KIND_ROIS;
		req.out_width = 6;
		req.out_height = 4;
		driver_elements(&req, el, 3, (size_t)req.input_size);
		req.kind = FPREP_KIND_BATCH;
		req.dtype = FPREP_DTYPE_U8;
		el[1] = el[3];
		el[1].offset = req.input_size;
		driver_elements(&req, el + 3, 1, (size_t)req.input_size);
		driver_elements(&req, el + 1, 2, 2 * (size_t)req.input_size);
		req.input_loc = FPREP_LOC_SHM;
		req.in_region = 2;
		driver_elements(&req, el + 1, 2, 0);
	}

	/* Video streams: an open with parameter sets, a packet, a flush and
	 * a close. */
	{
		fprep_stream_request sr = {
		        .version = FPREP_PROTOCOL_VERSION,
		        .kind = FPREP_KIND_STREAM_PACKET,
		        .request_id = 78,
		        .stream_id = 5,
		        .pts = -3,
		        .packet_size = 24,
		};

		fprep_stream_request_init(&req, FPREP_PIX_HEVC);
		req.out_width = 16;
		req.out_height = 12;
		req.input_size = 16;
		driver_request(&req, (size_t)req.input_size);
		driver_stream(&sr);
		sr.kind = FPREP_KIND_STREAM_FLUSH;
		sr.pts = 0;
		sr.packet_size = 0;
		driver_stream(&sr);
		sr.kind = FPREP_KIND_STREAM_CLOSE;
		driver_stream(&sr);
	}

	memset(&reg, 0, sizeof(reg));
	reg.version = FPREP_PROTOCOL_VERSION;
	reg.kind = FPREP_KIND_REGISTER_CUDA;
	reg.region_size = 1u << 20;
	reg.cuda_offset = 512;
	memset(reg.cuda_handle, 0x3c, sizeof(reg.cuda_handle));
	memset(reg.cuda_uuid, 0xc3, sizeof(reg.cuda_uuid));
	driver_register(&reg);

	memset(&req, 0, sizeof(req));
	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_INFO;
	driver_request(&req, 0);

	memset(&rep, 0, sizeof(rep));
	rep.version = FPREP_PROTOCOL_VERSION;
	rep.kind = FPREP_KIND_FRAME;
	rep.request_id = 77;
	rep.dtype = FPREP_DTYPE_U8;
	rep.layout = FPREP_LAYOUT_NCHW;
	rep.ndim = 4;
	rep.shape[0] = 1;
	rep.shape[1] = 3;
	rep.shape[2] = 4;
	rep.shape[3] = 5;
	rep.tensor_size = 60;
	rep.payload_size = 60;
	snprintf(rep.message, sizeof(rep.message), "ok");
	driver_reply(&rep);

	rep.status = FPREP_EINVAL;
	rep.ndim = 0;
	rep.tensor_size = 0;
	rep.payload_size = 0;
	snprintf(rep.message, sizeof(rep.message), "src_width is 0");
	driver_reply(&rep);

	/* A stream reply with two frames (tensors, then frame records). */
	rep.status = FPREP_OK;
	rep.kind = FPREP_KIND_STREAM_PACKET;
	rep.ndim = 4;
	rep.shape[0] = 2;
	rep.tensor_size = 120;
	rep.payload_size = 120 + 2 * FPREP_STREAM_FRAME_SIZE;
	rep.message[0] = '\0';
	driver_reply(&rep);

	if (driver_seed_dir != NULL) {
		printf("fuzz_driver: %u seeds written to %s\n", driver_seeds,
		       driver_seed_dir);
		return 0;
	}
	printf("fuzz_driver: 18 seeds, every truncation and %d mutations "
	       "each\n",
	       DRIVER_MUTATIONS);
	return 0;
}
