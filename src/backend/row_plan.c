/*
 * row_plan.c: the source rows the letterbox kernels read (row_plan.h).
 * Built with -ffp-contract=off (src/CMakeLists.txt): lb_axis must round
 * each step as the kernels' intrinsics do.
 */
#include "row_plan.h"

#include <math.h>
#include <string.h>

#include "letterbox_axis.h"

/* row_plan_add appends the run [first, first + len) to p's groups: it
 * extends the last group when it has the same length and spacing, else
 * starts a new one. Returns -1 when the groups are full. */
static int row_plan_add(fprep__row_plan *p, uint32_t first, uint32_t len)
{
	fprep__row_group *g = p->ngroups > 0 ? &p->g[p->ngroups - 1] : NULL;

	if (g != NULL && g->len == len) {
		uint32_t last = g->first + (g->count - 1) * g->period;

		if (g->count == 1 || first - last == g->period) {
			g->period = first - last;
			g->count++;
			return 0;
		}
	}
	if (p->ngroups == FPREP__ROW_GROUPS_MAX)
		return -1;
	p->g[p->ngroups++] =
	        (fprep__row_group){.first = first, .len = len, .count = 1};
	return 0;
}

void fprep__row_plan_build(fprep__row_plan *p, uint32_t src_h,
                           uint32_t resized_h, unsigned shift)
{
	uint32_t run0 = 0, runlen = 0;
	int full = 0;

	memset(p, 0, sizeof *p);
	p->src_h = src_h;
	p->resized_h = resized_h;
	p->shift = shift;
	p->plane_h = (src_h + (1u << shift) - 1) >> shift;
	/* Tensor rows map to source rows in order (i0 never decreases, i1 is
	 * i0 or i0 + 1), and so to plane rows (y >> shift), so the rows read
	 * come out sorted: each extends the current run or starts the next
	 * one. */
	for (uint32_t d = 0; d < resized_h && !full; d++) {
		int i0, i1;
		float w0, w1;

		lb_axis(d, src_h, resized_h, &i0, &i1, &w0, &w1);
		for (int y = i0; y <= i1 && !full; y++) {
			uint32_t r = (uint32_t)y >> shift;

			if (runlen > 0 && r < run0 + runlen)
				continue; /* already in the run */
			if (runlen > 0 && r == run0 + runlen) {
				runlen++;
				continue;
			}
			if (runlen > 0) {
				full = row_plan_add(p, run0, runlen) != 0;
				p->rows += runlen;
			}
			run0 = r;
			runlen = 1;
		}
	}
	if (!full && runlen > 0) {
		full = row_plan_add(p, run0, runlen) != 0;
		p->rows += runlen;
	}
	/* Worth it only where a quarter of the rows or more stay behind. */
	if (full || (uint64_t)p->rows * 4 > (uint64_t)p->plane_h * 3) {
		p->ngroups = 0;
		p->rows = p->plane_h;
	}
}

unsigned fprep__row_plan_copies(const fprep__row_plan *p, uint32_t y0,
                                uint32_t y1, fprep__row_copy *out)
{
	unsigned n = 0;

	if (y1 > p->plane_h)
		y1 = p->plane_h;
	for (uint32_t k = 0; k < p->ngroups && y0 < y1; k++) {
		const fprep__row_group *g = &p->g[k];
		uint32_t per = g->count > 1 ? g->period : 0, len = g->len;
		uint32_t i0 = 0, i1 = g->count; /* the runs meeting [y0, y1) */

		if (y1 <= g->first)
			continue;
		if (y0 >= g->first + len) {
			if (per == 0)
				continue;
			i0 = (y0 - g->first - len) / per + 1;
		}
		if (per > 0 && (y1 - 1 - g->first) / per + 1 < i1)
			i1 = (y1 - 1 - g->first) / per + 1;
		if (i0 >= i1)
			continue;
		uint32_t r = g->first + i0 * per;
		if (r < y0) { /* the first run, cut by the range */
			uint32_t e = r + len < y1 ? r + len : y1;
			out[n++] = (fprep__row_copy){y0, e - y0, 0, 1};
			i0++;
		}
		r = g->first + (i1 - 1) * per;
		if (i1 > i0 && (r + len > y1 || r + len >= p->plane_h)) {
			/* the last run, cut by the range, or the frame's end */
			uint32_t e = r + len < y1 ? r + len : y1;
			out[n++] = (fprep__row_copy){r, e - r, 0, 1};
			i1--;
		}
		if (i1 > i0)
			out[n++] = (fprep__row_copy){g->first + i0 * per, len,
			                             i1 - i0 > 1 ? per : 0,
			                             i1 - i0};
	}
	return n;
}

int fprep__row_plan_has(const fprep__row_plan *p, uint32_t y)
{
	if (p->ngroups == 0)
		return y < p->plane_h;
	for (uint32_t k = 0; k < p->ngroups; k++) {
		const fprep__row_group *g = &p->g[k];

		if (y < g->first)
			continue;
		uint32_t off = y - g->first;
		uint32_t i = g->period > 0 ? off / g->period : 0;

		if (i < g->count && off - i * g->period < g->len)
			return 1;
	}
	return 0;
}
