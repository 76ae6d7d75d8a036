/*
 * yuv.c: plane geometry, validation and conversion coefficients of YUV
 * sources (see yuv.h). The coefficients come from the ITU-R equations
 * written in protocol.h, evaluated in double and rounded once to float, so
 * the CPU reference and the GPU kernels use the very same constants.
 */
#include <stdarg.h>
#include <stdio.h>

#include "fail.h"
#include "frameprep/frameprep.h"
#include "yuv.h"

int fprep__yuv_is_yuv(uint16_t format)
{
	return format == FPREP_PIX_NV12 || format == FPREP_PIX_I420 ||
	       format == FPREP_PIX_YUYV;
}

/* yuv_chroma_row: bytes of one chroma row of a planar format. */
static uint64_t yuv_chroma_row(const fprep_request *r)
{
	return r->src_format == FPREP_PIX_NV12 ? r->src_width
	                                       : r->src_width / 2;
}

void fprep__yuv_default_planes(fprep_request *req)
{
	uint64_t y_bytes = (uint64_t)req->src_stride * req->src_height;
	uint64_t c_bytes;

	if (req->src_format != FPREP_PIX_NV12 &&
	    req->src_format != FPREP_PIX_I420)
		return;
	req->uv_stride = (uint16_t)yuv_chroma_row(req);
	c_bytes = (uint64_t)req->uv_stride * (req->src_height / 2);
	req->u_offset = (uint32_t)y_bytes;
	req->v_offset = req->src_format == FPREP_PIX_I420
	                        ? (uint32_t)(y_bytes + c_bytes)
	                        : 0;
	req->input_size =
	        y_bytes + c_bytes * (req->src_format == FPREP_PIX_I420 ? 2 : 1);
}

/* yuv_check_plane checks that the chroma plane named name, at off, of
 * src_height / 2 rows of uv_stride bytes (row bytes used), starts at or
 * after y_end and ends inside input_size. */
static int yuv_check_plane(const fprep_request *r, const char *name,
                           uint32_t off, uint64_t row, uint64_t y_end,
                           char *msg, size_t n)
{
	uint64_t end = (uint64_t)r->uv_stride * (r->src_height / 2 - 1);

	if (off < y_end)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "%s %u overlaps the Y plane, which ends at %llu", name,
		        off, (unsigned long long)y_end);
	/* off < 2^32, end < 2^48 and row < 2^32: no 64-bit overflow. */
	end += off + row;
	if (end > r->input_size)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "%s plane ends at %s + uv_stride*(height/2-1) "
		        "+ %llu = %llu > input_size %llu",
		        name, name, (unsigned long long)row,
		        (unsigned long long)end,
		        (unsigned long long)r->input_size);
	return FPREP_OK;
}

int fprep__yuv_check_planes(const fprep_request *r, char *msg, size_t n)
{
	const char *fmt = r->src_format == FPREP_PIX_NV12   ? "NV12"
	                  : r->src_format == FPREP_PIX_I420 ? "I420"
	                                                    : "YUYV";
	uint64_t row, y_end;
	int err;

	if (!fprep__yuv_is_yuv(r->src_format))
		return FPREP_OK;
	if (r->src_width % 2 != 0)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "src_width %u is odd: %s needs an even "
		                   "width",
		                   r->src_width, fmt);
	if (r->src_format == FPREP_PIX_YUYV)
		return FPREP_OK;
	if (r->src_height % 2 != 0)
		return fprep__fail(
		        msg, n, FPREP_EINVAL,
		        "src_height %u is odd: %s needs an even height",
		        r->src_height, fmt);
	row = yuv_chroma_row(r);
	if (r->uv_stride < row)
		return fprep__fail(msg, n, FPREP_EINVAL,
		                   "uv_stride %u < %s chroma row %llu",
		                   r->uv_stride, fmt, (unsigned long long)row);
	/* The caller checked src_stride * (height - 1) + width in 64 bits. */
	y_end = (uint64_t)r->src_stride * (r->src_height - 1) + r->src_width;
	if ((err = yuv_check_plane(r, "u_offset", r->u_offset, row, y_end, msg,
	                           n)))
		return err;
	if (r->src_format == FPREP_PIX_I420)
		return yuv_check_plane(r, "v_offset", r->v_offset, row, y_end,
		                       msg, n);
	return FPREP_OK;
}

int fprep__yuv_coefs_get(uint8_t matrix, uint8_t range, fprep__yuv_coefs *k)
{
	double kr, kb, kg, ys, cs;

	switch (matrix) {
	case 0:
	case FPREP_MATRIX_BT601:
		kr = 0.299, kb = 0.114;
		break;
	case FPREP_MATRIX_BT709:
		kr = 0.2126, kb = 0.0722;
		break;
	case FPREP_MATRIX_BT2020:
		kr = 0.2627, kb = 0.0593;
		break;
	default:
		return FPREP_EINVAL;
	}
	switch (range) {
	case 0:
	case FPREP_RANGE_LIMITED:
		k->y_off = 16.0f;
		ys = 255.0 / 219.0, cs = 255.0 / 224.0;
		break;
	case FPREP_RANGE_FULL:
		k->y_off = 0.0f;
		ys = 1.0, cs = 1.0;
		break;
	default:
		return FPREP_EINVAL;
	}
	kg = 1.0 - kr - kb;
	k->y_mul = (float)ys;
	k->rv = (float)(2.0 * (1.0 - kr) * cs);
	k->gu = (float)(-2.0 * kb * (1.0 - kb) / kg * cs);
	k->gv = (float)(-2.0 * kr * (1.0 - kr) / kg * cs);
	k->bu = (float)(2.0 * (1.0 - kb) * cs);
	return FPREP_OK;
}
