/*
 * bench_elements.h: frameprep-bench's ROIS and BATCH modes (--rois N,
 * --batch N): each input becomes one request of N elements.
 */
#ifndef FRAMEPREP_BENCH_ELEMENTS_H
#define FRAMEPREP_BENCH_ELEMENTS_H

#include <stddef.h>

#include "bench_input.h"

/* bench_elements_setup turns every input into a ROIS request of rois
 * boxes (rois > 0: boxes of 1/8 to 1/3 of the frame's sides, spread over
 * it, a few across its edges, every fourth one stretched) or a BATCH
 * request of batch frames (batch > 0: the input's frame copied batch
 * times, one after another), and sets its expected shape (N, C, H, W) and
 * tensor size, so that bench_compare checks the whole reply against the
 * CPU reference (fprep_preprocess_elements_cpu). Returns 0, or -1 after
 * printing why (out of memory, a format the kinds do not take). */
int bench_elements_setup(bench_input *inputs, size_t n, unsigned rois,
                         unsigned batch);

/* bench_elements_payload is what an inline request of in carries: its
 * BATCH frames, or its frame. */
const void *bench_elements_payload(const bench_input *in);

#endif /* FRAMEPREP_BENCH_ELEMENTS_H */
