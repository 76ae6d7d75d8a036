/*
 * fuzz_request.c: fuzz target for the wire decoders (src/lib/protocol.c).
 *
 * Each input is handed to fprep_request_decode, under tight limits, and to
 * fprep_reply_decode. Besides not crashing or reading out of bounds, an
 * accepted message must keep the promises the daemon relies on: sizes
 * within the limits, the inline payload exactly input_size bytes, a
 * decode that survives re-encoding unchanged, and a frame the CPU op
 * preprocesses without reading outside the payload (which the sanitizers
 * watch; YUV planes included; a JPEG frame, which the daemon decodes
 * first, is refused by the CPU op). Built for libFuzzer with
 * -DFPREP_FUZZ=ON (clang), and run over generated inputs by fuzz_driver.c
 * with any compiler.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"
#include "test_limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Tight limits, so that accepted inputs stay small. */
static const fprep_limits fuzz_limits = {
        TEST_SIZE_LIMITS(64, 64, 64 * 64 * 4 + 4096, 32, 32),
        .max_elements = 8,
        .max_batch_bytes = 4 * 32 * 32 * 3 * 4,
        .max_packet_bytes = 256,
        .max_streams_per_conn = 2,
        .max_streams_per_uid = 4,
        .max_stream_frames = 4,
};

static void fuzz_check(int ok)
{
	if (!ok)
		abort();
}

/* fuzz_elements checks an accepted ROIS or BATCH request: N and the
 * sizes within the limits, the table inside the message, the inline
 * payload exactly what the elements read, the same request decoded from
 * its re-encoded header and table, and the reference op run on a payload
 * copied to a buffer of exactly its size. */
static void fuzz_elements(const uint8_t *data, size_t size,
                          const fprep_request *req)
{
	size_t at = fprep_request_payload_offset(req), tsize;
	fprep_element *el;
	fprep_request req2;
	uint32_t shape[4];
	uint64_t bytes, span;
	uint8_t *again;

	fuzz_check(req->elements >= 1 &&
	           req->elements <= fuzz_limits.max_elements);
	fuzz_check(at <= size && req->src_format <= FPREP_PIX_GRAY8);
	fuzz_check(!req->shm_reply);
	span = req->kind == FPREP_KIND_ROIS ? req->input_size : req->input_span;
	fuzz_check(req->input_loc != FPREP_LOC_INLINE || span == size - at);
	fuzz_check(fprep_tensor_shape(req, shape, &bytes) == FPREP_OK);
	fuzz_check(shape[0] == req->elements &&
	           bytes <= fuzz_limits.max_batch_bytes);
	el = calloc(req->elements, sizeof(*el));
	fuzz_check(el != NULL);
	for (uint32_t k = 0; k < req->elements; k++) {
		fprep_element_get(data + FPREP_REQUEST_HEADER_SIZE, k, &el[k]);
		fuzz_check(req->kind != FPREP_KIND_BATCH ||
		           el[k].offset + req->input_size <= req->input_span);
	}
	again = malloc(size);
	fuzz_check(again != NULL);
	memcpy(again, data, size);
	fprep_request_encode(req, again);
	tsize = at - FPREP_REQUEST_HEADER_SIZE;
	fprep_elements_encode(el, req->elements,
	                      again + FPREP_REQUEST_HEADER_SIZE);
	fuzz_check(tsize == FPREP_TABLE_HEADER_SIZE +
	                            (size_t)req->elements * FPREP_ELEMENT_SIZE);
	fuzz_check(fprep_request_decode(again, size, &fuzz_limits, &req2, NULL,
	                                0) == FPREP_OK);
	fuzz_check(memcmp(req, &req2, sizeof(req2)) == 0);
	free(again);
	if (req->input_loc == FPREP_LOC_INLINE) {
		uint8_t *frames = malloc(span ? span : 1);
		void *tensor = malloc(bytes);

		fuzz_check(frames != NULL && tensor != NULL);
		memcpy(frames, data + at, span);
		fuzz_check(fprep_preprocess_elements_cpu(req, el, frames,
		                                         tensor, bytes,
		                                         NULL) == FPREP_OK);
		free(frames);
		free(tensor);
	}
	free(el);
}

/* fuzz_stream checks an accepted stream request: STREAM_OPEN's parameter
 * sets and tensor within the limits, a packet's bytes exactly its payload
 * and within max_packet_bytes, and the same request decoded from its
 * re-encoded header. */
static void fuzz_stream(const uint8_t *data, size_t size,
                        const fprep_request *req)
{
	fprep_stream_request sr, sr2;
	fprep_request req2;
	uint8_t *again;
	uint32_t shape[4];
	uint64_t bytes;

	again = malloc(size);
	fuzz_check(again != NULL);
	memcpy(again, data, size);
	if (req->kind == FPREP_KIND_STREAM_OPEN) {
		fuzz_check(req->src_format == FPREP_PIX_H264 ||
		           req->src_format == FPREP_PIX_HEVC);
		fuzz_check(req->input_size <= fuzz_limits.max_packet_bytes &&
		           req->input_size == size - FPREP_REQUEST_HEADER_SIZE);
		fuzz_check(req->input_loc == FPREP_LOC_INLINE &&
		           req->output_loc == FPREP_LOC_INLINE);
		fuzz_check(fprep_tensor_shape(req, shape, &bytes) == FPREP_OK);
		fuzz_check(bytes <= fuzz_limits.max_tensor_bytes);
		fprep_request_encode(req, again);
		fuzz_check(fprep_request_decode(again, size, &fuzz_limits,
		                                &req2, NULL, 0) == FPREP_OK);
		fuzz_check(memcmp(req, &req2, sizeof(req2)) == 0);
		free(again);
		return;
	}
	fuzz_check(fprep_stream_request_decode(data, size, &fuzz_limits, &sr,
	                                       NULL, 0) == FPREP_OK);
	fuzz_check(sr.kind == req->kind && sr.stream_id != 0);
	fuzz_check(sr.packet_size == size - FPREP_REQUEST_HEADER_SIZE);
	fuzz_check(sr.packet_size <= fuzz_limits.max_packet_bytes);
	fuzz_check((sr.packet_size > 0) ==
	           (sr.kind == FPREP_KIND_STREAM_PACKET));
	fprep_stream_request_encode(&sr, again);
	fuzz_check(fprep_stream_request_decode(again, size, &fuzz_limits, &sr2,
	                                       NULL, 0) == FPREP_OK);
	fuzz_check(memcmp(&sr, &sr2, sizeof(sr2)) == 0);
	free(again);
}

static void fuzz_request(const uint8_t *data, size_t size)
{
	fprep_request req, req2;
	uint8_t *again;
	char msg[FPREP_MESSAGE_SIZE];
	uint32_t shape[4];
	uint64_t bytes;
	int err;

	err = fprep_request_decode(data, size, &fuzz_limits, &req, msg,
	                           sizeof(msg));
	fuzz_check(strlen(msg) < sizeof(msg));
	if (err != FPREP_OK) {
		fuzz_check(msg[0] != '\0');
		return;
	}
	fuzz_check(size >= FPREP_REQUEST_HEADER_SIZE);
	if (req.kind == FPREP_KIND_ROIS || req.kind == FPREP_KIND_BATCH) {
		fuzz_elements(data, size, &req);
		return;
	}
	if (req.kind >= FPREP_KIND_STREAM_OPEN &&
	    req.kind <= FPREP_KIND_STREAM_CLOSE) {
		fuzz_stream(data, size, &req);
		return;
	}
	if (req.kind != FPREP_KIND_FRAME && req.kind != FPREP_KIND_ECHO)
		return;
	fuzz_check(req.src_width <= fuzz_limits.max_width);
	fuzz_check(req.src_height <= fuzz_limits.max_height);
	fuzz_check(req.input_size <= fuzz_limits.max_frame_bytes);
	fuzz_check(req.src_format == FPREP_PIX_JPEG ||
	           req.input_size >=
	                   (uint64_t)req.src_stride * (req.src_height - 1) +
	                           (uint64_t)req.src_width *
	                                   fprep_pixel_bytes(req.src_format));
	fuzz_check(req.input_loc != FPREP_LOC_INLINE ||
	           req.input_size == size - FPREP_REQUEST_HEADER_SIZE);
	fuzz_check(fprep_tensor_shape(&req, shape, &bytes) == FPREP_OK);
	fuzz_check(bytes <= fuzz_limits.max_tensor_bytes);
	fuzz_check(req.output_loc != FPREP_LOC_SHM ||
	           req.out_capacity >= bytes);

	/* Re-encoded, the message decodes to the same request. */
	again = malloc(size);
	fuzz_check(again != NULL);
	memcpy(again, data, size);
	fprep_request_encode(&req, again);
	err = fprep_request_decode(again, size, &fuzz_limits, &req2, NULL, 0);
	fuzz_check(err == FPREP_OK);
	fuzz_check(memcmp(&req, &req2, sizeof(req)) == 0);
	free(again);

	/* The payload, copied to a buffer of exactly input_size bytes. */
	if (req.input_loc == FPREP_LOC_INLINE) {
		uint8_t *frame = malloc(req.input_size ? req.input_size : 1);
		void *tensor = malloc(bytes);

		fuzz_check(frame != NULL && tensor != NULL);
		memcpy(frame, data + FPREP_REQUEST_HEADER_SIZE, req.input_size);
		fuzz_check(fprep_preprocess_cpu(&req, frame, tensor, bytes,
		                                NULL) ==
		           (req.src_format == FPREP_PIX_JPEG ? FPREP_EINVAL
		                                             : FPREP_OK));
		free(frame);
		free(tensor);
	}
}

static void fuzz_reply(const uint8_t *data, size_t size)
{
	fprep_reply_header rep;

	if (fprep_reply_decode(data, size, &rep) != FPREP_OK)
		return;
	fuzz_check(size >= FPREP_REPLY_HEADER_SIZE);
	fuzz_check(rep.payload_size == size - FPREP_REPLY_HEADER_SIZE);
	fuzz_check(strlen(rep.message) < FPREP_MESSAGE_SIZE);
	fuzz_check(rep.ndim <= 4);
	fuzz_check(fprep_strerror((int)rep.status) != NULL);
	if (rep.status == FPREP_OK && (rep.kind == FPREP_KIND_STREAM_PACKET ||
	                               rep.kind == FPREP_KIND_STREAM_FLUSH)) {
		fprep_stream_frame f;

		fuzz_check(rep.payload_size ==
		           rep.tensor_size + (uint64_t)rep.shape[0] *
		                                     FPREP_STREAM_FRAME_SIZE);
		for (uint32_t k = 0; k < rep.shape[0]; k++)
			fprep_stream_frame_decode(
			        data + FPREP_REPLY_HEADER_SIZE +
			                rep.tensor_size +
			                (size_t)k * FPREP_STREAM_FRAME_SIZE,
			        &f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_request(data, size);
	fuzz_reply(data, size);
	return 0;
}
