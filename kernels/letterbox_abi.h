/*
 * letterbox_abi.h: the interface between the CUDA lane and the letterbox
 * kernels, in one place. kernels/letterbox.cu includes it through NVRTC's
 * named headers (the lane hands every header of kernels/ to NVRTC, and the
 * cache key covers them); src/backend/gpu/cuda_core_internal.h includes it
 * and checks the enum values against include/frameprep/protocol.h at compile
 * time. Plain C with no includes, so both compilers read it alike.
 */
#ifndef FPREP_LETTERBOX_ABI_H
#define FPREP_LETTERBOX_ABI_H

/* fprep_letterbox_args: the kernels' only parameter, passed by value
 * (136 bytes on LP64). Sizes in pixels, strides and offsets in bytes.
 * resized_w/h and pad_x/y are the letterbox transform the host computed
 * (fprep_transform_compute), so both backends agree on them. For YUV
 * sources uv_stride, u_offset and v_offset place the chroma planes (as in
 * the request) and yuv holds the conversion coefficients of src/lib/yuv.h
 * (y_off, y_mul, rv, gu, gv, bu); other sources leave them zero. row0 is
 * the first tensor row of the launch: a launch whose grid covers rows
 * [row0, row0 + gridDim.y * blockDim.y) writes that band of the tensor
 * (rows past out_h are skipped), so a frame can be processed in bands
 * that follow its H2D copy in chunks. */
struct fprep_letterbox_args {
	const unsigned char *src; /* the frame: input_size bytes */
	void *dst;                /* the tensor */
	unsigned int src_w, src_h, src_stride, src_format;
	unsigned int out_w, out_h;
	unsigned int resized_w, resized_h, pad_x, pad_y;
	unsigned int channel_order, layout;
	float pad_value, scale;
	float mean[3], std[3];
	unsigned int uv_stride, u_offset, v_offset, row0;
	float yuv[6];
};

/* Values of enum fprep_pixel_format, fprep_channel_order, fprep_layout and
 * fprep_dtype (include/frameprep/protocol.h). */
#define LB_PIX_BGR8    1
#define LB_PIX_RGB8    2
#define LB_PIX_BGRA8   3
#define LB_PIX_RGBA8   4
#define LB_PIX_GRAY8   5
#define LB_PIX_NV12    6
#define LB_PIX_I420    7
#define LB_PIX_YUYV    8
#define LB_ORDER_RGB   1
#define LB_ORDER_BGR   2
#define LB_ORDER_GRAY  3
#define LB_LAYOUT_NCHW 1
#define LB_LAYOUT_NHWC 2
#define LB_DTYPE_F32   1
#define LB_DTYPE_F16   2
#define LB_DTYPE_U8    3

#endif /* FPREP_LETTERBOX_ABI_H */
