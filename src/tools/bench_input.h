/*
 * bench_input.h: the frames frameprep-bench sends and how replies to them
 * are checked.
 *
 * Inputs are decoded (or generated) once before the run; each carries its
 * FRAME request template, the tensor shape and size that request must
 * produce (from fprep_tensor_shape), and, computed once on first use, the
 * CPU reference tensor (fprep_preprocess_cpu) that replies are compared
 * with.
 */
#ifndef FRAMEPREP_BENCH_INPUT_H
#define FRAMEPREP_BENCH_INPUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"

/* bench_frame_spec: where frames come from and what is asked of them. */
typedef struct bench_frame_spec {
	const char *image;     /* --image FILE, or NULL */
	const char *image_dir; /* --image-dir DIR, or NULL */
	uint32_t synth_w;      /* --synthetic WxH (0: none) */
	uint32_t synth_h;
	uint32_t frame_w; /* --frame-size: resize decoded images (0: keep) */
	uint32_t frame_h;
	uint16_t format; /* enum fprep_pixel_format of the frames */
	uint64_t seed;   /* synthetic pixels */
	fprep_request
	        tmpl; /* output options; source fields are filled per input */
} bench_frame_spec;

/* bench_input: one frame and its expected reply. */
typedef struct bench_input {
	char name[256];
	uint8_t *pixels;   /* src_height rows of src_stride bytes, owned */
	fprep_request req; /* FRAME request for these pixels */
	uint32_t shape[4]; /* expected tensor shape */
	uint64_t tensor_bytes;
	pthread_mutex_t ref_lock;
	void *ref; /* CPU reference tensor, tensor_bytes, lazily computed */
	int ref_err;
	atomic_uint_fast64_t replies; /* replies checked so far (sampling) */
	/* ROIS and BATCH (bench_elements.h): req.elements elements, owned,
	 * and a BATCH's frames (req.input_span bytes, owned); else NULL. */
	fprep_element *els;
	uint8_t *frames;
} bench_input;

/* bench_splitmix64 advances the SplitMix64 generator state *s and returns
 * the next pseudo-random value (seeded pixels, Poisson arrivals). */
uint64_t bench_splitmix64(uint64_t *s);

/* bench_inputs_load builds the inputs described by spec into a new array
 * stored in *inputsp with its length in *countp. Images are decoded with
 * stb_image into spec->format; an unreadable file in a directory is skipped
 * with a warning, an unreadable --image is an error. Returns 0, or -1 after
 * printing the reason to stderr. Release with bench_inputs_free. */
int bench_inputs_load(const bench_frame_spec *spec, bench_input **inputsp,
                      size_t *countp);

/* bench_inputs_free releases what bench_inputs_load made. */
void bench_inputs_free(bench_input *inputs, size_t count);

/* bench_compare checks a FRAME tensor of in->tensor_bytes bytes against the
 * CPU reference (computed on first use; thread-safe). Tolerances per
 * element: u8 1; f32 one source level in tensor units (|scale / std[c]|)
 * plus 1e-6; f16 that plus one f16 ulp of the reference value. On a
 * mismatch writes a sentence naming the first bad element into msg and
 * returns FPREP_EMISMATCH; returns FPREP_OK on a match, or the error of the
 * CPU reference itself. */
int bench_compare(bench_input *in, const void *tensor, char *msg,
                  size_t msg_size);

#endif /* FRAMEPREP_BENCH_INPUT_H */
