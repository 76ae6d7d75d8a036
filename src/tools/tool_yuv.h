/*
 * tool_yuv.h: the frameprep CLI's conversion of a decoded photo into a YUV
 * frame (NV12, I420 or YUYV), so that a user can try the YUV formats with
 * any image. It is the exact inverse of the conversion documented in
 * protocol.h, written from the same ITU-R equations (see tool_yuv.c).
 */
#ifndef FPREP_TOOL_YUV_H
#define FPREP_TOOL_YUV_H

#include <stdint.h>

/* tool_rgb_to_yuv converts an RGB8 image of w x h pixels (rows of 3 * w
 * bytes) to format (NV12, I420 or YUYV) with the colour matrix and range
 * (enum fprep_yuv_matrix / fprep_yuv_range; 0 means BT.601 / limited). The
 * frame is unpadded: the Y plane (or YUYV rows) then the chroma planes, as
 * fprep_request_init lays them out for a w x h frame; w and h must meet the
 * format's even sizes. Returns the malloc'ed frame (free with free) and its
 * size in *size, or NULL (out of memory, bad format or matrix). */
uint8_t *tool_rgb_to_yuv(const uint8_t *rgb, uint32_t w, uint32_t h,
                         uint16_t format, uint8_t matrix, uint8_t range,
                         uint64_t *size);

#endif /* FPREP_TOOL_YUV_H */
