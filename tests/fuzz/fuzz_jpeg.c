/*
 * fuzz_jpeg.c: fuzz target for the daemon's JPEG step (src/backend/jpeg.c:
 * its SOF scanner, libjpeg-turbo's header and decode, the limits), and a
 * driver that runs it without libFuzzer.
 *
 * Each input is a JPEG frame's bytes, handed to one decoder (one handle and
 * buffer kept across inputs, as a worker keeps them) under tight limits.
 * Besides not crashing or reading outside the input (which the sanitizers
 * watch), a frame must be refused with EINVAL or ELIMIT and a message, or
 * decoded within the limits into a frame the CPU op then letterboxes; and
 * a good JPEG must still decode after any refusal.
 *
 * The driver (main, unless built for libFuzzer with FPREP_LIBFUZZER)
 * encodes its seeds with libjpeg-turbo (gray, 4:2:0, 4:2:2, 4:4:4,
 * progressive), runs every truncation of each and 20,000
 * seeded mutations per seed (bit flips, boundary bytes, size fields of the
 * SOF rewritten, lengths changed) anywhere in the file. Deterministic.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include "backend.h"
#include "frameprep/frameprep.h"
#include "jpeg.h"
#include "test_limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Tight limits, so that accepted inputs stay small. */
static const fprep_limits fuzz_limits = {
        TEST_SIZE_LIMITS(64, 64, 64 * 48 * 3, 32, 32)};

static fprep__jpeg fuzz_jpeg;
static int fuzz_jpeg_ready;

static void fuzz_check(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static float tensor[32 * 32 * 3];
	char msg[FPREP_MESSAGE_SIZE];
	fprep_request raw;
	fprep__job job;
	uint8_t *dst;
	int rc;

	if (!fuzz_jpeg_ready) {
		fprep__jpeg_init(&fuzz_jpeg);
		fuzz_jpeg_ready = 1;
	}
	memset(&job, 0, sizeof(job));
	fprep_request_init(&job.req, FPREP_PIX_JPEG, 0, 0);
	job.req.out_width = job.req.out_height = 32;
	job.req.input_size = size;
	job.input = data;
	job.limits = &fuzz_limits;
	fuzz_check(fprep__job_plan(&job) == FPREP_OK);
	msg[0] = '\0';
	rc = fprep__jpeg_open(&fuzz_jpeg, &job, NULL, &raw, msg, sizeof(msg));
	if (rc == FPREP_OK) {
		fuzz_check(raw.src_width >= 1 && raw.src_width <= 64);
		fuzz_check(raw.src_height >= 1 && raw.src_height <= 64);
		fuzz_check(raw.input_size <= fuzz_limits.max_frame_bytes);
		dst = fprep__jpeg_buffer(&fuzz_jpeg, raw.input_size);
		fuzz_check(dst != NULL);
		rc = fprep__jpeg_decode(&fuzz_jpeg, &job, &raw, dst, msg,
		                        sizeof(msg));
	}
	if (rc != FPREP_OK) {
		fuzz_check(rc == FPREP_EINVAL || rc == FPREP_ELIMIT);
		fuzz_check(msg[0] != '\0' && strlen(msg) < sizeof(msg));
		return 0;
	}
	fuzz_check(job.input == dst && job.req.src_format != FPREP_PIX_JPEG);
	fuzz_check(job.decoded_width == job.req.src_width &&
	           job.decoded_height == job.req.src_height);
	fuzz_check(fprep_preprocess_cpu(&job.req, job.input, tensor,
	                                sizeof(tensor), NULL) == FPREP_OK);
	return 0;
}

#ifndef FPREP_LIBFUZZER
#include "fuzz_util.h"

#define DRIVER_MUTATIONS 20000

/* driver_mutate runs every truncation of a seed and DRIVER_MUTATIONS
 * random variations of it, anywhere in the file. */
static void driver_mutate(const uint8_t *seed, size_t size)
{
	static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80,
	                                  0xd8, 0xd9, 0xda, 0xff};

	for (size_t n = 0; n < size; n++)
		driver_run(seed, n);
	driver_mutations(seed, size, size, DRIVER_MUTATIONS, special,
	                 sizeof(special), 1);
}

int main(void)
{
	static const struct {
		int w, h, sub, flags;
	} seeds[] = {
	        {31, 23, TJSAMP_GRAY, 0},
	        {32, 24, TJSAMP_420, 0},
	        {17, 40, TJSAMP_422, TJFLAG_PROGRESSIVE},
	        {48, 33, TJSAMP_444, 0},
	};
	uint8_t px[64 * 64 * 3];
	unsigned long runs = 0;

	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(driver_rand() >> 56);
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		/* A handle per seed: libjpeg-turbo 2.1.5's compressor, used
		 * again after a TJFLAG_PROGRESSIVE image, writes a JPEG that
		 * decodes as "Corrupt JPEG data: bad Huffman code". */
		tjhandle tc = tjInitCompress();
		unsigned char *jpg = NULL;
		unsigned long size = 0;

		fuzz_check(tc != NULL);
		fuzz_check(tjCompress2(tc, px, seeds[s].w, 0, seeds[s].h,
		                       TJPF_RGB, &jpg, &size, seeds[s].sub, 80,
		                       seeds[s].flags) == 0);
		driver_mutate(jpg, size);
		runs += size + DRIVER_MUTATIONS;
		/* After all that, the seed itself decodes. */
		char msg[FPREP_MESSAGE_SIZE];
		fprep_request raw;
		fprep__job job;

		memset(&job, 0, sizeof(job));
		fprep_request_init(&job.req, FPREP_PIX_JPEG, 0, 0);
		job.req.input_size = size;
		job.input = jpg;
		job.limits = &fuzz_limits;
		fuzz_check(fprep__jpeg_open(&fuzz_jpeg, &job, NULL, &raw, msg,
		                            sizeof(msg)) == FPREP_OK);
		fuzz_check(
		        fprep__jpeg_decode(
		                &fuzz_jpeg, &job, &raw,
		                fprep__jpeg_buffer(&fuzz_jpeg, raw.input_size),
		                msg, sizeof(msg)) == FPREP_OK);
		tjFree(jpg);
		tjDestroy(tc);
	}
	fprep__jpeg_fini(&fuzz_jpeg);
	printf("fuzz_jpeg: %lu inputs, no crash, every refusal named\n", runs);
	return 0;
}
#endif
