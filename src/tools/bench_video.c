/*
 * bench_video.c: frameprep-bench --video FILE --streams N [--realtime]
 * [--window N]:
 * N producers, each a thread with its own connection and stream, replaying
 * one file's access units (demuxed once, with the library's demuxer) at
 * the file's frame rate or flat out.
 *
 * The design is simple: a packet's send time is kept by its index; each
 * reply's frames carry the pts of the packets they came from (pts are
 * unique in a file). Two latencies per frame: from the last packet it
 * needed (the one whose reply carried it) to its tensor, the decode and
 * preprocessing; and from its own packet's send, the decoder's reordering
 * (B-frames wait for later packets) included. Frames let out by the final
 * flush wait
 * for the end of the file, not for the decoder: they are counted and
 * checked, not timed. With --window N above 1 a producer keeps N packets
 * in flight (fprep_stream_submit) and reads their replies in order, each
 * timed at its arrival (the submit's callback); a frame's latency then
 * includes its packet's wait behind those before it in the daemon. Each stream
 * is verified: as many frames as the file has packets, their pts strictly
 * increasing (display order), so each packet's pts comes back once; a refused
 * packet counts as an error.
 */
#include "bench_video.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <frameprep/demux.h>

#include "bench_hist.h"
#include "bench_run.h"

/* One access unit of the file. */
struct bv_packet {
	uint8_t *data;
	size_t size;
	int64_t pts;
};

/* The file, demuxed once; by_pts: packet indices sorted by pts. */
struct bv_file {
	struct bv_packet *p;
	size_t n;
	size_t *by_pts;
	fprep_demux_info info;
};

/* One producer: its results, merged by the main thread after the join. */
struct bv_producer {
	pthread_t thread;
	const bench_opts *o;
	const struct bv_file *f;
	fprep_request spec;
	uint64_t *sent_ns; /* by packet index */
	bench_hist last;   /* from the packet whose reply carried the frame */
	bench_hist own;    /* from the frame's own packet */
	uint64_t frames, errors;
	int failed; /* a transport error or a wrong frame: why says */
	char why[256];
};

static const struct bv_file *bv_sort_file;

static int bv_cmp_pts(const void *a, const void *b)
{
	int64_t x = bv_sort_file->p[*(const size_t *)a].pts;
	int64_t y = bv_sort_file->p[*(const size_t *)b].pts;

	return (x > y) - (x < y);
}

/* bv_find returns the index of the packet of pts, or -1. */
static long bv_find(const struct bv_file *f, int64_t pts)
{
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int64_t v = f->p[f->by_pts[mid]].pts;

		if (v == pts)
			return (long)f->by_pts[mid];
		if (v < pts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static void bv_file_fini(struct bv_file *f)
{
	for (size_t k = 0; k < f->n; k++)
		free(f->p[k].data);
	free(f->p);
	free(f->by_pts);
}

/* bv_load demuxes path into *f; 0, or 3 (an I/O error) or 4 (FFmpeg's
 * libraries missing) after saying why. */
static int bv_load(const char *path, struct bv_file *f)
{
	fprep_demux *d;
	const uint8_t *data;
	size_t size, cap = 0;
	int64_t pts;
	int rv;

	memset(f, 0, sizeof(*f));
	rv = fprep_demux_open(path, &d, &f->info);
	if (rv) {
		fprintf(stderr, "frameprep-bench: %s\n",
		        fprep_demux_last_error(NULL));
		return rv == FPREP_EUNSUPPORTED ? 4 : 3;
	}
	while ((rv = fprep_demux_read(d, &data, &size, &pts)) == 0) {
		if (f->n == cap) {
			struct bv_packet *p;

			cap = cap ? 2 * cap : 256;
			if ((p = realloc(f->p, cap * sizeof(*p))) == NULL)
				break;
			f->p = p;
		}
		f->p[f->n].data = malloc(size);
		if (f->p[f->n].data == NULL)
			break;
		memcpy(f->p[f->n].data, data, size);
		f->p[f->n].size = size;
		f->p[f->n].pts = pts;
		f->n++;
	}
	if (rv != 1) {
		fprintf(stderr, "frameprep-bench: %s: %s\n", path,
		        rv == 0 ? "out of memory" : fprep_demux_last_error(d));
		fprep_demux_close(d);
		return 3;
	}
	fprep_demux_close(d);
	if (f->n == 0 || (f->by_pts = calloc(f->n, sizeof(size_t))) == NULL) {
		fprintf(stderr, "frameprep-bench: %s: %s\n", path,
		        f->n == 0 ? "no video packet" : "out of memory");
		return 3;
	}
	for (size_t k = 0; k < f->n; k++)
		f->by_pts[k] = k;
	bv_sort_file = f;
	qsort(f->by_pts, f->n, sizeof(size_t), bv_cmp_pts);
	for (size_t k = 1; k < f->n; k++)
		if (f->p[f->by_pts[k]].pts == f->p[f->by_pts[k - 1]].pts) {
			fprintf(stderr,
			        "frameprep-bench: %s: two packets with pts "
			        "%" PRId64 ": frames cannot be told apart\n",
			        path, f->p[f->by_pts[k]].pts);
			return 3;
		}
	return 0;
}

/* bv_fail records the producer's first failure. */
static void bv_fail(struct bv_producer *w, const char *what, const char *msg)
{
	if (!w->failed)
		snprintf(w->why, sizeof(w->why), "%s: %s", what, msg);
	w->failed = 1;
}

/* bv_reply checks and times the frames of one reply, the packet's sent
 * at sent ns (0: the flush's, not timed); *last is the pts of the frame
 * before. */
static void bv_reply(struct bv_producer *w, const fprep_result *res,
                     uint64_t sent, uint64_t now, int64_t *last)
{
	fprep_stream_frame fr;
	char msg[128];
	long k;

	if (res->header.status != FPREP_OK) {
		w->errors++;
		bv_fail(w, fprep_err_name((int)res->header.status),
		        res->header.message);
		return;
	}
	for (uint32_t i = 0; i < res->header.shape[0]; i++) {
		if (fprep_stream_recv(res, i, &fr, NULL) != 0 ||
		    (k = bv_find(w->f, fr.pts)) < 0 ||
		    (w->frames > 0 && fr.pts <= *last)) {
			snprintf(msg, sizeof(msg),
			         "frame %" PRIu64 " pts %" PRId64
			         " (after %" PRId64 ")",
			         w->frames, fr.pts, *last);
			bv_fail(w,
			        "a frame out of display order or of no packet",
			        msg);
			return;
		}
		*last = fr.pts;
		w->frames++;
		if (sent != 0) {
			bench_hist_record(&w->last, now - sent);
			bench_hist_record(&w->own, now - w->sent_ns[k]);
		}
	}
}

/* A packet in flight (--window above 1): its index and when its reply
 * arrived (bv_arrived, on an nng thread; 0: not yet). */
struct bv_flight {
	fprep_pending *p;
	size_t k;
	_Atomic uint64_t back_ns;
};

static void bv_arrived(fprep_pending *p, void *arg)
{
	struct bv_flight *fl = arg;

	(void)p;
	atomic_store(&fl->back_ns, bench_now_ns());
}

/* bv_collect waits for the packet in flight fl and checks and times its
 * frames, from its send to its reply's arrival. */
static void bv_collect(struct bv_producer *w, fprep_client *c,
                       struct bv_flight *fl, int64_t *last)
{
	fprep_result res;
	uint64_t back;
	int err = fprep_pending_wait(fl->p, &res);

	fl->p = NULL;
	if (err) {
		bv_fail(w, fprep_err_name(err), fprep_client_last_error(c));
		return;
	}
	back = atomic_load(&fl->back_ns);
	bv_reply(w, &res, w->sent_ns[fl->k], back != 0 ? back : bench_now_ns(),
	         last);
	fprep_result_fini(&res);
}

/* bv_send_all sends the file's packets on st, each waiting for its reply
 * (window 1) or up to window in flight, whose replies are read in order. */
static void bv_send_all(struct bv_producer *w, fprep_client *c,
                        fprep_stream *st, int64_t *last)
{
	const struct bv_file *f = w->f;
	unsigned window = w->o->video_window > 0 ? w->o->video_window : 1;
	struct bv_flight *ring = NULL;
	uint64_t start, period = 0;
	size_t head = 0, n = 0;
	fprep_result res;
	int err;

	if (window > 1 && (ring = calloc(window, sizeof(*ring))) == NULL) {
		bv_fail(w, "start", "out of memory");
		return;
	}
	if (w->o->video_realtime)
		period = (uint64_t)(1e9 * f->info.fps_den / f->info.fps_num);
	start = bench_now_ns();
	for (size_t k = 0; k < f->n && !w->failed && !bench_interrupted; k++) {
		if (n == window && ring != NULL) {
			bv_collect(w, c, &ring[head], last);
			head = (head + 1) % window;
			n--;
			if (w->failed)
				break;
		}
		if (period)
			bench_sleep_until(start + k * period);
		w->sent_ns[k] = bench_now_ns();
		if (ring == NULL) {
			err = fprep_stream_send(st, f->p[k].data, f->p[k].size,
			                        f->p[k].pts, &res);
			if (err == 0) {
				bv_reply(w, &res, w->sent_ns[k], bench_now_ns(),
				         last);
				fprep_result_fini(&res);
			}
		} else {
			struct bv_flight *fl = &ring[(head + n) % window];

			fl->k = k;
			atomic_store(&fl->back_ns, 0);
			err = fprep_stream_submit(st, f->p[k].data,
			                          f->p[k].size, f->p[k].pts,
			                          bv_arrived, fl, &fl->p);
			n += err == 0;
		}
		if (err)
			bv_fail(w, fprep_err_name(err),
			        fprep_client_last_error(c));
	}
	for (; n > 0; n--, head = (head + 1) % window) /* each waited once */
		bv_collect(w, c, &ring[head], last);
	free(ring);
}

static void *bv_produce(void *arg)
{
	struct bv_producer *w = arg;
	const struct bv_file *f = w->f;
	fprep_client *c = NULL;
	fprep_stream *st = NULL;
	fprep_result res;
	int64_t last = 0;
	int err;

	err = fprep_client_open_trusting(&c, w->o->url, w->o->timeout_ms,
	                                 w->o->trust_owner);
	if (err == 0)
		err = fprep_stream_open(c, &w->spec, NULL, 0, &st);
	if (err) {
		bv_fail(w, fprep_err_name(err), fprep_client_last_error(c));
		goto out;
	}
	bv_send_all(w, c, st, &last);
	if (!w->failed && !bench_interrupted) {
		err = fprep_stream_flush(st, &res);
		if (err)
			bv_fail(w, fprep_err_name(err),
			        fprep_client_last_error(c));
		else {
			bv_reply(w, &res, 0, 0, &last);
			fprep_result_fini(&res);
		}
	}
	if (!w->failed && !bench_interrupted && w->frames != f->n) {
		char msg[96];

		snprintf(msg, sizeof(msg), "%" PRIu64 " frames of %zu",
		         w->frames, f->n);
		bv_fail(w, "frames missing", msg);
	}
	(void)fprep_stream_close(st);
out:
	fprep_client_close(c);
	return NULL;
}

int bench_video_main(const bench_opts *o)
{
	struct bv_file f;
	struct bv_producer *w;
	bench_hist last, own;
	uint64_t start, end, frames = 0, errors = 0;
	unsigned n = o->video_streams, failed = 0, started = 0;
	int rc;

	if ((rc = bv_load(o->video, &f)) != 0)
		return rc;
	if (o->video_realtime && f.info.fps_num <= 0) {
		fprintf(stderr,
		        "frameprep-bench: %s: the container gives no "
		        "frame rate: --realtime cannot pace it\n",
		        o->video);
		bv_file_fini(&f);
		return 2;
	}
	w = calloc(n, sizeof(*w));
	if (w == NULL) {
		bv_file_fini(&f);
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return 3;
	}
	printf("video %s: %s %" PRIu32 "x%" PRIu32 ", %zu frames (%.3g fps); "
	       "%u streams, %s, %u packets in flight each\n",
	       o->video, f.info.codec == FPREP_PIX_H264 ? "H.264" : "HEVC",
	       f.info.width, f.info.height, f.n,
	       f.info.fps_num > 0 ? (double)f.info.fps_num / f.info.fps_den
	                          : 0.0,
	       n,
	       o->video_realtime ? "each at the file's frame rate" : "flat out",
	       o->video_window > 0 ? o->video_window : 1);
	start = bench_now_ns();
	for (unsigned i = 0; i < n; i++) {
		w[i].o = o;
		w[i].f = &f;
		bench_hist_init(&w[i].last);
		bench_hist_init(&w[i].own);
		w[i].spec = o->spec.tmpl; /* its tensor; the source's ignored */
		w[i].spec.src_format = f.info.codec;
		w[i].sent_ns = calloc(f.n, sizeof(uint64_t));
		if (w[i].sent_ns == NULL ||
		    pthread_create(&w[i].thread, NULL, bv_produce, &w[i])) {
			bv_fail(&w[i], "start", "out of memory or threads");
			break;
		}
		started++;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	end = bench_now_ns();
	bench_hist_init(&last);
	bench_hist_init(&own);
	for (unsigned i = 0; i < n; i++) {
		bench_hist_merge(&last, &w[i].last);
		bench_hist_merge(&own, &w[i].own);
		frames += w[i].frames;
		errors += w[i].errors;
		if (w[i].failed) {
			if (failed++ < 8)
				fprintf(stderr,
				        "frameprep-bench: stream %u: %s\n", i,
				        w[i].why);
		}
		free(w[i].sent_ns);
	}
	printf("frames    %" PRIu64 " in %.3f s: %.1f frames/s\n", frames,
	       (double)(end - start) / 1e9,
	       (double)frames * 1e9 / (double)(end - start));
	printf("latency   p50 %.0f us, p99 %.0f us, max %.0f us (the last "
	       "packet a frame needed sent -> its tensor; %" PRIu64
	       " frames, the flush's not timed)\n",
	       (double)bench_hist_percentile(&last, 50) / 1e3,
	       (double)bench_hist_percentile(&last, 99) / 1e3,
	       (double)last.max_ns / 1e3, last.count);
	printf("own       p50 %.0f us, p99 %.0f us (its own packet sent -> "
	       "its tensor: B-frame reordering included)\n",
	       (double)bench_hist_percentile(&own, 50) / 1e3,
	       (double)bench_hist_percentile(&own, 99) / 1e3);
	if (failed || bench_interrupted)
		printf("verified  FAILED: %u of %u streams (%" PRIu64
		       " refused packets)%s\n",
		       failed, n, errors,
		       bench_interrupted ? ", interrupted" : "");
	else
		printf("verified  every stream: %zu frames, pts in display "
		       "order, each packet's once\n",
		       f.n);
	free(w);
	bv_file_fini(&f);
	return failed || bench_interrupted ? 1 : 0;
}
