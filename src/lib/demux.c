/*
 * demux.c: a file's H.264 or HEVC video as Annex-B access units
 * (frameprep/demux.h), read by libavformat and put into Annex-B by
 * libavcodec's mp4toannexb bitstream filters; the one demuxer of the
 * CLI (`frameprep video`), the bench and the Python package.
 *
 * The library does not link FFmpeg (with its encoders it outweighs the
 * rest of a bundle): the first open loads libavutil, libavcodec and
 * libavformat with dlopen (demux_load, once per process), the sonames of
 * the headers built against, else the unversioned names, into one table
 * of the functions used (dmx_av), typed from the headers; a library of
 * another major version is refused, since its structures differ. The
 * libraries stay loaded until the process exits.
 */
#include <dlfcn.h>
#include <libavcodec/avcodec.h>
#include <libavcodec/bsf.h>
#include <libavformat/avformat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "frameprep/demux.h"
#include "frameprep/frameprep.h"

/* The functions used, by library: the first of each checks its version. */
#define DMX_AVUTIL_FUNCS(X)                                                    \
	X(avutil_version)                                                      \
	X(av_log_set_level)
#define DMX_AVCODEC_FUNCS(X)                                                   \
	X(avcodec_version)                                                     \
	X(av_bsf_alloc)                                                        \
	X(av_bsf_free)                                                         \
	X(av_bsf_get_by_name)                                                  \
	X(av_bsf_init)                                                         \
	X(av_bsf_send_packet)                                                  \
	X(av_bsf_receive_packet)                                               \
	X(avcodec_parameters_copy)                                             \
	X(av_packet_alloc)                                                     \
	X(av_packet_free)                                                      \
	X(av_packet_unref)
#define DMX_AVFORMAT_FUNCS(X)                                                  \
	X(avformat_version)                                                    \
	X(avformat_open_input)                                                 \
	X(avformat_find_stream_info)                                           \
	X(av_find_best_stream)                                                 \
	X(av_read_frame)                                                       \
	X(avformat_close_input)

static struct {
#define DMX_FIELD(f) __typeof__(f) *f;
	DMX_AVUTIL_FUNCS(DMX_FIELD)
	DMX_AVCODEC_FUNCS(DMX_FIELD)
	DMX_AVFORMAT_FUNCS(DMX_FIELD)
#undef DMX_FIELD
} dmx_av;

static pthread_once_t dmx_once = PTHREAD_ONCE_INIT;
static int dmx_loaded;         /* 1 when every function was found */
static char dmx_load_why[512]; /* why not, else "" */
static _Thread_local char dmx_open_why[512];

struct fprep_demux {
	AVFormatContext *fmt;
	AVBSFContext *bsf;
	AVPacket *pkt; /* the packet last handed out */
	int index;     /* the video stream's */
	int eof;       /* the file is read: the filter is being drained */
	int64_t n;     /* access units handed out */
	char why[512];
};

/* dmx_open_lib dlopens "lib<name>.so.<major>", else "lib<name>.so", and
 * checks its major version with its version function (*version, looked
 * up here); NULL with dmx_load_why written. */
static void *dmx_open_lib(const char *name, unsigned major,
                          const char *version_fn, unsigned (**version)(void))
{
	char soname[64], plain[64], why[256];
	const char *opened = soname;
	void *h;

	snprintf(soname, sizeof(soname), "lib%s.so.%u", name, major);
	snprintf(plain, sizeof(plain), "lib%s.so", name);
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(why, sizeof(why), "%s", dlerror());
		h = dlopen(plain, RTLD_NOW | RTLD_LOCAL);
		opened = plain;
	}
	if (h == NULL) {
		fprep__fail(dmx_load_why, sizeof(dmx_load_why), 0,
		            "needs %s (FFmpeg's lib%s, e.g. Debian's package "
		            "lib%s%u): %s",
		            soname, name, name, major, why);
		return NULL;
	}
	if ((*(void **)version = dlsym(h, version_fn)) == NULL ||
	    AV_VERSION_MAJOR((*version)()) != major) {
		fprep__fail(dmx_load_why, sizeof(dmx_load_why), 0,
		            "%s is not lib%s major version %u, which this "
		            "frameprep was built for",
		            opened, name, major);
		dlclose(h);
		return NULL;
	}
	return h;
}

/* dmx_load loads the three libraries and looks every function up (once:
 * pthread_once); sets dmx_loaded, else dmx_load_why. */
static void dmx_load(void)
{
	void *util, *codec = NULL, *format = NULL;

	util = dmx_open_lib("avutil", LIBAVUTIL_VERSION_MAJOR, "avutil_version",
	                    &dmx_av.avutil_version);
	if (util != NULL)
		codec = dmx_open_lib("avcodec", LIBAVCODEC_VERSION_MAJOR,
		                     "avcodec_version",
		                     &dmx_av.avcodec_version);
	if (codec != NULL)
		format = dmx_open_lib("avformat", LIBAVFORMAT_VERSION_MAJOR,
		                      "avformat_version",
		                      &dmx_av.avformat_version);
	if (format == NULL)
		goto fail;
#define DMX_LOOKUP(lib, name)                                                  \
	if ((*(void **)&dmx_av.name = dlsym(lib, #name)) == NULL) {            \
		fprep__fail(dmx_load_why, sizeof(dmx_load_why), 0,             \
		            "libav%s has no %s", #lib, #name);                 \
		goto fail;                                                     \
	}
#define DMX_LOOKUP_UTIL(f)   DMX_LOOKUP(util, f)
#define DMX_LOOKUP_CODEC(f)  DMX_LOOKUP(codec, f)
#define DMX_LOOKUP_FORMAT(f) DMX_LOOKUP(format, f)
	DMX_AVUTIL_FUNCS(DMX_LOOKUP_UTIL)
	DMX_AVCODEC_FUNCS(DMX_LOOKUP_CODEC)
	DMX_AVFORMAT_FUNCS(DMX_LOOKUP_FORMAT)
#undef DMX_LOOKUP_FORMAT
#undef DMX_LOOKUP_CODEC
#undef DMX_LOOKUP_UTIL
#undef DMX_LOOKUP
	dmx_av.av_log_set_level(AV_LOG_ERROR);
	dmx_loaded = 1;
	return;
fail:
	if (format != NULL)
		dlclose(format);
	if (codec != NULL)
		dlclose(codec);
	if (util != NULL)
		dlclose(util);
}

/* dmx_info fills *info from the video stream vs. */
static void dmx_info(const AVStream *vs, fprep_demux_info *info)
{
	memset(info, 0, sizeof(*info));
	info->codec = vs->codecpar->codec_id == AV_CODEC_ID_H264
	                      ? FPREP_PIX_H264
	                      : FPREP_PIX_HEVC;
	info->width = (uint32_t)vs->codecpar->width;
	info->height = (uint32_t)vs->codecpar->height;
	info->frames = vs->nb_frames > 0 ? vs->nb_frames : 0;
	info->fps_num = vs->avg_frame_rate.num > 0 ? vs->avg_frame_rate.num
	                                           : vs->r_frame_rate.num;
	info->fps_den = vs->avg_frame_rate.num > 0 ? vs->avg_frame_rate.den
	                                           : vs->r_frame_rate.den;
	if (info->fps_num <= 0 || info->fps_den <= 0)
		info->fps_num = 0, info->fps_den = 1;
	info->time_base_num = vs->time_base.num;
	info->time_base_den = vs->time_base.den;
}

/* dmx_start opens the file and the filter of its video stream into d;
 * returns 0 or the error with d->why written. */
static int dmx_start(fprep_demux *d, const char *path)
{
	const AVStream *vs;
	const char *filter;

	if (dmx_av.avformat_open_input(&d->fmt, path, NULL, NULL) < 0 ||
	    dmx_av.avformat_find_stream_info(d->fmt, NULL) < 0)
		return fprep__fail(d->why, sizeof(d->why), FPREP_EIO,
		                   "%s: cannot read", path);
	d->index = dmx_av.av_find_best_stream(d->fmt, AVMEDIA_TYPE_VIDEO, -1,
	                                      -1, NULL, 0);
	if (d->index < 0 ||
	    (d->fmt->streams[d->index]->codecpar->codec_id !=
	             AV_CODEC_ID_H264 &&
	     d->fmt->streams[d->index]->codecpar->codec_id != AV_CODEC_ID_HEVC))
		return fprep__fail(d->why, sizeof(d->why), FPREP_EINVAL,
		                   "%s: no H.264 or HEVC video stream", path);
	vs = d->fmt->streams[d->index];
	filter = vs->codecpar->codec_id == AV_CODEC_ID_H264
	                 ? "h264_mp4toannexb"
	                 : "hevc_mp4toannexb";
	if ((d->pkt = dmx_av.av_packet_alloc()) == NULL)
		return fprep__fail(d->why, sizeof(d->why), FPREP_ENOMEM,
		                   "no memory for a packet");
	if (dmx_av.av_bsf_alloc(dmx_av.av_bsf_get_by_name(filter), &d->bsf) <
	            0 ||
	    dmx_av.avcodec_parameters_copy(d->bsf->par_in, vs->codecpar) < 0 ||
	    dmx_av.av_bsf_init(d->bsf) < 0)
		return fprep__fail(d->why, sizeof(d->why), FPREP_EIO,
		                   "%s: cannot start libavcodec's %s", path,
		                   filter);
	return 0;
}

int fprep_demux_open(const char *path, fprep_demux **dp, fprep_demux_info *info)
{
	fprep_demux *d;
	int err;

	dmx_open_why[0] = '\0';
	(void)pthread_once(&dmx_once, dmx_load);
	if (!dmx_loaded)
		return fprep__fail(dmx_open_why, sizeof(dmx_open_why),
		                   FPREP_EUNSUPPORTED, "%s", dmx_load_why);
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return fprep__fail(dmx_open_why, sizeof(dmx_open_why),
		                   FPREP_ENOMEM, "no memory for a demuxer");
	err = dmx_start(d, path);
	if (err) {
		snprintf(dmx_open_why, sizeof(dmx_open_why), "%s", d->why);
		fprep_demux_close(d);
		return err;
	}
	if (info != NULL)
		dmx_info(d->fmt->streams[d->index], info);
	*dp = d;
	return 0;
}

int fprep_demux_read(fprep_demux *d, const uint8_t **data, size_t *size,
                     int64_t *pts)
{
	int rv;

	dmx_av.av_packet_unref(d->pkt);
	d->why[0] = '\0';
	for (;;) {
		rv = dmx_av.av_bsf_receive_packet(d->bsf, d->pkt);
		if (rv == 0) {
			*data = d->pkt->data;
			*size = (size_t)d->pkt->size;
			*pts = d->pkt->pts != AV_NOPTS_VALUE ? d->pkt->pts
			                                     : d->n;
			d->n++;
			return 0;
		}
		if (rv != AVERROR(EAGAIN) || d->eof)
			return 1; /* AVERROR_EOF: the filter is drained */
		/* Any failure to read ends the file, as for ffmpeg. */
		if (dmx_av.av_read_frame(d->fmt, d->pkt) < 0) {
			d->eof = 1;
			rv = dmx_av.av_bsf_send_packet(d->bsf, NULL);
		} else if (d->pkt->stream_index != d->index) {
			dmx_av.av_packet_unref(d->pkt);
			continue;
		} else {
			rv = dmx_av.av_bsf_send_packet(d->bsf, d->pkt);
		}
		if (rv < 0) {
			dmx_av.av_packet_unref(d->pkt);
			return fprep__fail(
			        d->why, sizeof(d->why), FPREP_EIO,
			        "libavcodec's Annex-B filter refused "
			        "packet %lld",
			        (long long)d->n);
		}
	}
}

const char *fprep_demux_last_error(const fprep_demux *d)
{
	return d != NULL ? d->why : dmx_open_why;
}

void fprep_demux_close(fprep_demux *d)
{
	if (d == NULL)
		return;
	if (d->bsf != NULL)
		dmx_av.av_bsf_free(&d->bsf);
	if (d->pkt != NULL)
		dmx_av.av_packet_free(&d->pkt);
	if (d->fmt != NULL)
		dmx_av.avformat_close_input(&d->fmt);
	free(d);
}
