/*
 * tool_yuv.c: RGB8 to NV12, I420 or YUYV for the frameprep CLI.
 *
 * The forward conversion inverts the one in protocol.h. With R, G, B in
 * 0..1 and Kr, Kb of the matrix (Kg = 1 - Kr - Kb):
 *   Y' = Kr R + Kg G + Kb B
 *   Cb = (B - Y') / (2 (1 - Kb)),  Cr = (R - Y') / (2 (1 - Kr))
 *   limited range: Y = 16 + 219 Y', U = 128 + 224 Cb, V = 128 + 224 Cr
 *   full range:    Y = 255 Y',      U = 128 + 255 Cb, V = 128 + 255 Cr
 * in double, each rounded half up and saturated to 0..255. The chroma of a
 * 2x2 block (NV12, I420) or 2x1 pair (YUYV) is the mean of its pixels' Cb
 * and Cr before quantisation, so that the decoder, which gives every pixel
 * of the block that one sample, gets the block's average colour back.
 */
#include "tool_yuv.h"

#include <math.h>
#include <stdlib.h>

#include <frameprep/frameprep.h>

struct yuv_eq {
	double kr, kb, yo, ys, cs; /* Y = yo + ys Y', U = 128 + cs Cb */
};

static int yuv_eq_get(uint8_t matrix, uint8_t range, struct yuv_eq *e)
{
	switch (matrix) {
	case 0:
	case FPREP_MATRIX_BT601:
		e->kr = 0.299, e->kb = 0.114;
		break;
	case FPREP_MATRIX_BT709:
		e->kr = 0.2126, e->kb = 0.0722;
		break;
	case FPREP_MATRIX_BT2020:
		e->kr = 0.2627, e->kb = 0.0593;
		break;
	default:
		return -1;
	}
	if (range == FPREP_RANGE_FULL) {
		e->yo = 0.0, e->ys = 255.0, e->cs = 255.0;
	} else if (range == 0 || range == FPREP_RANGE_LIMITED) {
		e->yo = 16.0, e->ys = 219.0, e->cs = 224.0;
	} else {
		return -1;
	}
	return 0;
}

static uint8_t yuv_quantise(double v)
{
	v = floor(v + 0.5);
	return v < 0.0 ? 0 : v > 255.0 ? 255 : (uint8_t)v;
}

/* yuv_pixel computes Y' (0..1), Cb and Cr (-0.5..0.5) of one pixel. */
static void yuv_pixel(const struct yuv_eq *e, const uint8_t *p, double *y,
                      double *cb, double *cr)
{
	double r = p[0] / 255.0, g = p[1] / 255.0, b = p[2] / 255.0;

	*y = e->kr * r + (1.0 - e->kr - e->kb) * g + e->kb * b;
	*cb = (b - *y) / (2.0 * (1.0 - e->kb));
	*cr = (r - *y) / (2.0 * (1.0 - e->kr));
}

uint8_t *tool_rgb_to_yuv(const uint8_t *rgb, uint32_t w, uint32_t h,
                         uint16_t format, uint8_t matrix, uint8_t range,
                         uint64_t *size)
{
	fprep_request req;
	struct yuv_eq e;
	uint8_t *out;
	uint32_t bw, bh, x, y, dx, dy;

	if (yuv_eq_get(matrix, range, &e) != 0 ||
	    (format != FPREP_PIX_NV12 && format != FPREP_PIX_I420 &&
	     format != FPREP_PIX_YUYV))
		return NULL;
	fprep_request_init(&req, format, w, h);
	out = malloc(req.input_size);
	if (out == NULL)
		return NULL;
	*size = req.input_size;
	bw = 2;
	bh = format == FPREP_PIX_YUYV ? 1 : 2;
	for (y = 0; y < h; y += bh) {
		for (x = 0; x < w; x += bw) {
			double sy[4], cb = 0.0, cr = 0.0, b, r;
			uint8_t u, v;

			for (dy = 0; dy < bh; dy++)
				for (dx = 0; dx < bw; dx++) {
					const uint8_t *p =
					        rgb +
					        ((size_t)(y + dy) * w + x +
					         dx) * 3;
					yuv_pixel(&e, p, &sy[dy * bw + dx], &b,
					          &r);
					cb += b;
					cr += r;
				}
			u = yuv_quantise(128.0 + e.cs * cb / (bw * bh));
			v = yuv_quantise(128.0 + e.cs * cr / (bw * bh));
			for (dy = 0; dy < bh; dy++)
				for (dx = 0; dx < bw; dx++) {
					uint8_t yy = yuv_quantise(
					        e.yo + e.ys * sy[dy * bw + dx]);
					if (format == FPREP_PIX_YUYV)
						out[(size_t)y * req.src_stride +
						    2 * (x + dx)] = yy;
					else
						out[(size_t)(y + dy) *
						            req.src_stride +
						    x + dx] = yy;
				}
			if (format == FPREP_PIX_YUYV) {
				out[(size_t)y * req.src_stride + 2 * x + 1] = u;
				out[(size_t)y * req.src_stride + 2 * x + 3] = v;
			} else if (format == FPREP_PIX_NV12) {
				uint8_t *c = out + req.u_offset +
				             (size_t)(y / 2) * req.uv_stride +
				             x;
				c[0] = u, c[1] = v;
			} else {
				size_t o =
				        (size_t)(y / 2) * req.uv_stride + x / 2;
				out[req.u_offset + o] = u;
				out[req.v_offset + o] = v;
			}
		}
	}
	return out;
}
