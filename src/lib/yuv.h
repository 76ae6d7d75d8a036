/*
 * yuv.h: what the protocol codec and both backends share about YUV
 * sources (NV12, I420, YUYV): the plane geometry, its validation, and the
 * conversion coefficients. The semantics are those of
 * include/frameprep/protocol.h; the arithmetic is in ops.h.
 */
#ifndef FPREP_YUV_H
#define FPREP_YUV_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/protocol.h"

/* fprep__yuv_coefs: the conversion of one pixel, in float:
 * y = max(Y - y_off, 0) * y_mul (luma codes below y_off are black, as in
 * OpenCV's cvtColor), u = U - 128, v = V - 128,
 * R = y + rv * v, G = y + gu * u + gv * v, B = y + bu * u, each already
 * scaled to 0..255 before rounding. */
typedef struct fprep__yuv_coefs {
	float y_off, y_mul, rv, gu, gv, bu;
} fprep__yuv_coefs;

/* fprep__yuv_is_yuv returns nonzero for NV12, I420 and YUYV. */
int fprep__yuv_is_yuv(uint16_t format);

/* fprep__yuv_default_planes sets uv_stride, u_offset, v_offset and
 * input_size of a YUV request for unpadded planes that follow each other
 * (src_stride, width and height already set); other formats: no change. */
void fprep__yuv_default_planes(fprep_request *req);

/* fprep__yuv_check_planes checks the YUV geometry of a request whose
 * format, sizes, src_stride and Y plane (or packed rows) already passed:
 * even sizes, uv_stride, and that every plane lies inside input_size after
 * the Y plane, in 64-bit arithmetic. Other formats pass. Returns FPREP_OK
 * or FPREP_EINVAL with a sentence naming the field in msg (if not NULL). */
int fprep__yuv_check_planes(const fprep_request *req, char *msg, size_t n);

/* fprep__yuv_coefs_get fills *k for a request's yuv_matrix and yuv_range
 * (0 meaning BT.601 and limited). Returns FPREP_OK or FPREP_EINVAL for an
 * unknown matrix or range. */
int fprep__yuv_coefs_get(uint8_t matrix, uint8_t range, fprep__yuv_coefs *k);

#endif /* FPREP_YUV_H */
