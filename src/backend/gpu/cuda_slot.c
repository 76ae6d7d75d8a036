/*
 * cuda_slot.c: a GPU lane's staging slots and the work enqueued on
 * them: a frame's copies and kernel, in bands, and the elements of a ROIS
 * or BATCH request (backend_cuda.c).
 *
 * When the job's output is itself pinned (a registered shared-memory slot) the
 * D2H writes it directly and there is no copy out; the host copies that remain
 * are spread over a small copy pool (host_copy.h), since one thread's memcpy is
 * slower than PCIe. Staging buffers are allocated at open and grow only when a
 * larger frame arrives; a slot is reused only after its output was copied out,
 * so its pinned input (read by its H2D) is free by then too.
 */
#include <assert.h>

#include "gpu/cuda_core_internal.h"

/* slot_family: the kernel family of a source format. */
static int slot_family(uint16_t format)
{
	switch (format) {
	case FPREP_PIX_NV12:
		return 1;
	case FPREP_PIX_I420:
		return 2;
	case FPREP_PIX_YUYV:
		return 3;
	}
	return 0;
}

/* slot_malloc_host allocates n pinned bytes at *p; with m, mapped for the
 * device too, *m receiving the device's address of them. */
static int slot_malloc_host(fprep__gpu_status *st, uint8_t **p, uint8_t **m,
                            size_t n)
{
	unsigned flags = m != NULL ? cudaHostAllocMapped | cudaHostAllocPortable
	                           : cudaHostAllocDefault;

	if (FPREP__CUDA(st, cudaHostAlloc((void **)p, n, flags)))
		return -1;
	fprep__cuda_core_count_alloc();
	if (m != NULL &&
	    FPREP__CUDA(st, cudaHostGetDevicePointer((void **)m, *p, 0)))
		return -1;
	return 0;
}

static int slot_malloc_dev(fprep__gpu_status *st, uint8_t **p, size_t n)
{
	if (FPREP__CUDA(st, cudaMalloc((void **)p, n)))
		return -1;
	fprep__cuda_core_count_alloc();
	return 0;
}

static void slot_free_pair(uint8_t **h, uint8_t **d, size_t *cap)
{
	if (*h != NULL)
		(void)FPREP__CUDA(NULL, cudaFreeHost(*h));
	if (*d != NULL)
		(void)FPREP__CUDA(NULL, cudaFree(*d));
	*h = *d = NULL;
	*cap = 0;
}

/* slot_grow makes the pinned buffer h (mapped at *m when mapped) and its
 * device twin d hold at least size bytes, rounded up to CUDA_GROW_ALIGN;
 * always when empty, so that the pair exists. Frees the old pair first. */
static int slot_grow(fprep__gpu_status *st, uint8_t **h, uint8_t **m,
                     uint8_t **d, size_t *cap, size_t size, int mapped,
                     int empty)
{
	size_t n;

	if (size <= *cap && !empty)
		return 0;
	n = (size + CUDA_GROW_ALIGN - 1) & ~(size_t)(CUDA_GROW_ALIGN - 1);
	slot_free_pair(h, d, cap);
	*m = NULL;
	if (slot_malloc_host(st, h, mapped ? m : NULL, n) ||
	    slot_malloc_dev(st, d, n))
		return -1;
	*cap = n;
	return 0;
}

int fprep__cuda_slot_reserve(cuda_slot *s, size_t in_size, size_t out_size,
                             int mapped, fprep__gpu_status *st)
{
	if (slot_grow(st, &s->h_in, &s->m_in, &s->d_in, &s->in_cap, in_size,
	              mapped, in_size > 0 && s->h_in == NULL))
		return -1;
	return slot_grow(st, &s->h_out, &s->m_out, &s->d_out, &s->out_cap,
	                 out_size, mapped, 0);
}

int fprep__cuda_slot_reserve_dev(cuda_slot *s, size_t in_size,
                                 fprep__gpu_status *st)
{
	size_t n = (in_size + CUDA_GROW_ALIGN - 1) &
	           ~(size_t)(CUDA_GROW_ALIGN - 1);

	if (in_size <= s->in_cap)
		return 0;
	slot_free_pair(&s->h_in, &s->d_in, &s->in_cap);
	s->m_in = NULL;
	if (slot_malloc_dev(st, &s->d_in, n))
		return -1;
	s->in_cap = n;
	return 0;
}

int fprep__cuda_slot_init(cuda_slot *s, int mapped, int reserve,
                          fprep__gpu_status *st)
{
	if (FPREP__CUDA(st, cudaEventCreateWithFlags(&s->ev_h2d,
	                                             cudaEventDisableTiming)) ||
	    FPREP__CUDA(st, cudaEventCreateWithFlags(&s->ev_kern,
	                                             cudaEventDisableTiming)) ||
	    FPREP__CUDA(st, cudaEventCreateWithFlags(&s->ev_dec,
	                                             cudaEventDisableTiming)) ||
	    FPREP__CUDA(st,
	                cudaEventCreateWithFlags(
	                        &s->ev_done, cudaEventBlockingSync |
	                                             cudaEventDisableTiming)))
		return -1;
	for (int i = 0; i < CUDA_NT; i++)
		if (FPREP__CUDA(st, cudaEventCreateWithFlags(&s->t[i],
		                                             cudaEventDefault)))
			return -1;
	for (int i = 0; i < CUDA_BANDS; i++)
		if (FPREP__CUDA(st, cudaEventCreateWithFlags(
		                            &s->ev_band_h2d[i],
		                            cudaEventDisableTiming)) ||
		    FPREP__CUDA(st, cudaEventCreateWithFlags(
		                            &s->ev_band_kern[i],
		                            cudaEventDisableTiming)))
			return -1;
	if (!reserve)
		return 0;
	return fprep__cuda_slot_reserve(s, CUDA_INITIAL_IN, CUDA_INITIAL_OUT,
	                                mapped, st);
}

void fprep__cuda_slot_fini(cuda_slot *s)
{
	cudaEvent_t *evs[] = {&s->ev_h2d, &s->ev_kern, &s->ev_done, &s->ev_dec};
	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (*evs[i] != NULL)
			(void)FPREP__CUDA(NULL, cudaEventDestroy(*evs[i]));
	for (int i = 0; i < CUDA_NT; i++)
		if (s->t[i] != NULL)
			(void)FPREP__CUDA(NULL, cudaEventDestroy(s->t[i]));
	for (int i = 0; i < CUDA_BANDS; i++) {
		if (s->ev_band_h2d[i] != NULL)
			(void)FPREP__CUDA(NULL,
			                  cudaEventDestroy(s->ev_band_h2d[i]));
		if (s->ev_band_kern[i] != NULL)
			(void)FPREP__CUDA(NULL,
			                  cudaEventDestroy(s->ev_band_kern[i]));
	}
	slot_free_pair(&s->h_in, &s->d_in, &s->in_cap);
	slot_free_pair(&s->h_out, &s->d_out, &s->out_cap);
	fprep__jpeg_copy_free(&s->jpeg_copy);
}

/* slot_mapped_ptr returns the device's address of p, which lies in region
 * r, through r's mapping; NULL when r is not mapped. */
static uint8_t *slot_mapped_ptr(const fprep__memreg *r, const uint8_t *p)
{
	if (r == NULL || r->mapped == NULL)
		return NULL;
	return r->mapped + (p - r->base);
}

int fprep__cuda_slot_use_mapped(const cuda_backend *cb, unsigned busy)
{
	if (cb->transfer == FPREP__CUDA_MAPPED)
		return 1;
	return cb->transfer == FPREP__CUDA_AUTO &&
	       (cb->integrated || busy == 0);
}

/* cuda_band: one band of a frame processed in bands: tensor rows
 * [r0, r1), and the frame's rows [y0, y1) that its H2D chunk copies (the
 * last band's up to the frame's end). */
typedef struct cuda_band {
	unsigned r0, r1;
	uint32_t y0, y1;
} cuda_band;

/* slot_rows_needed returns how many of the frame's first rows tensor rows
 * [0, y) read: the neighbours of the last image row among them (the
 * INTER_LINEAR map of kernels/letterbox.cu), plus one row of margin for
 * the kernel's float rounding. */
static unsigned slot_rows_needed(const fprep__job *job, unsigned y)
{
	unsigned top = job->xf.pad_y, rh = job->xf.resized_h;
	unsigned h = job->req.src_height;

	if (y <= top || rh == 0)
		return 0;
	unsigned last = (y < top + rh ? y : top + rh) - 1 - top;
	double f = ((double)last + 0.5) * ((double)h / (double)rh) - 0.5;
	uint64_t need = (f > 0 ? (uint64_t)f : 0) + 3;

	return need < h ? (unsigned)need : h;
}

/* slot_band_plan splits job's tensor into up to CUDA_BANDS bands of whole
 * blocks of rows, each cut where the rows it reads reach the next equal
 * share of the frame, so the H2D chunks are about equal. Only for
 * interleaved sources (one plane of rows). Returns the number of bands
 * (below 2: not worth banding). */
static unsigned slot_band_plan(const fprep__job *job, cuda_band *b)
{
	const fprep_request *rq = &job->req;
	unsigned h = rq->src_height, out_h = rq->out_height;
	unsigned n = 0, r0 = 0, prev = 0;

	if (h < 64 || out_h < CUDA_BANDS * CUDA_BLOCK_Y)
		return 0;
	for (unsigned y = CUDA_BLOCK_Y; y < out_h && n < CUDA_BANDS - 1;
	     y += CUDA_BLOCK_Y) {
		unsigned need = slot_rows_needed(job, y);

		if ((uint64_t)need * CUDA_BANDS < (uint64_t)(n + 1) * h)
			continue;
		b[n] = (cuda_band){.r0 = r0, .r1 = y, .y0 = prev, .y1 = need};
		prev = need;
		r0 = y;
		n++;
	}
	b[n] = (cuda_band){.r0 = r0, .r1 = out_h, .y0 = prev, .y1 = h};
	return n + 1;
}

/* cuda_plane: a plane of a frame as the lane copies it: rows rows of
 * stride bytes from byte base of the frame, which ends at byte size (its
 * last row may be short); with plan, only the rows the plan lists. */
typedef struct cuda_plane {
	uint64_t base, stride, size;
	uint32_t rows;
	const fprep__row_plan *plan;
} cuda_plane;

/* slot_plan_get returns p, rebuilt when it is not the plan of rows
 * (shift) of a frame h rows high resized to rh, when it is selective; else
 * NULL. */
static const fprep__row_plan *slot_plan_get(fprep__row_plan *p, uint32_t h,
                                            uint32_t rh, unsigned shift)
{
	if (p->src_h != h || p->resized_h != rh || p->shift != shift)
		fprep__row_plan_build(p, h, rh, shift);
	return p->ngroups > 0 ? p : NULL;
}

/* slot_planes fills pl with the planes of job's frame (one for an
 * interleaved or YUYV frame; luma and chroma for NV12, luma, U and V for
 * I420) and the plans of the rows its kernel reads (row_plan.h), when it
 * reads few enough of them to copy alone. Returns how many planes, or 0:
 * copy the frame whole. The lane keeps the last geometry's plans: frames
 * of one size compute them once. Lane thread. */
static unsigned slot_planes(cuda_backend *cb, const fprep__job *job,
                            cuda_plane *pl)
{
	const fprep_request *rq = &job->req;
	uint32_t h = rq->src_height, rh = job->xf.resized_h, ch = (h + 1) / 2;
	int fam = slot_family(rq->src_format), planar = fam == 1 || fam == 2;
	const fprep__row_plan *luma, *chroma = NULL;

	if (cb->all_rows || h == 0 || rh == 0)
		return 0;
	luma = slot_plan_get(&cb->plan[0], h, rh, 0);
	if (planar)
		chroma = slot_plan_get(&cb->plan[1], h, rh, 1);
	if (luma == NULL && chroma == NULL)
		return 0;
	pl[0] = (cuda_plane){0, rq->src_stride, rq->input_size, h, luma};
	if (!planar)
		return 1;
	pl[1] = (cuda_plane){rq->u_offset, rq->uv_stride, rq->input_size, ch,
	                     chroma};
	if (fam == 1)
		return 2;
	pl[2] = (cuda_plane){rq->v_offset, rq->uv_stride, rq->input_size, ch,
	                     chroma};
	return 3;
}

/* slot_plane_span gives the bytes [*lo, *hi) of rows [a, b) of plane pl,
 * cut at the frame's end. */
static void slot_plane_span(const cuda_plane *pl, uint64_t a, uint64_t b,
                            uint64_t *lo, uint64_t *hi)
{
	*lo = pl->base + a * pl->stride;
	*hi = pl->base + b * pl->stride;
	if (*hi > pl->size)
		*hi = pl->size;
}

/* slot_plane_copies lists in c the copies of rows [y0, y1) of plane pl:
 * those of its plan, or one of the whole range. Returns how many. */
static unsigned slot_plane_copies(const cuda_plane *pl, uint32_t y0,
                                  uint32_t y1, fprep__row_copy *c)
{
	if (pl->plan != NULL)
		return fprep__row_plan_copies(pl->plan, y0, y1, c);
	c[0] = (fprep__row_copy){y0, y1 > y0 ? y1 - y0 : 0, 0, 1};
	return 1;
}

/* slot_h2d_rows copies the rows [y0, y1) of plane pl of the frame at src
 * to the same offsets at dev, on the H2D stream: all of them, or with the
 * plane's plan only those it lists (the kernel never reads the others), a
 * 2D copy for each group of equally spaced runs (fprep__row_plan_copies).
 * Lane thread. Returns 0, or -1 with *st set. */
static int slot_h2d_rows(cuda_backend *cb, uint8_t *dev, const uint8_t *src,
                         const cuda_plane *pl, uint32_t y0, uint32_t y1,
                         fprep__gpu_status *st)
{
	fprep__row_copy c[FPREP__ROW_COPIES_MAX];
	unsigned n = slot_plane_copies(pl, y0, y1, c);
	uint64_t lo, hi;

	for (unsigned i = 0; i < n; i++) {
		uint64_t pitch = c[i].pitch * pl->stride;

		slot_plane_span(pl, c[i].first, c[i].first + c[i].len, &lo,
		                &hi);
		if (lo >= hi)
			continue;
		if (c[i].count == 1
		            ? FPREP__CUDA(st,
		                          cudaMemcpyAsync(
		                                  dev + lo, src + lo, hi - lo,
		                                  cudaMemcpyHostToDevice,
		                                  cb->s_h2d))
		            : FPREP__CUDA(st,
		                          cudaMemcpy2DAsync(
		                                  dev + lo, pitch, src + lo,
		                                  pitch, hi - lo, c[i].count,
		                                  cudaMemcpyHostToDevice,
		                                  cb->s_h2d)))
			return -1;
	}
	return 0;
}

/* slot_h2d_frame copies the frame at src (size bytes) to dev on the H2D
 * stream: whole (np 0), or the rows of its np planes that their plans
 * list. Lane thread. Returns 0, or -1 with *st set. */
static int slot_h2d_frame(cuda_backend *cb, uint8_t *dev, const uint8_t *src,
                          uint64_t size, const cuda_plane *pl, unsigned np,
                          fprep__gpu_status *st)
{
	if (np == 0)
		return FPREP__CUDA(st, cudaMemcpyAsync(dev, src, size,
		                                       cudaMemcpyHostToDevice,
		                                       cb->s_h2d));
	for (unsigned i = 0; i < np; i++)
		if (slot_h2d_rows(cb, dev, src, &pl[i], 0, pl[i].rows, st))
			return -1;
	return 0;
}

/* slot_host_rows copies the rows of plane pl that its plan lists (all of
 * them without one) from the frame at src into the slot's pinned buffer
 * dst, at their offsets, for its H2D. Lane thread. */
static void slot_host_rows(cuda_backend *cb, uint8_t *dst, const uint8_t *src,
                           const cuda_plane *pl)
{
	fprep__row_copy c[FPREP__ROW_COPIES_MAX];
	unsigned n = slot_plane_copies(pl, 0, pl->rows, c);
	uint64_t lo, hi;

	for (unsigned i = 0; i < n; i++) {
		slot_plane_span(pl, c[i].first, c[i].first + c[i].len, &lo,
		                &hi);
		if (lo >= hi)
			continue;
		if (c[i].count > 1)
			fprep__copy_rows(cb->copier, dst + lo, src + lo,
			                 hi - lo, c[i].pitch * pl->stride,
			                 c[i].count);
		else
			fprep__copy(cb->copier, dst + lo, src + lo, hi - lo);
	}
}

/* slot_enqueue_banded puts job's work on the streams in nb bands: the
 * frame's H2D in nb chunks, each band's kernel launch (a->row0) after its
 * chunk, each band's D2H after its kernel; so the copies in both
 * directions and the kernel overlap within one frame, and the frame takes
 * about its longer copy rather than the sum of the three. Rows of a band
 * are contiguous in NHWC; in NCHW a band is one 2D copy of C plane
 * pieces. Returns 0, or -1 with *st set. */
static int slot_enqueue_banded(cuda_backend *cb, cuda_slot *s,
                               const fprep__job *job, cuda_lb_args *a,
                               const uint8_t *src, uint8_t *dst,
                               const void *kern, const cuda_band *band,
                               unsigned nb, const cuda_plane *pl,
                               fprep__gpu_status *st)
{
	const fprep_request *rq = &job->req;
	int nchw = rq->layout == FPREP_LAYOUT_NCHW;
	size_t es = rq->dtype == FPREP_DTYPE_F32   ? 4
	            : rq->dtype == FPREP_DTYPE_F16 ? 2
	                                           : 1;
	size_t c = nchw ? job->shape[1] : job->shape[3];
	size_t row = nchw ? rq->out_width * es : rq->out_width * c * es;
	size_t plane = rq->out_height * row;
	dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
	void *args[] = {a};

	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_H2D0], cb->s_h2d)))
		return -1;
	for (unsigned k = 0; k < nb; k++) {
		if (slot_h2d_rows(cb, s->d_in, src, pl, band[k].y0, band[k].y1,
		                  st) ||
		    FPREP__CUDA(st,
		                cudaEventRecord(s->ev_band_h2d[k], cb->s_h2d)))
			return -1;
	}
	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_H2D1], cb->s_h2d)))
		return -1;
	for (unsigned k = 0; k < nb; k++) {
		dim3 grid = {(rq->out_width + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
		             (band[k].r1 - band[k].r0 + CUDA_BLOCK_Y - 1) /
		                     CUDA_BLOCK_Y,
		             1};

		a->row0 = band[k].r0;
		if (FPREP__CUDA(st,
		                cudaStreamWaitEvent(cb->s_comp,
		                                    s->ev_band_h2d[k], 0)) ||
		    (k == 0 && FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_K0],
		                                               cb->s_comp))) ||
		    FPREP__CUDA(st, cudaLaunchKernel(kern, grid, block, args, 0,
		                                     cb->s_comp)) ||
		    FPREP__CUDA(st, cudaEventRecord(s->ev_band_kern[k],
		                                    cb->s_comp)))
			return -1;
	}
	a->row0 = 0;
	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_K1], cb->s_comp)))
		return -1;
	for (unsigned k = 0; k < nb; k++) {
		size_t off = band[k].r0 * row;
		size_t len = (size_t)(band[k].r1 - band[k].r0) * row;

		if (FPREP__CUDA(st,
		                cudaStreamWaitEvent(cb->s_d2h,
		                                    s->ev_band_kern[k], 0)) ||
		    (k == 0 &&
		     FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_D2H0],
		                                     cb->s_d2h))))
			return -1;
		if (nchw ? FPREP__CUDA(st, cudaMemcpy2DAsync(
		                                   dst + off, plane,
		                                   s->d_out + off, plane, len,
		                                   c, cudaMemcpyDeviceToHost,
		                                   cb->s_d2h))
		         : FPREP__CUDA(st, cudaMemcpyAsync(
		                                   dst + off, s->d_out + off,
		                                   len, cudaMemcpyDeviceToHost,
		                                   cb->s_d2h)))
			return -1;
	}
	if (FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_D2H1], cb->s_d2h)) ||
	    FPREP__CUDA(st, cudaEventRecord(s->ev_done, cb->s_d2h)))
		return -1;
	return 0;
}

/* slot_kernel_d2h queues the rest of a slot's work once its H2D copies
 * are queued: the H2D events, kern over grid on the compute stream after
 * them, then on the D2H stream the copy of out_bytes of the output into
 * dst (when copy_out), with the slot's timing and completion events.
 * Non-zero, with st filled, when a CUDA call failed. */
static int slot_kernel_d2h(cuda_backend *cb, cuda_slot *s, const void *kern,
                           dim3 grid, dim3 block, void **args, uint8_t *dst,
                           uint64_t out_bytes, int copy_out,
                           fprep__gpu_status *st)
{
	return FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_H2D1], cb->s_h2d)) ||
	       FPREP__CUDA(st, cudaEventRecord(s->ev_h2d, cb->s_h2d)) ||
	       FPREP__CUDA(st, cudaStreamWaitEvent(cb->s_comp, s->ev_h2d, 0)) ||
	       FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_K0], cb->s_comp)) ||
	       FPREP__CUDA(st, cudaLaunchKernel(kern, grid, block, args, 0,
	                                        cb->s_comp)) ||
	       FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_K1], cb->s_comp)) ||
	       FPREP__CUDA(st, cudaEventRecord(s->ev_kern, cb->s_comp)) ||
	       FPREP__CUDA(st, cudaStreamWaitEvent(cb->s_d2h, s->ev_kern, 0)) ||
	       FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_D2H0], cb->s_d2h)) ||
	       (copy_out &&
	        FPREP__CUDA(st, cudaMemcpyAsync(dst, s->d_out, out_bytes,
	                                        cudaMemcpyDeviceToHost,
	                                        cb->s_d2h))) ||
	       FPREP__CUDA(st, cudaEventRecord(s->t[CUDA_T_D2H1], cb->s_d2h)) ||
	       FPREP__CUDA(st, cudaEventRecord(s->ev_done, cb->s_d2h));
}

/* slot_abandon fails job with st's CUDA error once the part of the slot's
 * work that was queued has finished, so that the slot can be reused. */
static int slot_abandon(cuda_backend *cb, fprep__job *job,
                        const fprep__gpu_status *st)
{
	int fatal = cuda_core_sticky(st->code);

	(void)cudaStreamSynchronize(cb->s_h2d);
	(void)cudaStreamSynchronize(cb->s_comp);
	(void)cudaStreamSynchronize(cb->s_d2h);
	cuda_core_fail(job, FPREP_ECUDA, fatal, st->text);
	return FPREP_ECUDA;
}

/* slot_roi_rows finds the source rows [*y0, *y1) that the elements of a
 * ROIS job read (fprep__roi_plan's boxes clipped to the frame; every row
 * when one is affine); the planned elements are in e. *y0 == *y1: none. */
static void slot_roi_rows(const fprep_request *rq,
                          const struct fprep_roi_elem *e, uint32_t n,
                          uint32_t *y0, uint32_t *y1)
{
	int64_t lo = rq->src_height, hi = 0;

	for (uint32_t k = 0; k < n; k++) {
		int64_t a = e[k].y0, b = (int64_t)e[k].y0 + e[k].last_y + 1;

		if (e[k].type == ROI_TYPE_AFFINE) {
			lo = 0, hi = rq->src_height;
			break;
		}
		a = a < 0 ? 0 : a;
		b = b > (int64_t)rq->src_height ? rq->src_height : b;
		if (a < b) {
			lo = a < lo ? a : lo;
			hi = b > hi ? b : hi;
		}
	}
	*y0 = lo < hi ? (uint32_t)lo : 0;
	*y1 = lo < hi ? (uint32_t)hi : 0;
}

/* slot_enqueue_elements enqueues a ROIS or BATCH job on slot s, staged:
 * the elements planned on the host (fprep__roi_plan) into the tail of the
 * slot's pinned input, the source bytes they read (a ROIS: the rows its
 * boxes cover; a BATCH: its frames' span) and that table copied to the
 * device in one H2D step, one launch of the ROI kernel over (x, y,
 * element), one D2H (none for a CUDA region's input or output, which the
 * kernel reads or writes in place). */
static int slot_enqueue_elements(cuda_backend *cb, cuda_slot *s,
                                 fprep__job *job)
{
	const fprep_request *rq = &job->req;
	fprep__gpu_status st = {0};
	uint32_t n = rq->elements, bpp = fprep_pixel_bytes(rq->src_format);
	uint64_t out_bytes = job->output_size, span = rq->input_span;
	uint64_t at = 0, len = span; /* the source bytes copied */
	int in_dev = job->input_device, out_dev = job->output_device;
	/* The element table follows the frame, 256-byte aligned. */
	uint64_t tab = in_dev ? 0 : (span + 255) & ~(uint64_t)255;
	size_t tab_bytes = (size_t)n * sizeof(struct fprep_roi_elem);
	struct fprep_roi_elem *e;
	struct fprep_roi_args a;
	fprep_element el;
	const uint8_t *src;
	uint8_t *dst;

	if (rq->dtype < FPREP_DTYPE_F32 || rq->dtype > FPREP_DTYPE_U8 ||
	    n == 0) {
		cuda_core_fail(job, FPREP_EINVAL, 0, "invalid tensor request");
		return FPREP_EINVAL;
	}
	if (fprep__cuda_slot_reserve(s, tab + tab_bytes,
	                             out_dev ? 0 : out_bytes,
	                             cb->transfer != FPREP__CUDA_STAGED, &st)) {
		cuda_core_fail(job,
		               st.code == cudaErrorMemoryAllocation
		                       ? FPREP_ENOMEM
		                       : FPREP_ECUDA,
		               cuda_core_sticky(st.code), st.text);
		return job->status;
	}
	e = (struct fprep_roi_elem *)(void *)(s->h_in + tab);
	assert(job->xfs != NULL); /* the loop's transforms (backend.h) */
	for (uint32_t k = 0; k < n; k++) {
		fprep_element_xf xf;

		fprep_element_get(job->table, k, &el);
		fprep_element_xf_decode(
		        job->xfs + (size_t)k * FPREP_ELEMENT_XF_SIZE, &xf);
		fprep__roi_plan_xf(rq, &el, &xf, &e[k]);
	}
	if (rq->kind == FPREP_KIND_ROIS) {
		uint32_t y0, y1;

		slot_roi_rows(rq, e, n, &y0, &y1);
		at = (uint64_t)y0 * rq->src_stride;
		len = y1 > y0 ? (uint64_t)(y1 - y0 - 1) * rq->src_stride +
		                        (uint64_t)rq->src_width * bpp
		              : 0;
	}
	src = job->input;
	if (!in_dev && !job->input_pinned && len > 0) {
		fprep__copy(cb->copier, s->h_in + at, job->input + at, len);
		src = s->h_in;
	}
	s->out_direct = out_dev || job->output_pinned;
	dst = s->out_direct ? job->output : s->h_out;

	fprep__roi_args(rq, &a);
	a.src = in_dev ? job->input : s->d_in;
	a.dst = out_dev ? (void *)job->output : (void *)s->d_out;
	a.elems = (const struct fprep_roi_elem *)(const void *)(s->d_in + tab);
	void *args[] = {&a};
	dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
	dim3 grid = {(rq->out_width + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
	             (rq->out_height + CUDA_BLOCK_Y - 1) / CUDA_BLOCK_Y, n};
	const void *kern = (const void *)cb->roi_kernel[rq->dtype - 1];

	if (FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_H2D0], cb->s_h2d)) ||
	    (!in_dev && len > 0 &&
	     FPREP__CUDA(&st,
	                 cudaMemcpyAsync(s->d_in + at, src + at, len,
	                                 cudaMemcpyHostToDevice, cb->s_h2d))) ||
	    FPREP__CUDA(&st,
	                cudaMemcpyAsync(s->d_in + tab, s->h_in + tab, tab_bytes,
	                                cudaMemcpyHostToDevice, cb->s_h2d)) ||
	    slot_kernel_d2h(cb, s, kern, grid, block, args, dst, out_bytes,
	                    !out_dev, &st))
		return slot_abandon(cb, job, &st);
	return 0;
}

int fprep__cuda_slot_enqueue(cuda_backend *cb, cuda_slot *s, fprep__job *job,
                             int mapped, int banded)
{
	const fprep_request *rq = &job->req;
	fprep__gpu_status st = {0};
	uint64_t out_bytes = job->output_size; /* planned by the loop */
	const uint8_t *src;
	uint8_t *dst;
	cuda_lb_args a;
	fprep__yuv_coefs k;
	int yuv = fprep__yuv_is_yuv(rq->src_format);

	if (job->table != NULL) /* ROIS, BATCH: staged, one launch */
		return slot_enqueue_elements(cb, s, job);
	if (yuv && fprep__yuv_coefs_get(rq->yuv_matrix, rq->yuv_range, &k)) {
		cuda_core_fail(job, FPREP_EINVAL, 0, "invalid YUV request");
		return FPREP_EINVAL;
	}
	if (rq->dtype < FPREP_DTYPE_F32 || rq->dtype > FPREP_DTYPE_U8 ||
	    rq->rounding >= CUDA_ROUNDINGS) {
		cuda_core_fail(job, FPREP_EINVAL, 0, "invalid tensor request");
		return FPREP_EINVAL;
	}
	/* A frame that a decoder left in the slot goes on from there: on the
	 * device (nvJPEG) as if in a CUDA region; in the pinned input with
	 * nothing to copy into it. */
	int in_dev = job->input_device || s->d_frame != NULL;
	int out_dev = job->output_device;
	/* A JPEG source (input inline or in a host region: protocol.c) that
	 * reaches here (a lane without decoder threads) is decoded on this
	 * thread, after its header is checked, straight into the staging
	 * slot, and goes on as that raw frame. */
	int jpeg = rq->src_format == FPREP_PIX_JPEG && !in_dev;
	fprep_request raw;

	if (jpeg && (job->status = fprep__jpeg_open(&cb->jpeg, job, NULL, &raw,
	                                            job->message,
	                                            sizeof job->message)) != 0)
		return job->status;
	if (fprep__cuda_slot_reserve(s,
	                             in_dev ? 0
	                             : jpeg ? raw.input_size
	                                    : rq->input_size,
	                             out_dev ? 0 : out_bytes,
	                             cb->transfer != FPREP__CUDA_STAGED, &st)) {
		int fatal = cuda_core_sticky(st.code);
		cuda_core_fail(job,
		               st.code == cudaErrorMemoryAllocation
		                       ? FPREP_ENOMEM
		                       : FPREP_ECUDA,
		               fatal, st.text);
		return job->status;
	}
	if (jpeg) {
		job->status =
		        fprep__jpeg_decode(&cb->jpeg, job, &raw, s->h_in,
		                           job->message, sizeof job->message);
		if (job->status != 0)
			return job->status;
		job->input_pinned = 0; /* the frame is in the slot, staged */
	}
	s->out_direct = out_dev || job->output_pinned;
	dst = s->out_direct ? job->output : s->h_out;
	src = job->input;
	/* The rows the kernel reads, when a fraction: all that is copied of
	 * a frame, into the staging slot and to the device. */
	cuda_plane planes[3];
	unsigned np = in_dev ? 0 : slot_planes(cb, job, planes);
	if (!job->input_pinned && !in_dev && !jpeg && !s->staged) {
		for (unsigned i = 0; i < np; i++)
			slot_host_rows(cb, s->h_in, job->input, &planes[i]);
		if (np == 0)
			fprep__copy(cb->copier, s->h_in, job->input,
			            rq->input_size);
		src = s->h_in;
	}
	if (jpeg || s->staged)
		src = s->h_in;
	/* Mapped: the kernel's own pointer to the frame (a region's mapping,
	 * or the slot's mapped input) and to where the tensor goes (a
	 * region's, or the slot's mapped output, copied out as staged). */
	const uint8_t *m_src = NULL;
	uint8_t *m_dst = NULL;
	if (mapped && !in_dev)
		m_src = job->input_pinned
		                ? slot_mapped_ptr(job->in_region, job->input)
		                : s->m_in;
	if (mapped && !out_dev)
		m_dst = job->output_pinned
		                ? slot_mapped_ptr(job->out_region, job->output)
		                : s->m_out;

	memset(&a, 0, sizeof a);
	a.src = s->d_frame != NULL ? s->d_frame
	        : in_dev           ? job->input
	        : m_src != NULL    ? m_src
	                           : s->d_in;
	a.dst = out_dev         ? (void *)job->output
	        : m_dst != NULL ? (void *)m_dst
	                        : (void *)s->d_out;
	if (m_dst != NULL && !job->output_pinned)
		s->out_direct = 0; /* the tensor is in h_out: copied out */
	a.src_w = rq->src_width;
	a.src_h = rq->src_height;
	a.src_stride = rq->src_stride;
	a.src_format = rq->src_format;
	a.out_w = rq->out_width;
	a.out_h = rq->out_height;
	a.resized_w = job->xf.resized_w;
	a.resized_h = job->xf.resized_h;
	a.pad_x = job->xf.pad_x;
	a.pad_y = job->xf.pad_y;
	a.channel_order = rq->channel_order;
	a.layout = rq->layout;
	a.pad_value = rq->pad_value;
	a.scale = rq->scale;
	memcpy(a.mean, rq->mean, sizeof a.mean);
	memcpy(a.std, rq->std, sizeof a.std);
	if (yuv) {
		memcpy(a.yuv, &k, sizeof a.yuv);
		a.uv_stride = rq->uv_stride;
		a.u_offset = rq->u_offset;
		a.v_offset = rq->v_offset;
	}
	void *args[] = {&a};
	dim3 block = {CUDA_BLOCK_X, CUDA_BLOCK_Y, 1};
	dim3 grid = {(rq->out_width + CUDA_BLOCK_X - 1) / CUDA_BLOCK_X,
	             (rq->out_height + CUDA_BLOCK_Y - 1) / CUDA_BLOCK_Y, 1};
	int family = slot_family(rq->src_format);
	const void *kern =
	        (const void *)cb->kernel[rq->rounding][family][rq->dtype - 1];

	cuda_band bands[CUDA_BANDS];
	unsigned nb = 0;
	int failed;

	/* A frame the engine writes (on a decoder's stream): the kernel
	 * runs once its decode has (ev_dec). */
	if (s->d_frame != NULL &&
	    FPREP__CUDA(&st, cudaStreamWaitEvent(cb->s_comp, s->ev_dec, 0))) {
		cuda_core_fail(job, FPREP_ECUDA, cuda_core_sticky(st.code),
		               st.text);
		return FPREP_ECUDA;
	}
	if (m_src != NULL)
		np = 0; /* the kernel reads the frame in place */
	if (banded && !in_dev && !out_dev && m_src == NULL && m_dst == NULL &&
	    slot_family(rq->src_format) == 0)
		nb = slot_band_plan(job, bands);
	if (np == 0) /* the one plane of an interleaved frame, whole */
		planes[0] = (cuda_plane){0, rq->src_stride, rq->input_size,
		                         rq->src_height, NULL};
	if (nb > 1)
		failed = slot_enqueue_banded(cb, s, job, &a, src, dst, kern,
		                             bands, nb, &planes[0], &st) != 0;
	else
		failed = FPREP__CUDA(&st, cudaEventRecord(s->t[CUDA_T_H2D0],
		                                          cb->s_h2d)) ||
		         (!in_dev && m_src == NULL &&
		          slot_h2d_frame(cb, s->d_in, src, rq->input_size,
		                         planes, np, &st)) ||
		         slot_kernel_d2h(cb, s, kern, grid, block, args, dst,
		                         out_bytes, !out_dev && m_dst == NULL,
		                         &st);
	if (failed)
		return slot_abandon(cb, job, &st);
	return 0;
}
