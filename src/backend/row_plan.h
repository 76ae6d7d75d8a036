/*
 * row_plan.h: which rows of a frame's planes the letterbox kernels read,
 * so that a staged transfer copies those rows alone: the rows of an
 * interleaved frame (BGR8, RGB8, BGRA8, RGBA8, GRAY8, YUYV) or of the luma
 * plane of NV12 and I420, and the chroma rows of NV12 and I420 (row y / 2
 * of the chroma planes for luma row y, 4:2:0).
 *
 * INTER_LINEAR samples each tensor row from two source rows, or from one
 * where the second weight rounds to 0 (kernels/letterbox_axis.h). Where
 * the scale is a whole number the rows read are a fraction of the frame:
 * 1920x1080 letterboxed to 640x640 (scale 3) reads rows 1, 4, 7, ...,
 * a third of the frame's bytes; 3840x2160 to 640x640 (scale 6) reads rows
 * 6k + 2 and 6k + 3, also a third. The plan lists those rows as a few
 * groups of equally spaced runs, each one cudaMemcpy2DAsync whose pitch is
 * the spacing, so the device's copy keeps the frame's layout and the
 * kernel addresses it unchanged; the rows left out are never read.
 *
 * The plan is computed with the kernels' own arithmetic (lb_axis, built
 * here without fused multiply-adds, as the kernels use round-to-nearest
 * intrinsics), so the two agree on every row. Pure computation: any
 * thread, no allocation.
 */
#ifndef FPREP_ROW_PLAN_H
#define FPREP_ROW_PLAN_H

#include <stdint.h>

/* Groups a plan may hold; a selection that needs more copies than this is
 * not worth its calls, and the plan is the whole frame. */
#define FPREP__ROW_GROUPS_MAX 8

/* fprep__row_group: count runs of len rows each, the first starting at
 * row first and each next one period rows further (period is 0 when
 * count is 1). */
typedef struct fprep__row_group {
	uint32_t first, len, period, count;
} fprep__row_group;

/* fprep__row_plan: the rows of a plane of a frame src_h rows high that a
 * tensor whose resized image is resized_h rows high reads: the frame's
 * own rows (shift 0), or its 4:2:0 chroma rows (shift 1: row y >> 1 of a
 * plane of (src_h + 1) / 2 rows). plane_h is the plane's rows; rows is how
 * many of them the groups cover; ngroups 0 means "copy the whole plane"
 * (every row read, or too scattered to be worth the copies). */
typedef struct fprep__row_plan {
	uint32_t src_h, resized_h, shift; /* what the plan is for */
	uint32_t plane_h;
	uint32_t rows;
	uint32_t ngroups;
	fprep__row_group g[FPREP__ROW_GROUPS_MAX];
} fprep__row_plan;

/* fprep__row_plan_build fills p for a frame of src_h rows resized to
 * resized_h rows (both >= 1), for its rows (shift 0) or its 4:2:0 chroma
 * rows (shift 1). The groups are selective only when they leave out at
 * least a quarter of the plane's rows. */
void fprep__row_plan_build(fprep__row_plan *p, uint32_t src_h,
                           uint32_t resized_h, unsigned shift);

/* fprep__row_copy: one copy of rows: count runs of len rows each, the
 * first starting at row first and each next one pitch rows further (a
 * cudaMemcpy2DAsync when count > 1, else a plain copy). */
typedef struct fprep__row_copy {
	uint32_t first, len, pitch, count;
} fprep__row_copy;

/* Copies fprep__row_plan_copies may list: three per group at most. */
#define FPREP__ROW_COPIES_MAX (3 * FPREP__ROW_GROUPS_MAX)

/* fprep__row_plan_copies lists in out the copies that move the rows of a
 * selective plan p (ngroups > 0) lying in [y0, y1): each group's runs
 * whole inside the range as one copy, and the runs the range cuts apart.
 * A run that holds the plane's last row (plane_h - 1) goes alone, since
 * that row may be shorter than the stride and the caller cuts its copy at
 * the frame's size. Returns how many copies it wrote (at most
 * FPREP__ROW_COPIES_MAX). */
unsigned fprep__row_plan_copies(const fprep__row_plan *p, uint32_t y0,
                                uint32_t y1, fprep__row_copy *out);

/* fprep__row_plan_has tells whether row y of the plane is in a selective
 * plan's groups (always true for a whole-plane plan). */
int fprep__row_plan_has(const fprep__row_plan *p, uint32_t y);

#endif /* FPREP_ROW_PLAN_H */
