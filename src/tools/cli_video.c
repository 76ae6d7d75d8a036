/*
 * cli_video.c: `frameprep video FILE`: reads an H.264 or HEVC file (.mp4,
 * .mkv, raw .h264/.hevc) as Annex-B access units with the library's
 * demuxer (frameprep/demux.h: libavformat, loaded at run time), sends them
 * on one stream (fprep_stream_*), flushes at the end, and prints one line
 * per tensor; -o writes every tensor, stacked as (N, C, H, W) or (N, H, W,
 * C), into one .npy file. Without FFmpeg's libraries it says which one and
 * exits VID_EXIT_NOLIB.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <frameprep/demux.h>
#include <frameprep/frameprep.h>

#include "cli_video.h"
#include "npy.h"
#include "tool_options.h"

enum {
	VID_EXIT_SERVER = 1,
	VID_EXIT_USAGE = 2,
	VID_EXIT_IO = 3,
	VID_EXIT_NOLIB = 4, /* libavformat, libavcodec or libavutil missing */
	VID_EXIT_BITSTREAM = 5, /* only EBITSTREAM refusals: a broken file */
};

static const struct option vid_options[] = {
        TOOL_PREPROCESS_OPTIONS,
        TOOL_CONNECT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

struct vid_spec {
	struct tool_preprocess pre;
	struct tool_connect conn;
};

/* vid_run: one file's demuxing and its stream. */
struct vid_run {
	const struct vid_spec *spec;
	fprep_client *client;
	fprep_stream *stream;
	uint8_t *tensors; /* -o: every tensor so far */
	size_t tensors_size;
	uint32_t shape[4]; /* one tensor's, shape[0] counting them */
	uint8_t dtype;
	uint64_t frames;
	int refused; /* the exit status of the refusals so far, or 0 */
};

static void vid_usage(FILE *f)
{
	fprintf(f,
	        "usage: frameprep video FILE [options]\n"
	        "\n"
	        "Sends an H.264 or HEVC file (.mp4, .mkv, .h264, .hevc) to "
	        "the daemon as a\nstream and prints one line per tensor "
	        "(display order, with its pts).\n"
	        "\noptions (default in brackets):\n"
	        "  --socket URL      daemon URL [$FRAMEPREP_SOCKET, else "
	        "ipc://$XDG_RUNTIME_DIR/frameprep.sock,\n"
	        "                    else ipc:///tmp/frameprep-$UID.sock]\n"
	        "  --trust-socket-owner USER\n"
	        "                    dial an ipc:// socket owned by USER too\n"
	        "  -o, --output FILE save every tensor, stacked (N, C, H, "
	        "W), as .npy [not saved]\n"
	        "  --timeout MS      bounds the connect and each request, "
	        "milliseconds [30000]\n");
	tool_preprocess_usage(f, 2, 20);
	fprintf(f, "  -h, --help        this text\n"
	           "exit status: 0 ok, 1 a packet or the stream refused by "
	           "the daemon, 2 usage, 3 transport/IO error,\n"
	           "4 libavformat, libavcodec or libavutil missing, 5 broken "
	           "bitstream (every refusal\nEBITSTREAM: the frames after "
	           "each broken packet's next IDR/IRAP came)\n");
}

/* vid_exit_status: the exit status of a call's error: the client's own
 * (transport, timeout, a closed or forked client) are VID_EXIT_IO, a broken
 * bitstream VID_EXIT_BITSTREAM, the daemon's other verdicts (EUNSUPPORTED
 * included) VID_EXIT_SERVER. */
static int vid_exit_status(int err)
{
	switch (err) {
	case FPREP_ETRANSPORT:
	case FPREP_ETIMEDOUT:
	case FPREP_ECLOSED:
	case FPREP_EMISMATCH:
	case FPREP_EFORKED:
		return VID_EXIT_IO;
	case FPREP_EBITSTREAM:
		return VID_EXIT_BITSTREAM;
	default:
		return VID_EXIT_SERVER;
	}
}

/* vid_frames prints (and keeps, with -o) the frames of a reply; returns
 * an exit status. */
static int vid_frames(struct vid_run *r, const fprep_result *res)
{
	const fprep_reply_header *h = &res->header;
	fprep_stream_frame f;
	const void *tensor;
	uint64_t one;
	uint8_t *all;

	if (h->status != FPREP_OK) {
		printf("error     %s: %s\n", fprep_err_name((int)h->status),
		       h->message);
		if (r->refused != VID_EXIT_SERVER)
			r->refused = vid_exit_status((int)h->status);
		return 0;
	}
	for (uint32_t k = 0; k < h->shape[0]; k++) {
		if (fprep_stream_recv(res, k, &f, &tensor) != 0) {
			fprintf(stderr, "frameprep video: malformed reply\n");
			return VID_EXIT_IO;
		}
		one = h->tensor_size / h->shape[0];
		printf("frame %" PRIu64 " pts %" PRId64 " %" PRIu32 "x%" PRIu32
		       " tensor (%" PRIu32 ", %" PRIu32 ", %" PRIu32
		       ") scale %.6g %.6g pad %g %g\n",
		       r->frames, f.pts, f.width, f.height, h->shape[1],
		       h->shape[2], h->shape[3], (double)f.scale_x,
		       (double)f.scale_y, (double)f.pad_x, (double)f.pad_y);
		r->frames++;
		if (r->spec->conn.out == NULL)
			continue;
		all = realloc(r->tensors, r->tensors_size + one);
		if (all == NULL) {
			fprintf(stderr, "frameprep video: out of memory\n");
			return VID_EXIT_IO;
		}
		memcpy(all + r->tensors_size, tensor, one);
		r->tensors = all;
		r->tensors_size += one;
		memcpy(r->shape + 1, h->shape + 1, 3 * sizeof(uint32_t));
		r->shape[0]++;
		r->dtype = h->dtype;
	}
	return 0;
}

/* vid_send sends one packet (or, data NULL, the flush); returns an exit
 * status. */
static int vid_send(struct vid_run *r, const uint8_t *data, size_t size,
                    int64_t pts)
{
	fprep_result res;
	int err, ret;

	err = data != NULL ? fprep_stream_send(r->stream, data, size, pts, &res)
	                   : fprep_stream_flush(r->stream, &res);
	if (err) {
		fprintf(stderr, "frameprep video: %s: %s\n",
		        fprep_err_name(err),
		        fprep_client_last_error(r->client));
		return VID_EXIT_IO;
	}
	ret = vid_frames(r, &res);
	fprep_result_fini(&res);
	return ret;
}

/* vid_demux reads the file's access units and sends them; returns an
 * exit status. */
static int vid_demux(struct vid_run *r, fprep_demux *dmx)
{
	const uint8_t *data;
	size_t size;
	int64_t pts;
	int ret = 0, rv;

	while (ret == 0 &&
	       (rv = fprep_demux_read(dmx, &data, &size, &pts)) == 0)
		ret = vid_send(r, data, size, pts);
	if (ret == 0 && rv != 1) {
		fprintf(stderr, "frameprep video: %s\n",
		        fprep_demux_last_error(dmx));
		ret = VID_EXIT_IO;
	}
	if (ret == 0)
		ret = vid_send(r, NULL, 0, 0);
	return ret;
}

/* vid_save writes the kept tensors as one .npy file. */
static int vid_save(const struct vid_run *r)
{
	if (r->shape[0] == 0) {
		fprintf(stderr, "frameprep video: no frame to save\n");
		return VID_EXIT_IO;
	}
	if (fprep_npy_write(r->spec->conn.out, fprep_dtype_typestr(r->dtype),
	                    r->shape, 4, r->tensors, r->tensors_size) != 0) {
		fprintf(stderr, "frameprep video: writing %s: %s\n",
		        r->spec->conn.out, strerror(errno));
		return VID_EXIT_IO;
	}
	printf("wrote     %s\n", r->spec->conn.out);
	return 0;
}

/* vid_file sends the file at path; returns an exit status. */
static int vid_file(const struct vid_spec *spec, const char *path)
{
	fprep_demux *dmx = NULL;
	fprep_demux_info info;
	struct vid_run r = {.spec = spec};
	fprep_request req;
	int err, ret;

	err = fprep_demux_open(path, &dmx, &info);
	if (err) {
		fprintf(stderr, "frameprep video: %s\n",
		        fprep_demux_last_error(NULL));
		return err == FPREP_EUNSUPPORTED ? VID_EXIT_NOLIB : VID_EXIT_IO;
	}
	fprep_stream_request_init(&req, info.codec);
	tool_preprocess_apply(&spec->pre, &req);
	err = fprep_client_open_trusting(&r.client, spec->conn.url,
	                                 spec->conn.timeout_ms,
	                                 spec->conn.trust_owner);
	if (err) {
		fprintf(stderr, "frameprep video: %s: %s\n",
		        fprep_err_name(err), fprep_client_last_error(NULL));
		ret = VID_EXIT_IO;
		goto out;
	}
	err = fprep_stream_open(r.client, &req, NULL, 0, &r.stream);
	if (err) {
		fprintf(stderr, "frameprep video: %s: %s\n",
		        fprep_err_name(err), fprep_client_last_error(r.client));
		ret = vid_exit_status(err);
		goto out_client;
	}
	printf("stream    %" PRIu32 " %s %s\n", fprep_stream_id(r.stream),
	       info.codec == FPREP_PIX_H264 ? "H.264" : "HEVC", path);
	ret = vid_demux(&r, dmx);
	(void)fprep_stream_close(r.stream);
	if (ret == 0 && spec->conn.out != NULL)
		ret = vid_save(&r);
	if (ret == 0)
		ret = r.refused;
out_client:
	fprep_client_close(r.client);
out:
	free(r.tensors);
	fprep_demux_close(dmx);
	return ret;
}

int tool_video_main(int argc, char **argv)
{
	struct vid_spec spec;
	int first;

	memset(&spec, 0, sizeof(spec));
	spec.conn.timeout_ms = 30000;
	first = tool_cli_parse("video", argc, argv, vid_options, &spec.conn,
	                       &spec.pre, NULL, NULL);
	if (first == -2) {
		vid_usage(stdout);
		return 0;
	}
	if (first < 0 || argc - first != 1) {
		vid_usage(stderr);
		return VID_EXIT_USAGE;
	}
	return vid_file(&spec, argv[first]);
}
