/*
 * lane_util.h: what the GPU backend test and the lane benchmark share:
 * turning a photograph into a frame of any pixel format, and a job that a
 * thread can submit and wait for.
 */
#ifndef FPREP_TESTS_LANE_UTIL_H
#define FPREP_TESTS_LANE_UTIL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "frameprep/frameprep.h"

/* lane_image: an RGB8 photograph, w x h, rows of w * 3 bytes. */
typedef struct lane_image {
	char name[64];
	int w, h;
	uint8_t *rgb;
} lane_image;

/* lane_frame_make converts im into a frame of format fmt with stride
 * w * bpp + extra bytes (the padding bytes are filled too, so a kernel that
 * reads them shows). GRAY8 uses the BT.601 luma of the photograph; alpha is
 * a gradient. Returns a malloc'ed buffer and sets *stride and *size. */
static inline uint8_t *lane_frame_make(const lane_image *im, uint16_t fmt,
                                       uint32_t extra, uint32_t *stride,
                                       uint64_t *size)
{
	uint32_t bpp = fprep_pixel_bytes(fmt);
	uint32_t st = (uint32_t)im->w * bpp + extra;
	uint8_t *f = malloc((size_t)st * im->h);

	if (f == NULL)
		return NULL;
	for (int y = 0; y < im->h; y++) {
		uint8_t *row = f + (size_t)y * st;
		for (int x = 0; x < im->w; x++) {
			const uint8_t *p =
			        im->rgb + ((size_t)y * im->w + x) * 3;
			uint8_t *q = row + (size_t)x * bpp;
			switch (fmt) {
			case FPREP_PIX_BGR8:
			case FPREP_PIX_BGRA8:
				q[0] = p[2], q[1] = p[1], q[2] = p[0];
				break;
			case FPREP_PIX_RGB8:
			case FPREP_PIX_RGBA8:
				q[0] = p[0], q[1] = p[1], q[2] = p[2];
				break;
			default:
				q[0] = (uint8_t)((299 * p[0] + 587 * p[1] +
				                  114 * p[2] + 500) /
				                 1000);
				break;
			}
			if (bpp == 4)
				q[3] = (uint8_t)(x + y);
		}
		for (uint32_t i = (uint32_t)im->w * bpp; i < st; i++)
			row[i] = (uint8_t)(0xc3 ^ i);
	}
	*stride = st;
	*size = (uint64_t)st * (im->h - 1) + (uint64_t)im->w * bpp;
	return f;
}

/* lane_waiter: counts done callbacks; lane_wait blocks until n arrived. */
typedef struct lane_waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned done;
} lane_waiter;

/* lane_job: a job with its waiter and the number of times done ran. */
typedef struct lane_job {
	fprep__job job;
	lane_waiter *w;
	unsigned calls;
} lane_job;

static inline void lane_done(fprep__job *job)
{
	lane_job *lj = (lane_job *)job;
	pthread_mutex_lock(&lj->w->mu);
	lj->calls++;
	lj->w->done++;
	pthread_cond_broadcast(&lj->w->cv);
	pthread_mutex_unlock(&lj->w->mu);
}

static inline void lane_waiter_init(lane_waiter *w)
{
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->done = 0;
}

/* lane_count returns how many done callbacks arrived so far. */
static inline unsigned lane_count(lane_waiter *w)
{
	pthread_mutex_lock(&w->mu);
	unsigned n = w->done;
	pthread_mutex_unlock(&w->mu);
	return n;
}

static inline void lane_wait(lane_waiter *w, unsigned n)
{
	pthread_mutex_lock(&w->mu);
	while (w->done < n)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

/* lane_job_init prepares lj for req with input frame and output buffer out
 * of out_size bytes (the tensor's size), planned as the daemon plans a job
 * (fprep__job_plan). The caller sets input_pinned and output_pinned when
 * frame or out lie in page-locked memory. */
static inline void lane_job_init(lane_job *lj, lane_waiter *w,
                                 const fprep_request *req, const uint8_t *frame,
                                 uint8_t *out, uint64_t out_size)
{
	memset(lj, 0, sizeof *lj);
	lj->job.req = *req;
	if (fprep__job_plan(&lj->job) != 0 || lj->job.output_size != out_size) {
		fprintf(stderr, "lane_job_init: tensor size %llu, not %llu\n",
		        (unsigned long long)lj->job.output_size,
		        (unsigned long long)out_size);
		exit(1);
	}
	lj->job.input = frame;
	lj->job.output = out;
	lj->job.done = lane_done;
	lj->w = w;
}

#endif /* FPREP_TESTS_LANE_UTIL_H */
