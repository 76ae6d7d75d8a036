/*
 * frameprep: the one-shot command-line client of frameprepd.
 *
 * `frameprep send` decodes an image (PNG, JPEG, BMP, ... through
 * stb_image), sends it as one FRAME (or ECHO) request, prints what came
 * back and can save the tensor as a .npy file. `info` prints the daemon's
 * description; `request` and `reply` write a raw wire request and read a
 * raw wire reply, so that an independent client such as nngcat can carry
 * the bytes. It uses only the public API of libframeprep, like any other
 * application would.
 *
 * Exit status: 0 success, 1 the server answered with an error status or
 * the frame is over its limits, 2 usage error, 3 transport, protocol or
 * file error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <frameprep/frameprep.h>
#include <stb/stb_image.h>

#include "cli_elements.h"
#include "cli_video.h"
#include "npy.h"
#include "tool_options.h"
#include "tool_yuv.h"

enum { EXIT_SERVER = 1, EXIT_USAGE = 2, EXIT_IO = 3 };

/* cli_spec: what the user asked for, before it becomes a request. */
struct cli_spec {
	const char *cmd; /* the command: send, request, info, reply */
	struct tool_preprocess pre;
	uint16_t format; /* a YUV format to convert the image to, JPEG (send
	                    the file as it is), or 0 */
	struct tool_connect conn;
	int echo;
	int shm;
	int health; /* info --health */
};

static const char *cli_kind_name(uint16_t kind)
{
	switch (kind) {
	case FPREP_KIND_FRAME:
		return "FRAME";
	case FPREP_KIND_INFO:
		return "INFO";
	case FPREP_KIND_ECHO:
		return "ECHO";
	case FPREP_KIND_REGISTER:
		return "REGISTER";
	case FPREP_KIND_UNREGISTER:
		return "UNREGISTER";
	}
	return "?";
}

static void cli_usage(FILE *f, const char *cmd)
{
	int all = cmd == NULL;

	if (all)
		fprintf(f,
		        "usage: frameprep COMMAND [options]\n"
		        "\n"
		        "commands:\n"
		        "  send IMAGE        send an image, print the tensor, "
		        "optionally save it\n"
		        "  crops IMAGE --boxes BOXES.json  boxes of an image "
		        "into one (N, C, H, W) tensor\n"
		        "  batch IMAGE...    images of one size into one "
		        "(N, C, H, W) tensor\n"
		        "  video FILE        send an H.264/HEVC file as a "
		        "stream, "
		        "print a line per tensor\n"
		        "  info              print what the daemon runs\n"
		        "  request IMAGE -o REQ.bin  write the raw wire "
		        "request "
		        "to a file\n"
		        "  reply REPLY.bin   decode a raw wire reply file\n"
		        "\n"
		        "`frameprep COMMAND --help` lists the command's "
		        "options.\n"
		        "exit status: 0 ok, 1 refused by the daemon or its "
		        "limits, 2 usage, 3 "
		        "transport/IO error\n");
	if (!all && strcmp(cmd, "info") == 0)
		fprintf(f, "usage: frameprep info [--socket URL] [options]\n");
	if (!all && strcmp(cmd, "reply") == 0)
		fprintf(f, "usage: frameprep reply REPLY.bin [-o OUT.npy]\n");
	if (!all && strcmp(cmd, "send") == 0)
		fprintf(f, "usage: frameprep send IMAGE [options]\n");
	if (!all && strcmp(cmd, "request") == 0)
		fprintf(f, "usage: frameprep request IMAGE -o REQ.bin "
		           "[options]\n");
	if (all)
		return;
	fprintf(f, "\noptions (default in brackets):\n");
	if (strcmp(cmd, "reply") != 0 && strcmp(cmd, "request") != 0)
		fprintf(f, "  --socket URL      daemon URL [$FRAMEPREP_SOCKET, "
		           "else ipc://$XDG_RUNTIME_DIR/frameprep.sock, else "
		           "ipc:///tmp/frameprep-$UID.sock]; repeat it or "
		           "give a comma list\n                    for several "
		           "daemons (no --shm then)\n"
		           "  --trust-socket-owner USER\n"
		           "                    dial an ipc:// socket owned by "
		           "USER too [only yours, root's or frameprep's;\n"
		           "                    "
		           "$FRAMEPREP_TRUST_SOCKET_OWNER likewise]\n");
	if (strcmp(cmd, "info") == 0)
		fprintf(f, "  --timeout MS      bounds the connect and the "
		           "request (send + reply), milliseconds [30000]\n"
		           "  --health          only the health lines (live, "
		           "ready, draining, health); exit\n"
		           "                    status 0 when ready, 1 when "
		           "not (draining: the daemon answers\n"
		           "                    ESHUTDOWN), 3 when it cannot "
		           "be reached\n");
	if (strcmp(cmd, "send") == 0)
		fprintf(f,
		        "  -o, --output FILE save the tensor as .npy "
		        "[not saved]\n"
		        "  --timeout MS      bounds the connect and the "
		        "request (send + reply), milliseconds [30000]\n"
		        "  --echo            measure the transport alone: "
		        "no preprocessing, tensor contents unspecified [off]\n"
		        "  --shm             pass frame and tensor through "
		        "shared memory, not the socket (ipc:// only) "
		        "[off]\n");
	if (strcmp(cmd, "request") == 0)
		fprintf(f, "  -o, --output FILE where to write the request "
		           "[required]\n"
		           "  --echo            write a transport-only request "
		           "[off]\n");
	if (strcmp(cmd, "reply") == 0)
		fprintf(f, "  -o, --output FILE save the tensor as .npy "
		           "[not saved]\n");
	if (strcmp(cmd, "send") == 0 || strcmp(cmd, "request") == 0)
		fprintf(f,
		        "  --format F        send the image converted to nv12, "
		        "i420 or yuyv (an odd\n"
		        "                    width or height loses its last "
		        "column or row), or jpeg:\n"
		        "                    the file's bytes as they are, "
		        "decoded by the daemon [rgb8]\n"
		        "  --jpeg            the same as --format jpeg\n");
	if (strcmp(cmd, "send") == 0 || strcmp(cmd, "request") == 0)
		tool_preprocess_usage(f, 2, 20);
	fprintf(f, "  -h, --help        this text\n");
}

enum {
	OPT_ECHO = TOOL_OPT_END,
	OPT_SHM,
	OPT_FORMAT,
	OPT_JPEG,
	OPT_HEALTH,
};

static const struct option cli_options[] = {
        TOOL_PREPROCESS_OPTIONS,
        TOOL_CONNECT_OPTIONS,
        {"echo", no_argument, NULL, OPT_ECHO},
        {"shm", no_argument, NULL, OPT_SHM},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"jpeg", no_argument, NULL, OPT_JPEG},
        {"health", no_argument, NULL, OPT_HEALTH},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

/* cli_allowed says which long options a command takes. */
static int cli_allowed(const char *cmd, int opt)
{
	if (opt == 'h')
		return 1;
	if (strcmp(cmd, "info") == 0)
		return opt == TOOL_OPT_SOCKET || opt == TOOL_OPT_TRUST_OWNER ||
		       opt == TOOL_OPT_TIMEOUT || opt == OPT_HEALTH;
	if (strcmp(cmd, "reply") == 0)
		return opt == 'o';
	if (strcmp(cmd, "request") == 0)
		return opt != TOOL_OPT_SOCKET && opt != TOOL_OPT_TIMEOUT &&
		       opt != OPT_SHM && opt != TOOL_OPT_TRUST_OWNER;
	return 1;
}

/* cli_own applies an option of cmd's own to the cli_spec arg, and
 * refuses one that does not apply to cmd. */
static int cli_own(void *arg, int opt, const char *value)
{
	struct cli_spec *spec = arg;

	if (!cli_allowed(spec->cmd, opt)) {
		fprintf(stderr, "frameprep %s: option --%s does not apply\n",
		        spec->cmd, tool_option_name(cli_options, opt));
		return TOOL_REFUSED;
	}
	switch (opt) {
	case OPT_ECHO:
		spec->echo = 1;
		return 0;
	case OPT_SHM:
		spec->shm = 1;
		return 0;
	case OPT_FORMAT:
		spec->format = (uint16_t)tool_lookup(TOOL_FORMAT, value);
		/* The image itself decides between RGB8 and GRAY8. */
		if (spec->format == FPREP_PIX_RGB8) {
			spec->format = 0;
			return 0;
		}
		return spec->format >= FPREP_PIX_NV12 ? 0 : -1;
	case OPT_HEALTH:
		spec->health = 1;
		return 0;
	case OPT_JPEG:
		spec->format = FPREP_PIX_JPEG;
		return 0;
	}
	return 1;
}

/* cli_image is a decoded image in a pixel format the protocol knows. */
struct cli_image {
	uint8_t *pixels; /* free with cli_image_free */
	uint32_t width, height;
	uint16_t format;
	uint64_t size; /* bytes of a YUV frame */
};

/* cli_format_name: the format of a sent frame, as the CLI prints it. */
static const char *cli_format_name(uint16_t format)
{
	static const char *const names[] = {"GRAY8", "RGB8", "NV12",
	                                    "I420",  "YUYV", "JPEG"};

	switch (format) {
	case FPREP_PIX_GRAY8:
		return names[0];
	case FPREP_PIX_NV12:
		return names[2];
	case FPREP_PIX_I420:
		return names[3];
	case FPREP_PIX_YUYV:
		return names[4];
	case FPREP_PIX_JPEG:
		return names[5];
	}
	return names[1];
}

static void cli_image_free(struct cli_image *img)
{
	if (img->format >= FPREP_PIX_NV12)
		free(img->pixels);
	else
		stbi_image_free(img->pixels);
	img->pixels = NULL;
}

/* cli_to_yuv converts a decoded RGB8 image to spec's YUV format (dropping
 * an odd last column, and for NV12 and I420 an odd last row). */
static int cli_to_yuv(const struct cli_spec *spec, struct cli_image *img)
{
	uint32_t w = img->width & ~1u, h = img->height;
	uint8_t *yuv;

	if (spec->format != FPREP_PIX_YUYV)
		h &= ~1u;
	if (w == 0 || h == 0) {
		fprintf(stderr,
		        "frameprep: a %" PRIu32 "x%" PRIu32 " image is too "
		        "small for %s (2x2 at least)\n",
		        img->width, img->height,
		        tool_name(TOOL_FORMAT, spec->format));
		return -1;
	}
	if (w != img->width || h != img->height) {
		/* Keep rows of the original width: move them together. */
		for (uint32_t y = 1; y < h; y++)
			memmove(img->pixels + (size_t)y * w * 3,
			        img->pixels + (size_t)y * img->width * 3,
			        (size_t)w * 3);
		fprintf(stderr,
		        "frameprep: note: %s needs even sizes: sending "
		        "%" PRIu32 "x%" PRIu32 " of the %" PRIu32 "x%" PRIu32
		        " image\n",
		        tool_name(TOOL_FORMAT, spec->format), w, h, img->width,
		        img->height);
	}
	yuv = tool_rgb_to_yuv(img->pixels, w, h, spec->format, spec->pre.matrix,
	                      spec->pre.range, &img->size);
	if (yuv == NULL) {
		fprintf(stderr, "frameprep: out of memory\n");
		return -1;
	}
	stbi_image_free(img->pixels);
	img->pixels = yuv;
	img->width = w;
	img->height = h;
	img->format = spec->format;
	return 0;
}

/* cli_png_size reads the width and height from a PNG file's header;
 * returns 0, or -1 when f is not a PNG. */
static int cli_png_size(FILE *f, uint32_t *w, uint32_t *h)
{
	static const uint8_t sig[8] = {0x89, 'P',  'N',  'G',
	                               '\r', '\n', 0x1a, '\n'};
	uint8_t b[24];

	if (fseek(f, 0, SEEK_SET) != 0 || fread(b, 1, 24, f) != 24 ||
	    memcmp(b, sig, 8) != 0 || memcmp(b + 12, "IHDR", 4) != 0)
		return -1;
	*w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 |
	     (uint32_t)b[18] << 8 | b[19];
	*h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 |
	     (uint32_t)b[22] << 8 | b[23];
	return 0;
}

/* cli_truncated tells whether f, whose decode failed, is a PNG, JPEG or
 * BMP file cut short: a PNG that does not end with its IEND chunk, a JPEG
 * without its EOI marker (FF D9) at the end, a BMP shorter than its
 * header's file size. Writes the format's name into *format. */
static int cli_truncated(FILE *f, const char **format)
{
	static const uint8_t png_sig[8] = {0x89, 'P',  'N',  'G',
	                                   '\r', '\n', 0x1a, '\n'};
	static const uint8_t iend[12] = {0,   0,   0,    0,    'I',  'E',
	                                 'N', 'D', 0xae, 0x42, 0x60, 0x82};
	uint8_t head[8], tail[12];
	long size;

	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0 || fread(head, 1, 8, f) != 8)
		return 0;
	if (memcmp(head, png_sig, 8) == 0) {
		*format = "PNG";
		return size < 8 + 12 || fseek(f, size - 12, SEEK_SET) != 0 ||
		       fread(tail, 1, 12, f) != 12 ||
		       memcmp(tail, iend, 12) != 0;
	}
	if (head[0] == 0xff && head[1] == 0xd8) {
		*format = "JPEG";
		return fseek(f, size - 2, SEEK_SET) != 0 ||
		       fread(tail, 1, 2, f) != 2 || tail[0] != 0xff ||
		       tail[1] != 0xd9;
	}
	if (head[0] == 'B' && head[1] == 'M') {
		*format = "BMP";
		return (long)((uint32_t)head[2] | (uint32_t)head[3] << 8 |
		              (uint32_t)head[4] << 16 |
		              (uint32_t)head[5] << 24) > size;
	}
	return 0;
}

/* cli_bmp_truncated tells whether path is a BMP file cut short (which
 * stb_image decodes anyway). */
static int cli_bmp_truncated(const char *path)
{
	const char *format = NULL;
	FILE *f = fopen(path, "rb");
	int cut;

	if (f == NULL)
		return 0;
	cut = cli_truncated(f, &format) && strcmp(format, "BMP") == 0;
	fclose(f);
	return cut;
}

/* cli_load_failed says why path could not be decoded: stb_image reports
 * only its last format's reason ("unknown image type"), which hides an
 * image too large for it. */
static void cli_load_failed(const char *path)
{
	const char *why = stbi_failure_reason();
	const char *format = NULL;
	uint32_t w, h;
	FILE *f = fopen(path, "rb");

	if (f == NULL) {
		fprintf(stderr, "frameprep: %s: %s\n", path, strerror(errno));
		return;
	}
	if (cli_png_size(f, &w, &h) == 0 && (uint64_t)w * h * 4 > (uint64_t)1
	                                                                  << 30)
		fprintf(stderr,
		        "frameprep: %s: the image is %" PRIu32 "x%" PRIu32
		        " pixels, too large to decode (at most 2^30 bytes of "
		        "pixels)\n",
		        path, w, h);
	else if (cli_truncated(f, &format))
		fprintf(stderr,
		        "frameprep: %s: the file is truncated: this %s ends "
		        "before its image does (%s)\n",
		        path, format, why != NULL ? why : "unknown reason");
	else
		fprintf(stderr, "frameprep: %s: cannot decode image: %s\n",
		        path, why != NULL ? why : "unknown reason");
	fclose(f);
}

/* cli_load_jpeg reads path's bytes as they are, to be sent as a JPEG
 * frame (its size 0x0 on the wire: the daemon reads it from the header).
 * Only the SOI marker is checked here: the daemon judges the rest. */
static int cli_load_jpeg(const char *path, struct cli_image *img)
{
	FILE *f = fopen(path, "rb");
	long size = -1;

	if (f != NULL && fseek(f, 0, SEEK_END) == 0)
		size = ftell(f);
	if (f == NULL || size < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "frameprep: %s: %s\n", path, strerror(errno));
		if (f != NULL)
			fclose(f);
		return -1;
	}
	img->pixels = malloc(size > 0 ? (size_t)size : 1);
	if (img->pixels == NULL ||
	    fread(img->pixels, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "frameprep: %s: cannot read the file\n", path);
		free(img->pixels);
		fclose(f);
		return -1;
	}
	fclose(f);
	if (size < 2 || img->pixels[0] != 0xff || img->pixels[1] != 0xd8)
		fprintf(stderr,
		        "frameprep: note: %s does not start with a JPEG SOI "
		        "marker (FF D8): sent anyway\n",
		        path);
	img->width = img->height = 0;
	img->format = FPREP_PIX_JPEG;
	img->size = (uint64_t)size;
	return 0;
}

/* cli_load decodes path as GRAY8 when the file is grayscale or a gray
 * tensor is asked for, else as RGB8, and converts it to spec's YUV format
 * when one was asked for. */
static int cli_load(const char *path, const struct cli_spec *spec,
                    struct cli_image *img)
{
	int w, h, comp, want;

	if (spec->format == FPREP_PIX_JPEG)
		return cli_load_jpeg(path, img);
	if (!stbi_info(path, &w, &h, &comp)) {
		cli_load_failed(path);
		return -1;
	}
	want = comp <= 2 || spec->pre.order == FPREP_ORDER_GRAY ? 1 : 3;
	if (spec->format != 0)
		want = 3;
	img->pixels = stbi_load(path, &w, &h, &comp, want);
	if (img->pixels == NULL) {
		cli_load_failed(path);
		return -1;
	}
	if (cli_bmp_truncated(path)) {
		/* stb_image fills a BMP's missing rows without a word. */
		fprintf(stderr,
		        "frameprep: %s: the file is truncated: this BMP is "
		        "shorter than its header says\n",
		        path);
		stbi_image_free(img->pixels);
		return -1;
	}
	img->width = (uint32_t)w;
	img->height = (uint32_t)h;
	img->format = want == 1 ? FPREP_PIX_GRAY8 : FPREP_PIX_RGB8;
	if (spec->format != 0 && cli_to_yuv(spec, img) != 0) {
		stbi_image_free(img->pixels);
		return -1;
	}
	return 0;
}

/* cli_request builds the request for an image from the user's spec. */
static void cli_request(const struct cli_spec *spec,
                        const struct cli_image *img, fprep_request *req)
{
	fprep_request_init(req, img->format, img->width, img->height);
	if (img->format == FPREP_PIX_JPEG)
		req->input_size = img->size;
	if (spec->echo)
		req->kind = FPREP_KIND_ECHO;
	tool_preprocess_apply(&spec->pre, req);
}

static uint64_t cli_fnv1a64(const void *data, size_t size)
{
	const uint8_t *p = data;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < size; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* cli_print_reply prints a reply and saves its tensor to out (if not
 * NULL); returns the exit status. */
static int cli_print_reply(const fprep_reply_header *h, const void *payload,
                           size_t payload_size, const char *out)
{
	const char *descr = fprep_dtype_typestr(h->dtype);

	printf("request   %" PRIu64 " %s\n", h->request_id,
	       cli_kind_name(h->kind));
	if (h->status != FPREP_OK) {
		printf("status    %s (%s): %s\n",
		       fprep_err_name((int)h->status),
		       fprep_strerror((int)h->status), h->message);
		fprintf(stderr, "frameprep: server error %s: %s\n",
		        fprep_err_name((int)h->status), h->message);
		return EXIT_SERVER;
	}
	printf("status    OK\n");
	printf("shape     (");
	for (int i = 0; i < h->ndim; i++)
		printf("%s%" PRIu32, i ? ", " : "", h->shape[i]);
	printf(")\n");
	printf("dtype     %s %s\n", tool_name(TOOL_DTYPE, h->dtype),
	       h->layout == FPREP_LAYOUT_NHWC ? "NHWC" : "NCHW");
	printf("transform scale %.6g x %.6g, pad %g x %g (left x top)\n",
	       (double)h->scale_x, (double)h->scale_y, (double)h->pad_x,
	       (double)h->pad_y);
	printf("timings   queue %" PRIu32 " us, compute %" PRIu32
	       " us, h2d %" PRIu32 " us, kernel %" PRIu32 " us, d2h %" PRIu32
	       " us, total %" PRIu32 " us\n",
	       h->t_queue_us, h->t_compute_us, h->t_h2d_us, h->t_kernel_us,
	       h->t_d2h_us, h->t_total_us);
	if (h->decoded_width != 0)
		printf("decoded   JPEG %ux%u in %" PRIu32 " us\n",
		       (unsigned)h->decoded_width, (unsigned)h->decoded_height,
		       h->t_decode_us);
	printf("bytes     %" PRIu64 "\n", h->tensor_size);
	if (payload_size != h->tensor_size)
		return 0; /* written to shared memory the caller can't see */
	printf("checksum  fnv1a64 %016" PRIx64 "\n",
	       cli_fnv1a64(payload, payload_size));
	if (out == NULL)
		return 0;
	if (descr == NULL || fprep_npy_write(out, descr, h->shape, h->ndim,
	                                     payload, payload_size) != 0) {
		fprintf(stderr, "frameprep: writing %s: %s\n", out,
		        descr == NULL ? "unknown dtype" : strerror(errno));
		return EXIT_IO;
	}
	printf("wrote     %s\n", out);
	return 0;
}

/* cli_client opens a client for the spec's URL; returns an exit status. */
static int cli_client(const struct cli_spec *spec, fprep_client **cp)
{
	int err = fprep_client_open_trusting(cp, spec->conn.url,
	                                     spec->conn.timeout_ms,
	                                     spec->conn.trust_owner);

	if (err) {
		fprintf(stderr, "frameprep: %s: %s%s\n", fprep_err_name(err),
		        fprep_client_last_error(NULL),
		        err == FPREP_ETRANSPORT ? " (is frameprepd running?)"
		                                : "");
		return err == FPREP_EINVAL ? EXIT_USAGE : EXIT_IO;
	}
	return 0;
}

/* cli_failed reports a failed client call; returns the exit status: a
 * frame over the daemon's limits is refused as the daemon would. */
static int cli_failed(fprep_client *c, int err)
{
	fprintf(stderr, "frameprep: %s: %s\n", fprep_err_name(err),
	        fprep_client_last_error(c));
	return err == FPREP_ELIMIT ? EXIT_SERVER : EXIT_IO;
}

/* cli_send_shm sends the request through a shared-memory region holding
 * the frame at offset 0 and the tensor after it; returns the exit status. */
static int cli_send_shm(fprep_client *c, const struct cli_spec *spec,
                        const struct cli_image *img, fprep_request *req)
{
	fprep_result res = {0};
	fprep_region *region;
	uint32_t shape[4];
	uint64_t tensor, in_off;
	uint8_t *base;
	int err, ret;

	if (fprep_tensor_shape(req, shape, &tensor) != 0) {
		fprintf(stderr, "frameprep: invalid preprocessing options\n");
		return EXIT_USAGE;
	}
	/* The tensor first: its offset is page-aligned, the frame follows. */
	in_off = (tensor + 4095) & ~(uint64_t)4095;
	if ((err = fprep_region_open(&region, c, in_off + req->input_size))) {
		/* The daemon's refusal of the REGISTER (a tcp:// connection,
		 * its region limits) is a refusal by the daemon: exit 1, as
		 * for a frame. The library words it "server: NAME: ...". */
		ret = cli_failed(c, err);
		if (strncmp(fprep_client_last_error(c), "server: ", 8) == 0)
			ret = EXIT_SERVER;
		return ret;
	}
	base = fprep_region_base(region);
	memcpy(base + in_off, img->pixels, req->input_size);
	fprep_request_set_shm(req, region, in_off, region, 0, tensor);
	if ((err = fprep_client_request(c, req, NULL, &res)) != 0) {
		ret = cli_failed(c, err);
		goto out;
	}
	ret = cli_print_reply(&res.header, base, res.header.tensor_size,
	                      spec->conn.out);
	fprep_result_fini(&res);
out:
	fprep_region_close(region);
	return ret;
}

static int cli_send(const struct cli_spec *spec, const char *path)
{
	struct cli_image img;
	fprep_client *c = NULL;
	fprep_result res = {0};
	fprep_request req;
	int err, ret;

	if (cli_load(path, spec, &img) != 0)
		return EXIT_IO;
	cli_request(spec, &img, &req);
	if ((ret = cli_client(spec, &c)) != 0)
		goto out_image;
	if (img.format == FPREP_PIX_JPEG)
		printf("source    %s JPEG %" PRIu64 " bytes, undecoded%s\n",
		       path, img.size, spec->shm ? " (shared memory)" : "");
	else
		printf("source    %s %" PRIu32 "x%" PRIu32 " %s%s\n", path,
		       img.width, img.height, cli_format_name(img.format),
		       spec->shm ? " (shared memory)" : "");
	if (spec->shm) {
		ret = cli_send_shm(c, spec, &img, &req);
		goto out_client;
	}
	if ((err = fprep_client_request(c, &req, img.pixels, &res)) != 0) {
		ret = cli_failed(c, err);
		goto out_client;
	}
	ret = cli_print_reply(&res.header, res.payload, res.payload_size,
	                      spec->conn.out);
	fprep_result_fini(&res);
out_client:
	fprep_client_close(c);
out_image:
	cli_image_free(&img);
	return ret;
}

/* cli_health prints the health lines of an INFO reply and returns the
 * exit status: 0 ready, EXIT_SERVER not ready. A draining daemon answers
 * every request, INFO too, with ESHUTDOWN: that is its health. */
static int cli_health(const fprep_result *res)
{
	static const char *const keys[] = {
	        "live: ", "ready: ", "draining: ", "health: "};
	const char *text = res->payload, *end = text + res->payload_size;
	int ready = 0, found = 0;

	if (res->header.status == FPREP_ESHUTDOWN) {
		printf("live: true\nready: false\ndraining: true\n"
		       "health: not ready: %s\n",
		       res->header.message);
		return EXIT_SERVER;
	}
	if (res->header.status != FPREP_OK) {
		fprintf(stderr, "frameprep: server error %s: %s\n",
		        fprep_err_name((int)res->header.status),
		        res->header.message);
		return EXIT_SERVER;
	}
	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t len =
		        nl != NULL ? (size_t)(nl - line) : (size_t)(end - line);

		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			size_t klen = strlen(keys[k]);

			if (len < klen || memcmp(line, keys[k], klen) != 0)
				continue;
			printf("%.*s\n", (int)len, line);
			found++;
			if (k == 1)
				ready = len == klen + 4 &&
				        memcmp(line + klen, "true", 4) == 0;
		}
		line += len + 1;
	}
	if (found == 0) {
		fprintf(stderr, "frameprep: the daemon's INFO has no health "
		                "lines (a frameprepd older than them)\n");
		return EXIT_SERVER;
	}
	return ready ? 0 : EXIT_SERVER;
}

static int cli_info(const struct cli_spec *spec)
{
	fprep_client *c = NULL;
	fprep_result res = {0};
	int err, ret;

	if ((ret = cli_client(spec, &c)) != 0)
		return ret;
	if ((err = fprep_client_info(c, &res)) != 0) {
		ret = cli_failed(c, err);
		goto out;
	}
	if (spec->health) {
		ret = cli_health(&res);
	} else if (res.header.status != FPREP_OK) {
		fprintf(stderr, "frameprep: server error %s: %s\n",
		        fprep_err_name((int)res.header.status),
		        res.header.message);
		ret = EXIT_SERVER;
	} else {
		fwrite(res.payload, 1, res.payload_size, stdout);
		if (res.payload_size > 0 &&
		    ((const char *)res.payload)[res.payload_size - 1] != '\n')
			putchar('\n');
	}
	fprep_result_fini(&res);
out:
	fprep_client_close(c);
	return ret;
}

static int cli_write_request(const struct cli_spec *spec, const char *path)
{
	uint8_t header[FPREP_REQUEST_HEADER_SIZE];
	struct cli_image img;
	fprep_request req;
	FILE *f;
	int ret = EXIT_IO;

	if (cli_load(path, spec, &img) != 0)
		return EXIT_IO;
	cli_request(spec, &img, &req);
	req.request_id = 1;
	fprep_request_encode(&req, header);
	f = fopen(spec->conn.out, "wb");
	if (f == NULL)
		goto fail;
	if (fwrite(header, 1, sizeof(header), f) != sizeof(header) ||
	    fwrite(img.pixels, 1, req.input_size, f) != req.input_size) {
		fclose(f);
		goto fail;
	}
	if (fclose(f) != 0)
		goto fail;
	printf("wrote     %s: %s request %" PRIu64 ", %" PRIu32 "x%" PRIu32
	       " %s, %zu bytes\n",
	       spec->conn.out, cli_kind_name(req.kind), req.request_id,
	       req.src_width, req.src_height, cli_format_name(req.src_format),
	       sizeof(header) + (size_t)req.input_size);
	ret = 0;
	goto out;
fail:
	fprintf(stderr, "frameprep: writing %s: %s\n", spec->conn.out,
	        strerror(errno));
out:
	cli_image_free(&img);
	return ret;
}

static int cli_read_reply(const struct cli_spec *spec, const char *path)
{
	fprep_reply_header h;
	uint8_t *buf = NULL;
	long size;
	FILE *f;
	int err, ret = EXIT_IO;

	f = fopen(path, "rb");
	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "frameprep: %s: %s\n", path, strerror(errno));
		goto out;
	}
	buf = malloc(size > 0 ? (size_t)size : 1);
	if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) {
		fprintf(stderr, "frameprep: reading %s failed\n", path);
		goto out;
	}
	if ((err = fprep_reply_decode(buf, (size_t)size, &h)) != 0) {
		fprintf(stderr,
		        "frameprep: %s: %s: not a valid reply (%ld bytes)\n",
		        path, fprep_err_name(err), size);
		goto out;
	}
	ret = cli_print_reply(&h, buf + FPREP_REPLY_HEADER_SIZE,
	                      (size_t)h.payload_size, spec->conn.out);
out:
	free(buf);
	if (f != NULL)
		fclose(f);
	return ret;
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {"send", "info", "request", "reply"};
	struct cli_spec spec = {0};
	const char *cmd;
	int first, operands, known = 0;

	if (argc < 2) {
		cli_usage(stderr, NULL);
		return EXIT_USAGE;
	}
	cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		cli_usage(stdout, NULL);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("frameprep %s\n", FPREP_VERSION_STRING);
		return 0;
	}
	if (strcmp(cmd, "crops") == 0 || strcmp(cmd, "batch") == 0)
		return tool_elements_main(cmd, argc - 1, argv + 1);
	if (strcmp(cmd, "video") == 0)
		return tool_video_main(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		known |= strcmp(cmd, cmds[i]) == 0;
	if (!known) {
		fprintf(stderr, "frameprep: unknown command '%s'\n", cmd);
		cli_usage(stderr, NULL);
		return EXIT_USAGE;
	}
	spec.cmd = cmd;
	first = tool_cli_parse(cmd, argc - 1, argv + 1, cli_options, &spec.conn,
	                       &spec.pre, cli_own, &spec);
	if (first == -2) {
		cli_usage(stdout, cmd);
		return 0;
	}
	if (first < 0) {
		fprintf(stderr, "try 'frameprep %s --help'\n", cmd);
		return EXIT_USAGE;
	}
	operands = argc - 1 - first;
	if (strcmp(cmd, "info") == 0) {
		if (operands != 0)
			goto usage;
		return cli_info(&spec);
	}
	if (operands != 1)
		goto usage;
	/* Options may also follow the operand. */
	if (strcmp(cmd, "send") == 0)
		return cli_send(&spec, argv[1 + first]);
	if (strcmp(cmd, "request") == 0) {
		if (spec.conn.out == NULL)
			goto usage;
		return cli_write_request(&spec, argv[1 + first]);
	}
	return cli_read_reply(&spec, argv[1 + first]);
usage:
	cli_usage(stderr, cmd);
	return EXIT_USAGE;
}
