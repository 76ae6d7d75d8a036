/*
 * ops.h: internal entry points of the CPU preprocessing (ops_cpu.c).
 *
 * fprep_preprocess_cpu (public) does a whole frame on the calling thread.
 * The CPU backend can also cut one frame into bands of tensor rows and run
 * the bands on several threads with fprep__preprocess_cpu_rows; the bands
 * write disjoint bytes of the tensor, so they need no locking.
 *
 * Arithmetic, which the GPU kernels follow: for tensor column u inside the
 * resized image, x = u - pad_x, fx = (float)((x + 0.5) * sx - 0.5) with
 * sx = 1 / (resized_w / (double)src_w); x0 = floor(fx), fx -= x0; x0 < 0
 * gives x0 = 0, fx = 0; x0 >= W - 1 gives x0 = W - 1, fx = 0; x1 =
 * min(x0 + 1, W - 1). The weights are OpenCV's 11-bit coefficients,
 * a0 = rint((1 - fx) * 2048) / 2048, a1 = rint(fx * 2048) / 2048. Rows
 * likewise, except that fy is not zeroed at the borders (OpenCV clamps only
 * the row indices). The pixel is the float
 * v = (s00 * a0 + s01 * a1) * b0 + (s10 * a0 + s11 * a1) * b1; U8 stores
 * floor(v + 0.5) saturated, F32/F16 store (v * scale - mean[c]) / std[c].
 *
 * Exact mode (request rounding OPENCV) is OpenCV's fixed point for 8-bit
 * images: with the integer weights A = a * 2048 and B = b * 2048 (0..2048)
 * and h0 = s00 * A0 + s01 * A1, h1 = s10 * A0 + s11 * A1 (exact integers),
 * v = (((B0 * (h0 >> 4)) >> 16) + ((B1 * (h1 >> 4)) >> 16) + 2) >> 2, an
 * integer 0..255 (cv2.resize INTER_LINEAR, CV_8U); padding pixels are
 * pad_value rounded half to even; U8 stores v, F32/F16 normalise it as
 * above, every step rounded (no fused multiply-add).
 *
 * YUV sources are first converted, one source row at a time, to the RGB8
 * row an RGB8 source would hold, with yuv.h's coefficients in float:
 * y = max(Y - y_off, 0) * y_mul, u = U - 128, v = V - 128; R = y + rv * v,
 * G = (y + gu * u) + gv * v, B = y + bu * u (no fused multiply-add); each
 * stored as floor(value + 0.5) saturated to 0..255.
 */
#ifndef FPREP_OPS_H
#define FPREP_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"

/* fprep__request_check validates a FRAME/ECHO request built in memory with
 * the checks fprep_request_decode applies to one from the wire (the one
 * validator, in protocol.c), without the daemon's limits and without the
 * payload length, which only a message has. Returns 0, or the error with a
 * sentence in msg (NULL: none) as fprep_request_decode does. Thread-safe. */
int fprep__request_check(const fprep_request *req, char *msg, size_t msg_size);

/* fprep__preprocess_check validates a FRAME/ECHO request for the ops
 * (fprep__request_check) and that tensor_size is its tensor size. Returns 0
 * or FPREP_EINVAL. Thread-safe. */
int fprep__preprocess_check(const fprep_request *req, size_t tensor_size);

/* fprep__preprocess_cpu_rows writes tensor rows [y0, y1) (0 <= y0 <= y1 <=
 * out_height) of the request's tensor, every channel of them, padding
 * included. req must have passed fprep__preprocess_check, xf must be
 * fprep_transform_compute(req), frame and tensor as for
 * fprep_preprocess_cpu. Calls for disjoint row ranges may run concurrently
 * on the same tensor. Returns 0 or FPREP_ENOMEM (row buffers). */
int fprep__preprocess_cpu_rows(const fprep_request *req, const void *frame,
                               void *tensor, const fprep_transform *xf,
                               uint32_t y0, uint32_t y1);

/* fprep__element_check checks element k of a ROIS or BATCH request r
 * (protocol.c's check of the wire's records) and widens *span by a
 * FRAME's bytes. Returns 0 or FPREP_EINVAL with a sentence in msg naming
 * the element. Thread-safe. */
int fprep__element_check(const fprep_request *r, uint32_t k,
                         const fprep_element *el, uint64_t *span, char *msg,
                         size_t msg_size);

/* fprep__element_bytes returns the tensor bytes of one element of a valid
 * request: fprep_tensor_shape's bytes for one frame (out_width x
 * out_height x channels x dtype size). */
uint64_t fprep__element_bytes(const fprep_request *req);

/* fprep__element_cpu writes element el of a valid ROIS or BATCH request
 * into tensor (fprep__element_bytes of it), reading the frame at input
 * (BATCH: the frames, el->offset from it) through kernels/roi_sample.h;
 * xf is the element's transform (fprep_element_transform), worked out
 * once by the caller. Thread-safe; calls for different elements may run
 * at once. */
void fprep__element_cpu(const fprep_request *req, const fprep_element *el,
                        const fprep_element_xf *xf, const void *input,
                        void *tensor);

struct fprep_roi_elem;
struct fprep_roi_args;

/* fprep__roi_args fills the ROI kernels' argument block from a valid ROIS
 * or BATCH request: everything but the three pointers (src, dst, elems),
 * which it leaves NULL. */
void fprep__roi_args(const fprep_request *req, struct fprep_roi_args *a);

/* fprep__roi_plan_xf fills the sampler's view (kernels/roi_sample.h) of
 * element el of a valid ROIS or BATCH request from its transform xf
 * (fprep_element_transform, worked out once: the daemon's loop writes it
 * into the reply and carries it in the job); the GPU backend copies the
 * view to the device. Any thread. */
void fprep__roi_plan_xf(const fprep_request *req, const fprep_element *el,
                        const fprep_element_xf *xf, struct fprep_roi_elem *e);

/* fprep__roi_plan is fprep__roi_plan_xf with the transform worked out
 * here (fprep_element_transform), for a caller that has none at hand: the
 * kernel emulation test. */
void fprep__roi_plan(const fprep_request *req, const fprep_element *el,
                     struct fprep_roi_elem *e);

#endif /* FPREP_OPS_H */
