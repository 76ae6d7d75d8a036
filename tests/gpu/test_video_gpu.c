/*
 * test_video_gpu.c: video streams on the GPU (NVDEC, the CUDA backend's
 * cuda_video.c) against the CPU backend's (libavcodec), through a real
 * frameprepd and the public client API.
 *
 * The streams are raw Annex-B files with access unit delimiters
 * (tests/gpu/video_streams.sh makes them with Debian's ffmpeg from the
 * photographs: H.264 with B-frames, HEVC, an H.264 of an odd size; a
 * manifest, streams.txt, lists "NAME CODEC" a line), split here at each
 * delimiter. Every packet is sent with its decode index as pts, then a
 * flush; the tensors are U8 64x64 letterboxes, so that the reference of
 * all the streams weighs less than a megabyte.
 *
 *   record DEVICE FRAMEPREPD DIR   decodes each stream on a daemon of
 *        --device DEVICE (cpu: libavcodec) and writes DIR/NAME.ref: the
 *        frames' count, then per frame its pts, size and tensor.
 *   check DEVICE FRAMEPREPD DIR    decodes each stream again and compares
 *        with DIR/NAME.ref: as many frames, the same pts in the same
 *        order and sizes, every tensor byte within 1 LSB; then the first
 *        stream with a packet of its second group of pictures corrupt
 *        and one cut short: each answered "broken bitstream" (EBITSTREAM) or
 *        dropped while the stream waits (STREAM_SKIPPED), never a crash,
 *        frames again from the next IDR/IRAP picture equal to the
 *        reference's; the daemon answers INFO afterwards, whose
 *        video_decoder line names NVDEC on a GPU.
 *   rate DEVICE FRAMEPREPD DIR N SECONDS [WINDOW [CODEC]]   N streams at
 *        once (a client each), each replaying DIR/rate.CODEC (h264, the
 *        default, or hevc) flat out to
 *        640x640 F32 with WINDOW (1, at most VG_MAX_WINDOW) packets in
 *        flight: frames/s and the latency from a packet's send to its
 *        reply, for the replies that carry frames (p50, p99; with a
 *        window the wait behind the packets before it included). The
 *        clock starts once every stream has decoded its first 8 packets
 *        and flushed (its decoder made: 32 decoders take about 1.5 s of
 *        the H200 machine's cores, which a camera's stream pays once).
 *        FPREP_VIDEO_RATE_OUT: where the tensors go, inline (the
 *        default), shm (a shared-memory region per stream) or cuda (the
 *        client's device memory, a CUDA region per stream). With
 *        FPREP_VIDEO_RATE_SMALL=1 the tensors are the checks' 64x64 U8
 *        instead (12 kB, not 4.9 MB, through the socket).
 *
 *   off DEVICE FRAMEPREPD   a daemon with FPREP_NVDEC=off (as where
 *        libnvcuvid.so.1 is missing): STREAM_OPEN refused with EUNSUPPORTED
 *        naming libnvcuvid.so.1, INFO's video_decoder "none (...)", frames
 *        still served.
 *   probe DEVICE   exits 77 when DEVICE is a GPU and there is none, else 0.
 *
 * DEVICE other than cpu without a GPU: exits 77 (skipped). Ends with one
 * PASS/FAIL line.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"

#define OUT       64
#define MAX_UNITS 4096
/* Packets in flight of the windowed decodes (the daemon's NVDEC sessions
 * take four at once). */
#define VG_WINDOW     4
#define VG_MAX_WINDOW 8

/* A stream file split into access units. */
typedef struct vg_file {
	uint8_t *data;
	size_t size;
	size_t start[MAX_UNITS + 1]; /* unit k: [start[k], start[k + 1]) */
	unsigned n;
	uint16_t codec;
} vg_file;

/* A decoded frame: its record and tensor. */
typedef struct vg_frame {
	fprep_stream_frame rec;
	uint8_t *tensor;
} vg_frame;

typedef struct vg_frames {
	vg_frame *f;
	unsigned n, cap;
	size_t bytes; /* of each tensor */
	unsigned errors, skipped;
} vg_frames;

/* Where a decode's tensors go (vg_decode): inline (r NULL), or a region
 * (shared memory, or CUDA memory when cuda) of places places of place
 * bytes, packet k's frames at place k % window, and then the flush's
 * room (place VG_FLUSH), up to the region's end. */
typedef struct vg_out {
	fprep_region *r;
	int cuda;
	size_t place;
	unsigned places;
} vg_out;
#define VG_FLUSH UINT32_MAX

static uint64_t vg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* vg_aud: whether a NAL unit of the codec's that starts at p is an access
 * unit delimiter (H.264 type 9, HEVC type 35). */
static int vg_aud(uint16_t codec, const uint8_t *p)
{
	return codec == FPREP_PIX_H264 ? (p[0] & 0x1f) == 9
	                               : ((p[0] >> 1) & 0x3f) == 35;
}

/* vg_load reads path and splits it before each delimiter's start code. */
static int vg_load(vg_file *f, const char *path, uint16_t codec)
{
	FILE *fp = fopen(path, "rb");
	long len;

	memset(f, 0, sizeof(*f));
	f->codec = codec;
	if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) <= 0)
		goto fail;
	rewind(fp);
	f->data = malloc((size_t)len);
	if (f->data == NULL ||
	    fread(f->data, 1, (size_t)len, fp) != (size_t)len)
		goto fail;
	fclose(fp);
	f->size = (size_t)len;
	for (size_t i = 0; i + 3 < f->size; i++) {
		if (f->data[i] != 0 || f->data[i + 1] != 0 ||
		    f->data[i + 2] != 1 || !vg_aud(codec, f->data + i + 3))
			continue;
		size_t at = i > 0 && f->data[i - 1] == 0 ? i - 1 : i;

		if (f->n == MAX_UNITS)
			return -1;
		if (f->n == 0 && at != 0)
			f->start[f->n++] = 0; /* what precedes the first AUD */
		f->start[f->n++] = at;
		i += 3;
	}
	f->start[f->n] = f->size;
	return f->n > 0 ? 0 : -1;
fail:
	if (fp != NULL)
		fclose(fp);
	free(f->data);
	return -1;
}

static void vg_frames_free(vg_frames *fr)
{
	for (unsigned k = 0; k < fr->n; k++)
		free(fr->f[k].tensor);
	free(fr->f);
	memset(fr, 0, sizeof(*fr));
}

/* vg_take keeps the frames of reply res; counts errors and skips. Its
 * tensors are inline, or at src of out's region (read back from the
 * device for a CUDA region). */
static void vg_take(fprep_client *c, vg_frames *fr, const fprep_result *res,
                    const char *what, const vg_out *out, const uint8_t *src)
{
	uint32_t n = res->header.shape[0];

	if (res->header.status != FPREP_OK) {
		const char *why = fprep_client_last_error(c);

		fr->errors++;
		CHECK(res->header.status == FPREP_EBITSTREAM && why != NULL &&
		              strstr(why, "broken bitstream") != NULL,
		      "%s: status %u: %s\n", what, res->header.status,
		      why ? why : "");
		return;
	}
	if (res->header.flags & FPREP_REPLY_F_STREAM_SKIPPED)
		fr->skipped++;
	for (uint32_t k = 0; k < n; k++) {
		const void *t = NULL;
		vg_frame *f;

		if (fr->n == fr->cap) {
			fr->cap = fr->cap ? 2 * fr->cap : 64;
			fr->f = realloc(fr->f, fr->cap * sizeof(*fr->f));
			REQUIRE(fr->f != NULL);
		}
		f = &fr->f[fr->n++];
		REQUIRE(fprep_stream_recv(res, k, &f->rec, &t) == 0);
		fr->bytes = res->header.tensor_size / n;
		f->tensor = malloc(fr->bytes);
		REQUIRE(f->tensor != NULL);
		if (out == NULL || out->r == NULL) {
			REQUIRE(t != NULL);
			memcpy(f->tensor, t, fr->bytes);
			continue;
		}
		/* In the region: the reply carries only the records. */
		CHECK(t == NULL && res->header.output_loc ==
		                           (out->cuda ? FPREP_LOC_CUDA
		                                      : FPREP_LOC_SHM),
		      "%s: output_loc %u\n", what, res->header.output_loc);
		if (out->cuda)
			REQUIRE(cudaMemcpy(f->tensor, src + k * fr->bytes,
			                   fr->bytes, cudaMemcpyDeviceToHost) ==
			        cudaSuccess);
		else
			memcpy(f->tensor, src + k * fr->bytes, fr->bytes);
	}
}

/* vg_spec: the tensors of the tests, U8 64x64 letterboxes (size 0: 640,
 * F32, for rate). */
static void vg_spec(fprep_request *spec, uint16_t codec, int small)
{
	fprep_stream_request_init(spec, codec);
	if (small) {
		spec->out_width = spec->out_height = OUT;
		spec->dtype = FPREP_DTYPE_U8;
	}
}

/* vg_place_at: the offset of place i of out's region (VG_FLUSH: the
 * flush's room). */
static size_t vg_place_at(const vg_out *out, unsigned i)
{
	REQUIRE(i == VG_FLUSH || i < out->places);
	return (i == VG_FLUSH ? out->places : i) * out->place;
}

/* vg_place: the start of place i of out's region (vg_place_at); NULL for
 * inline tensors. */
static const uint8_t *vg_place(const vg_out *out, unsigned i)
{
	if (out == NULL || out->r == NULL)
		return NULL;
	return (const uint8_t *)fprep_region_base(out->r) + vg_place_at(out, i);
}

/* vg_set_output points st's next request at place i of out's region
 * (vg_place); nothing for inline tensors. */
static void vg_set_output(fprep_stream *st, const vg_out *out, unsigned i)
{
	size_t at;

	if (out == NULL || out->r == NULL)
		return;
	at = vg_place_at(out, i);
	REQUIRE(fprep_stream_set_output(
	                st, out->r, at,
	                i != VG_FLUSH ? out->place
	                              : fprep_region_size(out->r) - at) == 0);
}

/* vg_wait takes the reply of packet k, in flight as *p. */
static void vg_wait(fprep_client *c, vg_frames *fr, fprep_pending **p,
                    const char *name, unsigned k, const vg_out *out,
                    unsigned window)
{
	fprep_result res;
	char what[128];
	int rv = fprep_pending_wait(*p, &res);

	*p = NULL;
	snprintf(what, sizeof(what), "%s packet %u", name, k);
	CHECK(rv == 0, "%s: %s\n", what, fprep_strerror(rv));
	if (rv == 0)
		vg_take(c, fr, &res, what, out, vg_place(out, k % window));
	fprep_result_fini(&res);
}

/* vg_decode sends every unit of f (unit bad, if < f->n, replaced by
 * bad_data/bad_size) and a flush on a new stream of c; the frames into
 * *fr. window: packets in flight (1: each waits for its reply; more:
 * fprep_stream_submit, the replies taken in order, so that the GPU's
 * session parses a packet ahead). */
static void vg_decode(fprep_client *c, const vg_file *f, vg_frames *fr,
                      unsigned bad, const uint8_t *bad_data, size_t bad_size,
                      const char *name, unsigned window, const vg_out *out)
{
	fprep_pending *flight[VG_MAX_WINDOW] = {0};
	fprep_request spec;
	fprep_stream *st = NULL;
	fprep_result res;
	char what[128];
	int rv;

	vg_spec(&spec, f->codec, 1);
	rv = fprep_stream_open(c, &spec, NULL, 0, &st);
	CHECK(rv == 0, "%s: stream open: %s (%s)\n", name, fprep_strerror(rv),
	      fprep_client_last_error(c));
	if (rv != 0)
		return;
	for (unsigned k = 0; k < f->n; k++) {
		const uint8_t *p = f->data + f->start[k];
		size_t size = f->start[k + 1] - f->start[k];

		if (k == bad) {
			p = bad_data;
			size = bad_size;
		}
		vg_set_output(st, out, k % window);
		if (window > 1) {
			if (k >= window)
				vg_wait(c, fr, &flight[(k - window) % window],
				        name, k - window, out, window);
			rv = fprep_stream_submit(st, p, size, (int64_t)k, NULL,
			                         NULL, &flight[k % window]);
			CHECK(rv == 0, "%s packet %u: submit: %s\n", name, k,
			      fprep_strerror(rv));
			continue;
		}
		memset(&res, 0, sizeof(res));
		rv = fprep_stream_send(st, p, size, (int64_t)k, &res);
		snprintf(what, sizeof(what), "%s packet %u", name, k);
		CHECK(rv == 0, "%s: %s\n", what, fprep_strerror(rv));
		if (rv == 0)
			vg_take(c, fr, &res, what, out, vg_place(out, 0));
		fprep_result_fini(&res);
	}
	for (unsigned k = f->n > window ? f->n - window : 0;
	     window > 1 && k < f->n; k++)
		if (flight[k % window] != NULL)
			vg_wait(c, fr, &flight[k % window], name, k, out,
			        window);
	vg_set_output(st, out, VG_FLUSH);
	memset(&res, 0, sizeof(res));
	rv = fprep_stream_flush(st, &res);
	CHECK(rv == 0, "%s flush: %s\n", name, fprep_strerror(rv));
	if (rv == 0)
		vg_take(c, fr, &res, "flush", out, vg_place(out, VG_FLUSH));
	fprep_result_fini(&res);
	CHECK(fprep_stream_close(st) == 0, "%s: close\n", name);
}

/* vg_ref_write writes the frames as DIR/NAME.ref. */
static void vg_ref_write(const char *path, const vg_frames *fr)
{
	FILE *fp = fopen(path, "wb");
	uint64_t bytes = fr->bytes;

	REQUIRE(fp != NULL);
	REQUIRE(fwrite(&fr->n, sizeof(fr->n), 1, fp) == 1);
	REQUIRE(fwrite(&bytes, sizeof(bytes), 1, fp) == 1);
	for (unsigned k = 0; k < fr->n; k++) {
		const fprep_stream_frame *r = &fr->f[k].rec;

		REQUIRE(fwrite(&r->pts, sizeof(r->pts), 1, fp) == 1);
		REQUIRE(fwrite(&r->width, sizeof(r->width), 1, fp) == 1);
		REQUIRE(fwrite(&r->height, sizeof(r->height), 1, fp) == 1);
		REQUIRE(fwrite(fr->f[k].tensor, 1, bytes, fp) == bytes);
	}
	REQUIRE(fclose(fp) == 0);
}

static int vg_ref_read(const char *path, vg_frames *fr)
{
	FILE *fp = fopen(path, "rb");
	uint64_t bytes;
	unsigned n;

	memset(fr, 0, sizeof(*fr));
	if (fp == NULL || fread(&n, sizeof(n), 1, fp) != 1 ||
	    fread(&bytes, sizeof(bytes), 1, fp) != 1 || n > MAX_UNITS ||
	    bytes > (1u << 24)) {
		if (fp != NULL)
			fclose(fp);
		return -1;
	}
	fr->bytes = bytes;
	fr->cap = fr->n = n;
	fr->f = calloc(n ? n : 1, sizeof(*fr->f));
	REQUIRE(fr->f != NULL);
	for (unsigned k = 0; k < n; k++) {
		fprep_stream_frame *r = &fr->f[k].rec;

		fr->f[k].tensor = malloc(bytes ? bytes : 1);
		REQUIRE(fr->f[k].tensor != NULL);
		if (fread(&r->pts, sizeof(r->pts), 1, fp) != 1 ||
		    fread(&r->width, sizeof(r->width), 1, fp) != 1 ||
		    fread(&r->height, sizeof(r->height), 1, fp) != 1 ||
		    fread(fr->f[k].tensor, 1, bytes, fp) != bytes) {
			fclose(fp);
			return -1;
		}
	}
	fclose(fp);
	return 0;
}

/* vg_same compares frame got with ref: pts, size, tensor within 1 LSB. */
static int vg_same(const vg_frame *got, const vg_frame *ref, size_t bytes,
                   const char *name, unsigned k)
{
	unsigned worst = 0;

	if (got->rec.pts != ref->rec.pts || got->rec.width != ref->rec.width ||
	    got->rec.height != ref->rec.height) {
		CHECK(0,
		      "%s frame %u: pts %" PRId64 " %ux%u, reference pts "
		      "%" PRId64 " %ux%u\n",
		      name, k, got->rec.pts, got->rec.width, got->rec.height,
		      ref->rec.pts, ref->rec.width, ref->rec.height);
		return 0;
	}
	for (size_t i = 0; i < bytes; i++) {
		int d = (int)got->tensor[i] - (int)ref->tensor[i];
		unsigned a = (unsigned)(d < 0 ? -d : d);

		if (a > worst)
			worst = a;
	}
	CHECK(worst <= 1, "%s frame %u (pts %" PRId64 "): %u LSB off\n", name,
	      k, got->rec.pts, worst);
	return worst <= 1;
}

/* vg_manifest reads DIR/streams.txt: up to max "NAME CODEC" lines. */
static unsigned vg_manifest(const char *dir, char names[][64], uint16_t *codecs,
                            unsigned max)
{
	char path[4096], codec[16];
	unsigned n = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/streams.txt", dir);
	fp = fopen(path, "r");
	REQUIRE(fp != NULL);
	while (n < max && fscanf(fp, "%63s %15s", names[n], codec) == 2)
		codecs[n++] = strcmp(codec, "hevc") == 0 ? FPREP_PIX_HEVC
		                                         : FPREP_PIX_H264;
	fclose(fp);
	return n;
}

/* vg_compare checks the frames got of a stream of packets packets,
 * decoded with window packets in flight, against the reference ref: as
 * many, the same pts in order and sizes, each tensor within 1 LSB. */
static void vg_compare(const vg_frames *got, const vg_frames *ref,
                       const char *name, unsigned packets, unsigned window)
{
	unsigned same = 0;

	CHECK(got->n == ref->n, "%s, %u in flight: %u frames, reference %u\n",
	      name, window, got->n, ref->n);
	CHECK(got->bytes == ref->bytes || got->n == 0,
	      "%s: tensors of %zu bytes, reference %zu\n", name, got->bytes,
	      ref->bytes);
	for (unsigned k = 0; k < got->n && k < ref->n; k++)
		same += vg_same(&got->f[k], &ref->f[k], ref->bytes, name, k);
	printf("%s: %u packets, %u in flight: %u frames, %u within 1 LSB of "
	       "the reference, pts in order\n",
	       name, packets, window, got->n, same);
}

/* vg_errors: the first stream with a packet of its second group of
 * pictures corrupt (its second half scrambled) and a later one cut to a
 * third; named errors or skips, then frames again from the next key
 * picture, equal to the reference's. */
static void vg_errors(fprep_client *c, const vg_file *f, const vg_frames *ref,
                      const char *name, unsigned window)
{
	vg_frames got = {0};
	unsigned bad = f->n / 2 + 1, matched = 0;
	size_t size = f->start[bad + 1] - f->start[bad];
	uint8_t *u = malloc(size);

	REQUIRE(u != NULL);
	memcpy(u, f->data + f->start[bad], size);
	for (size_t k = size / 2; k < size; k++)
		u[k] = (uint8_t)(u[k] * 7 + 91);
	vg_decode(c, f, &got, bad, u, size, name, window, NULL);
	CHECK(got.errors + got.skipped > 0,
	      "%s: the corrupt packet %u passed unnoticed\n", name, bad);
	/* Frames again after the break: the last frames equal the
	 * reference's (the same pts). */
	for (unsigned k = 0; k < got.n; k++)
		for (unsigned j = 0; j < ref->n; j++)
			if (ref->f[j].rec.pts == got.f[k].rec.pts &&
			    got.f[k].rec.pts > (int64_t)bad &&
			    vg_same(&got.f[k], &ref->f[j], ref->bytes, name, k))
				matched++;
	CHECK(matched > 0, "%s: no frame after the corrupt packet\n", name);
	printf("%s corrupt packet %u, %u in flight: %u errors, %u skipped, "
	       "%u frames, %u after it equal to the reference\n",
	       name, bad, window, got.errors, got.skipped, got.n, matched);
	vg_frames_free(&got);
	memset(&got, 0, sizeof(got));
	vg_decode(c, f, &got, bad, u, size / 3, name, window, NULL);
	CHECK(got.n > 0, "%s: no frames around a packet cut short\n", name);
	printf("%s packet %u cut short, %u in flight: %u errors, %u skipped, "
	       "%u frames\n",
	       name, bad, window, got.errors, got.skipped, got.n);
	vg_frames_free(&got);
	free(u);
}

/* vg_out_open opens out as a region of c for a stream of frames of one
 * bytes each: shared memory, or CUDA memory (cudaMalloc) when cuda;
 * places places of per frames each (a packet lets out one or two), then
 * the flush's room of flush frames. */
static int vg_out_open(fprep_client *c, vg_out *out, int cuda, size_t one,
                       unsigned places, unsigned per, unsigned flush)
{
	size_t size;
	void *d = NULL;
	int rv;

	memset(out, 0, sizeof(*out));
	out->cuda = cuda;
	out->place = per * one;
	out->places = places;
	size = places * out->place + flush * one;
	if (!cuda)
		return fprep_region_open(&out->r, c, size);
	REQUIRE(cudaMalloc(&d, size) == cudaSuccess);
	rv = fprep_region_open_cuda(&out->r, c, d, size);
	if (rv != 0)
		cudaFree(d);
	return rv;
}

static void vg_out_close(vg_out *out)
{
	void *d = out->cuda && out->r ? fprep_region_base(out->r) : NULL;

	fprep_region_close(out->r);
	if (d != NULL)
		cudaFree(d);
	memset(out, 0, sizeof(*out));
}

/* vg_regions decodes the stream again with its tensors in a region
 * (fprep_stream_set_output): shared memory, and on a GPU its CUDA
 * memory, one and VG_WINDOW packets in flight; the frames equal the
 * reference's. */
static void vg_regions(fprep_client *c, const vg_file *f, const vg_frames *ref,
                       const char *name, const char *device)
{
	for (int cuda = 0; cuda <= (strcmp(device, "cpu") != 0); cuda++)
		for (unsigned w = 1; w <= VG_WINDOW; w += VG_WINDOW - 1) {
			vg_frames got = {0};
			char what[96];
			vg_out out;
			int rv = vg_out_open(c, &out, cuda,
			                     (size_t)OUT * OUT * 3, VG_WINDOW,
			                     4, 64);

			CHECK(rv == 0, "%s: %s region: %s (%s)\n", name,
			      cuda ? "CUDA" : "shared-memory",
			      fprep_strerror(rv), fprep_client_last_error(c));
			if (rv != 0)
				continue;
			snprintf(what, sizeof(what), "%s, tensors in %s", name,
			         cuda ? "CUDA memory" : "shared memory");
			vg_decode(c, f, &got, UINT32_MAX, NULL, 0, what, w,
			          &out);
			vg_compare(&got, ref, what, f->n, w);
			vg_frames_free(&got);
			vg_out_close(&out);
		}
}

/* vg_region_errors: a region too small for a packet's frames is refused
 * with ELIMIT naming out_capacity and the stream goes on (the next
 * packets' frames come); a region unregistered is EREGION. */
static void vg_region_errors(fprep_client *c, const vg_file *f,
                             const char *name)
{
	fprep_request spec;
	fprep_stream *st = NULL;
	fprep_result res;
	unsigned limited = 0, after = 0, k;
	const char *why;
	vg_out out;
	int rv;

	vg_spec(&spec, f->codec, 1);
	REQUIRE(vg_out_open(c, &out, 0, (size_t)OUT * OUT * 3, 1, 4, 64) == 0);
	REQUIRE(fprep_stream_open(c, &spec, NULL, 0, &st) == 0);
	for (k = 0; k < f->n; k++) {
		size_t cap = k < f->n / 2 ? 1 : out.place;

		REQUIRE(fprep_stream_set_output(st, out.r, 0, cap) == 0);
		memset(&res, 0, sizeof(res));
		rv = fprep_stream_send(st, f->data + f->start[k],
		                       f->start[k + 1] - f->start[k],
		                       (int64_t)k, &res);
		REQUIRE(rv == 0);
		why = fprep_client_last_error(c);
		if (res.header.status == FPREP_ELIMIT) {
			limited++;
			CHECK(k < f->n / 2 && why != NULL &&
			              strstr(why, "out_capacity") != NULL,
			      "%s packet %u: ELIMIT: %s\n", name, k,
			      why ? why : "");
		} else {
			CHECK(res.header.status == FPREP_OK,
			      "%s packet %u: status %u (%s)\n", name, k,
			      res.header.status, why ? why : "");
			if (k >= f->n / 2)
				after += res.header.shape[0];
		}
		fprep_result_fini(&res);
	}
	CHECK(limited > 0 && after > 0,
	      "%s: %u packets refused for out_capacity, %u frames after\n",
	      name, limited, after);
	printf("%s: out_capacity 1 byte: %u packets refused (ELIMIT naming "
	       "out_capacity), then %u frames\n",
	       name, limited, after);
	/* The region unregistered: EREGION, the stream still usable. */
	REQUIRE(fprep_stream_set_output(st, out.r, 0, out.place) == 0);
	fprep_region_unregister(out.r);
	memset(&res, 0, sizeof(res));
	REQUIRE(fprep_stream_flush(st, &res) == 0);
	why = fprep_client_last_error(c);
	CHECK(res.header.status == FPREP_EREGION && why != NULL &&
	              strstr(why, "out_region") != NULL,
	      "%s: flush into an unregistered region: status %u (%s)\n", name,
	      res.header.status, why ? why : "");
	fprep_result_fini(&res);
	REQUIRE(fprep_stream_set_output(st, NULL, 0, 0) == 0);
	memset(&res, 0, sizeof(res));
	REQUIRE(fprep_stream_flush(st, &res) == 0);
	CHECK(res.header.status == FPREP_OK,
	      "%s: inline flush after: status %u\n", name, res.header.status);
	fprep_result_fini(&res);
	CHECK(fprep_stream_close(st) == 0, "%s: close\n", name);
	vg_out_close(&out);
}

/* vg_info checks INFO's video_decoder line: NVDEC on a GPU. */
static void vg_info(fprep_client *c, const char *device)
{
	fprep_result res;
	const char *line;

	memset(&res, 0, sizeof(res));
	REQUIRE(fprep_client_info(c, &res) == 0);
	line = res.payload
	               ? strstr((const char *)res.payload, "video_decoder: ")
	               : NULL;
	CHECK(line != NULL, "INFO has no video_decoder line\n");
	if (line != NULL) {
		printf("%.*s\n", (int)strcspn(line, "\n"), line);
		if (strcmp(device, "cpu") != 0)
			CHECK(strncmp(line, "video_decoder: NVDEC", 20) == 0,
			      "a GPU daemon without NVDEC\n");
	}
	fprep_result_fini(&res);
}

/* vg_off: a daemon whose NVDEC is off (FPREP_NVDEC=off, as where
 * libnvcuvid.so.1 is missing) refuses streams with EUNSUPPORTED naming the
 * library, says why in INFO, and still serves frames. */
static void vg_off(fprep_client *c, const char *url)
{
	fprep_request spec;
	fprep_stream *st = NULL;
	char line[256];
	int rv;

	vg_spec(&spec, FPREP_PIX_H264, 1);
	rv = fprep_stream_open(c, &spec, NULL, 0, &st);
	CHECK(rv == FPREP_EUNSUPPORTED &&
	              strstr(fprep_client_last_error(c), "libnvcuvid.so.1"),
	      "stream open without NVDEC: %s (%s)\n", fprep_strerror(rv),
	      fprep_client_last_error(c));
	if (rv == 0)
		fprep_stream_close(st);
	printf("without NVDEC: %s\n", fprep_client_last_error(c));
	CHECK(daemon_info_value(c, "video_decoder", line, sizeof(line)) == 0 &&
	              strncmp(line, "none (", 6) == 0,
	      "INFO without NVDEC: video_decoder: %s\n", line);
	daemon_serves(url, "a stream refused without NVDEC");
}

/* A rate stream: its thread's counts and latencies. */
typedef struct vg_rate {
	const char *url;
	const vg_file *f;
	uint64_t until_ns;
	unsigned window; /* packets in flight */
	unsigned long frames;
	uint64_t *lat_ns; /* of replies with frames */
	size_t nlat, cap;
	int failed;
	const vg_out *out; /* where the tensors go (vg_rate_out) */
	/* Every stream warmed up (vg_rate_warm: its decoder made), then
	 * until_ns set: the measurement starts at the second. */
	pthread_barrier_t *warm, *go;
} vg_rate;

/* vg_rate_take counts the frames of reply res of a packet sent at t0
 * and records its latency when it carries any; 0, or -1 when it failed. */
static int vg_rate_take(vg_rate *r, int rv, fprep_result *res, uint64_t t0)
{
	if (rv != 0 || res->header.status != FPREP_OK) {
		r->failed = 1;
		fprep_result_fini(res);
		return -1;
	}
	if (res->header.shape[0] > 0) {
		if (r->nlat == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 4096;
			r->lat_ns =
			        realloc(r->lat_ns, r->cap * sizeof(*r->lat_ns));
		}
		if (r->lat_ns != NULL)
			r->lat_ns[r->nlat++] = vg_now_ns() - t0;
	}
	r->frames += res->header.shape[0];
	fprep_result_fini(res);
	return 0;
}

/* vg_rate_window replays r's file once with r->window packets in flight
 * (fprep_stream_submit), the replies taken in order, then a flush. */
static void vg_rate_window(vg_rate *r, fprep_stream *st)
{
	fprep_pending *p[VG_MAX_WINDOW] = {0};
	uint64_t t[VG_MAX_WINDOW];
	unsigned w = r->window, n = r->f->n;
	fprep_result res;
	int rv;

	for (unsigned k = 0; k < n + w && !r->failed; k++) {
		if (k >= w && p[(k - w) % w] != NULL) {
			rv = fprep_pending_wait(p[(k - w) % w], &res);
			p[(k - w) % w] = NULL;
			if (vg_rate_take(r, rv, &res, t[(k - w) % w]) != 0)
				break;
		}
		if (k >= n)
			continue;
		t[k % w] = vg_now_ns();
		vg_set_output(st, r->out, k % w);
		if (fprep_stream_submit(st, r->f->data + r->f->start[k],
		                        r->f->start[k + 1] - r->f->start[k],
		                        (int64_t)k, NULL, NULL, &p[k % w]) != 0)
			r->failed = 1;
	}
	for (unsigned k = 0; k < w; k++) /* each waited once */
		if (p[k] != NULL) {
			(void)fprep_pending_wait(p[k], &res);
			fprep_result_fini(&res);
		}
	if (!r->failed) {
		uint64_t t0 = vg_now_ns();

		vg_set_output(st, r->out, VG_FLUSH);
		memset(&res, 0, sizeof(res));
		rv = fprep_stream_flush(st, &res);
		(void)vg_rate_take(r, rv, &res, t0);
	}
}

/* vg_rate_out: FPREP_VIDEO_RATE_OUT, where rate's tensors go: 0 inline
 * (unset or "inline"), 1 a shared-memory region ("shm"), 2 a CUDA
 * region in the client's device memory ("cuda"), a region per stream. */
static int vg_rate_out(void)
{
	const char *v = getenv("FPREP_VIDEO_RATE_OUT");

	return v == NULL || strcmp(v, "inline") == 0 ? 0
	       : strcmp(v, "shm") == 0               ? 1
	       : strcmp(v, "cuda") == 0              ? 2
	                                             : -1;
}

static const char *const vg_rate_out_names[] = {"inline", "shared memory",
                                                "CUDA memory"};

/* vg_rate_small: FPREP_VIDEO_RATE_SMALL=1, rate's tensors 64x64 U8. */
static int vg_rate_small(void)
{
	const char *v = getenv("FPREP_VIDEO_RATE_SMALL");

	return v != NULL && strcmp(v, "1") == 0;
}

/* vg_rate_warm decodes the first packets of r's file on st and flushes
 * (the stream's decoder is made, as a camera's is before it counts), out
 * of the measurement. */
static void vg_rate_warm(vg_rate *r, fprep_stream *st, const vg_out *out)
{
	fprep_result res;

	for (unsigned k = 0; k <= r->f->n && k <= 8 && !r->failed; k++) {
		int last = k == r->f->n || k == 8;
		int rv;

		memset(&res, 0, sizeof(res));
		vg_set_output(st, out, last ? VG_FLUSH : 0);
		rv = last ? fprep_stream_flush(st, &res)
		          : fprep_stream_send(st, r->f->data + r->f->start[k],
		                              r->f->start[k + 1] -
		                                      r->f->start[k],
		                              (int64_t)k, &res);
		if (rv != 0 || res.header.status != FPREP_OK)
			r->failed = 1;
		fprep_result_fini(&res);
	}
}

static void *vg_rate_main(void *arg)
{
	vg_rate *r = arg;
	fprep_client *c = NULL;
	fprep_stream *st = NULL;
	fprep_request spec;
	fprep_result res;

	vg_out out = {0};
	int where = vg_rate_out();
	size_t one;

	vg_spec(&spec, r->f->codec, vg_rate_small());
	/* The spec's tensor: 3 channels of U8 or F32. */
	one = (size_t)spec.out_width * spec.out_height * 3 *
	      (spec.dtype == FPREP_DTYPE_U8 ? 1 : 4);
	REQUIRE(spec.dtype == FPREP_DTYPE_U8 || spec.dtype == FPREP_DTYPE_F32);
	if (fprep_client_open(&c, r->url, 60000) != 0 ||
	    (where > 0 &&
	     vg_out_open(c, &out, where == 2, one, r->window, 3, 8) != 0) ||
	    fprep_stream_open(c, &spec, NULL, 0, &st) != 0) {
		r->failed = 1;
		pthread_barrier_wait(r->warm);
		pthread_barrier_wait(r->go);
		vg_out_close(&out);
		fprep_client_close(c);
		return NULL;
	}
	r->out = &out;
	vg_rate_warm(r, st, &out);
	pthread_barrier_wait(r->warm);
	pthread_barrier_wait(r->go);
	while (r->window > 1 && vg_now_ns() < r->until_ns && !r->failed)
		vg_rate_window(r, st);
	while (r->window <= 1 && vg_now_ns() < r->until_ns && !r->failed)
		for (unsigned k = 0; k <= r->f->n; k++) {
			uint64_t t0 = vg_now_ns();
			int rv;

			memset(&res, 0, sizeof(res));
			vg_set_output(st, &out, k < r->f->n ? 0 : VG_FLUSH);
			rv = k < r->f->n
			             ? fprep_stream_send(
			                       st, r->f->data + r->f->start[k],
			                       r->f->start[k + 1] -
			                               r->f->start[k],
			                       (int64_t)k, &res)
			             : fprep_stream_flush(st, &res);
			if (rv != 0 || res.header.status != FPREP_OK) {
				r->failed = 1;
				fprep_result_fini(&res);
				break;
			}
			if (res.header.shape[0] > 0) {
				if (r->nlat == r->cap) {
					r->cap = r->cap ? 2 * r->cap : 4096;
					r->lat_ns = realloc(
					        r->lat_ns,
					        r->cap * sizeof(*r->lat_ns));
				}
				if (r->lat_ns != NULL)
					r->lat_ns[r->nlat++] = vg_now_ns() - t0;
			}
			r->frames += res.header.shape[0];
			fprep_result_fini(&res);
		}
	fprep_stream_close(st);
	r->out = NULL;
	vg_out_close(&out);
	fprep_client_close(c);
	return NULL;
}

static int vg_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void vg_rate_run(const char *url, const char *dir, unsigned n,
                        double seconds, unsigned window, const char *codec)
{
	char path[4096];
	vg_file f;
	vg_rate *r = calloc(n, sizeof(*r));
	pthread_t *th = calloc(n, sizeof(*th));
	pthread_barrier_t warm, go;
	uint64_t t0, *all;
	size_t nall = 0;
	unsigned long frames = 0;

	REQUIRE(r != NULL && th != NULL);
	REQUIRE(vg_rate_out() >= 0); /* inline, shm or cuda */
	snprintf(path, sizeof(path), "%s/rate.%s", dir, codec);
	REQUIRE(vg_load(&f, path,
	                strcmp(codec, "hevc") == 0 ? FPREP_PIX_HEVC
	                                           : FPREP_PIX_H264) == 0);
	REQUIRE(pthread_barrier_init(&warm, NULL, n + 1) == 0 &&
	        pthread_barrier_init(&go, NULL, n + 1) == 0);
	for (unsigned i = 0; i < n; i++) {
		r[i].url = url;
		r[i].f = &f;
		r[i].window = window;
		r[i].warm = &warm;
		r[i].go = &go;
		REQUIRE(pthread_create(&th[i], NULL, vg_rate_main, &r[i]) == 0);
	}
	pthread_barrier_wait(&warm); /* every stream's decoder made */
	t0 = vg_now_ns();
	for (unsigned i = 0; i < n; i++)
		r[i].until_ns = t0 + (uint64_t)(seconds * 1e9);
	pthread_barrier_wait(&go);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		CHECK(!r[i].failed, "rate stream %u failed\n", i);
		frames += r[i].frames;
		nall += r[i].nlat;
	}
	double s = (double)(vg_now_ns() - t0) / 1e9;
	all = malloc((nall ? nall : 1) * sizeof(*all));
	REQUIRE(all != NULL);
	nall = 0;
	for (unsigned i = 0; i < n; i++) {
		if (r[i].lat_ns != NULL)
			memcpy(all + nall, r[i].lat_ns,
			       r[i].nlat * sizeof(*all));
		nall += r[i].nlat;
		free(r[i].lat_ns);
	}
	qsort(all, nall, sizeof(*all), vg_cmp_u64);
	printf("rate: %u streams of %s (%u packets), %u in flight each, "
	       "%s into %s: %.1f frames/s over %.1f s; reply latency p50 "
	       "%.2f ms, p99 %.2f ms\n",
	       n, path, f.n, window,
	       vg_rate_small() ? "64x64 u8" : "640x640 f32",
	       vg_rate_out_names[vg_rate_out()], (double)frames / s, s,
	       nall ? (double)all[nall / 2] / 1e6 : 0.0,
	       nall ? (double)all[nall * 99 / 100] / 1e6 : 0.0);
	CHECK(frames > 0, "no frames\n");
	free(all);
	free(r);
	free(th);
	pthread_barrier_destroy(&warm);
	pthread_barrier_destroy(&go);
	free(f.data);
}

int main(int argc, char **argv)
{
	char names[16][64], path[4096], sock[256], url[300];
	uint16_t codecs[16];
	const char *mode = argc > 1 ? argv[1] : "";
	const char *device = argc > 2 ? argv[2] : "cpu";
	char *extra[] = {"--max-stream-frames", "64", "--max-inflight", "256",
	                 NULL};
	int ndev = 0, record = strcmp(mode, "record") == 0;
	int rate = strcmp(mode, "rate") == 0, off = strcmp(mode, "off") == 0;
	unsigned n;
	fprep_client *c;
	pid_t pid;

	if (strcmp(mode, "probe") == 0 && argc == 3)
		return strcmp(device, "cpu") != 0 &&
		                       (cudaGetDeviceCount(&ndev) !=
		                                cudaSuccess ||
		                        ndev == 0)
		               ? 77
		               : 0;
	if (!(record || rate || off || strcmp(mode, "check") == 0) ||
	    (rate ? argc < 7 || argc > 9 : argc != (off ? 4 : 5))) {
		fprintf(stderr,
		        "usage: test_video_gpu record|check DEVICE FRAMEPREPD "
		        "DIR\n       test_video_gpu rate DEVICE FRAMEPREPD DIR "
		        "N SECONDS [WINDOW [CODEC]]\n       test_video_gpu off "
		        "DEVICE "
		        "FRAMEPREPD\n");
		return 2;
	}
	if (strcmp(device, "cpu") != 0 &&
	    (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)) {
		printf("test_video_gpu: SKIP (no GPU)\n");
		return 77;
	}
	daemon_socket(sock, sizeof(sock), url, sizeof(url), "video");
	if (off)
		setenv("FPREP_NVDEC", "off", 1);
	pid = daemon_start(argv[3], device, url, extra);
	c = daemon_client(url);
	if (off) {
		vg_off(c, url);
		goto done;
	}
	if (rate) {
		unsigned w = argc >= 8 ? (unsigned)atoi(argv[7]) : 1;

		vg_rate_run(url, argv[4], (unsigned)atoi(argv[5]),
		            atof(argv[6]),
		            w < 1               ? 1
		            : w > VG_MAX_WINDOW ? VG_MAX_WINDOW
		                                : w,
		            argc == 9 ? argv[8] : "h264");
		goto done;
	}
	n = vg_manifest(argv[4], names, codecs, 16);
	CHECK(n > 0, "no streams in %s/streams.txt\n", argv[4]);
	for (unsigned i = 0; i < n; i++) {
		vg_file f;
		vg_frames got = {0}, ref;

		snprintf(path, sizeof(path), "%s/%s.%s", argv[4], names[i],
		         codecs[i] == FPREP_PIX_HEVC ? "hevc" : "h264");
		if (vg_load(&f, path, codecs[i]) != 0) {
			CHECK(0, "%s: cannot read or split\n", path);
			continue;
		}
		vg_decode(c, &f, &got, UINT32_MAX, NULL, 0, names[i], 1, NULL);
		CHECK(got.errors == 0 && got.n > 0,
		      "%s: %u errors, %u frames\n", names[i], got.errors,
		      got.n);
		snprintf(path, sizeof(path), "%s/%s.ref", argv[4], names[i]);
		if (record) {
			vg_ref_write(path, &got);
			printf("%s: %u packets, %u frames recorded\n", names[i],
			       f.n, got.n);
		} else if (vg_ref_read(path, &ref) != 0) {
			CHECK(0, "%s: no reference\n", path);
		} else {
			vg_compare(&got, &ref, names[i], f.n, 1);
			vg_frames_free(&got);
			memset(&got, 0, sizeof(got));
			vg_decode(c, &f, &got, UINT32_MAX, NULL, 0, names[i],
			          VG_WINDOW, NULL);
			vg_compare(&got, &ref, names[i], f.n, VG_WINDOW);
			vg_regions(c, &f, &ref, names[i], device);
			if (i == 0) {
				vg_errors(c, &f, &ref, names[i], 1);
				vg_errors(c, &f, &ref, names[i], VG_WINDOW);
				vg_region_errors(c, &f, names[i]);
			}
			vg_frames_free(&ref);
		}
		vg_frames_free(&got);
		free(f.data);
	}
	vg_info(c, device);
done:
	fprep_client_close(c);
	CHECK(daemon_stop(pid) == 0, "daemon exit status\n");
	printf("test_video_gpu %s: %s (%d checks, %d failures)\n", mode,
	       check_failures ? "FAIL" : "PASS", check_count, check_failures);
	return check_failures ? 1 : 0;
}
