/*
 * tool_options.c: the preprocessing options shared by the frameprep CLI and
 * frameprep-bench, and the CLI commands' connection options (see
 * tool_options.h). Each table is indexed by the
 * protocol's enum value; index 0 is unused, as in the protocol.
 */
#include "tool_options.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const tool_formats[] = {NULL,    "bgr8",  "rgb8", "bgra8",
                                           "rgba8", "gray8", "nv12", "i420",
                                           "yuyv",  "jpeg"};
static const char *const tool_matrices[] = {NULL, "bt601", "bt709", "bt2020"};
static const char *const tool_ranges[] = {NULL, "limited", "full"};
static const char *const tool_dtypes[] = {NULL, "f32", "f16", "u8"};
static const char *const tool_layouts[] = {NULL, "nchw", "nhwc"};
static const char *const tool_orders[] = {NULL, "rgb", "bgr", "gray"};
static const char *const tool_resizes[] = {NULL, "letterbox", "stretch"};
/* Indexed by enum fprep_rounding, whose first value is 0. */
static const char *const tool_roundings[] = {"float", "opencv"};

static const struct {
	const char *const *names;
	int n;
} tool_tables[] = {
        [TOOL_FORMAT] = {tool_formats, 10}, [TOOL_DTYPE] = {tool_dtypes, 4},
        [TOOL_LAYOUT] = {tool_layouts, 3},  [TOOL_ORDER] = {tool_orders, 4},
        [TOOL_RESIZE] = {tool_resizes, 3},  [TOOL_MATRIX] = {tool_matrices, 4},
        [TOOL_RANGE] = {tool_ranges, 3},
};

int tool_lookup(enum tool_kind kind, const char *s)
{
	for (int i = 1; i < tool_tables[kind].n; i++)
		if (strcmp(tool_tables[kind].names[i], s) == 0)
			return i;
	return 0;
}

const char *tool_name(enum tool_kind kind, int value)
{
	if (value < 1 || value >= tool_tables[kind].n)
		return "?";
	return tool_tables[kind].names[value];
}

int tool_size(const char *s, uint32_t *w, uint32_t *h)
{
	unsigned long a, b;
	char *end;

	errno = 0;
	a = strtoul(s, &end, 10);
	if (end == s || (*end != 'x' && *end != 'X') || a == 0 || a > 65535)
		return -1;
	s = end + 1;
	b = strtoul(s, &end, 10);
	if (end == s || *end != '\0' || errno != 0 || b == 0 || b > 65535)
		return -1;
	*w = (uint32_t)a;
	*h = (uint32_t)b;
	return 0;
}

int tool_triple(const char *s, float v[3])
{
	char *end;
	int n = 0;

	for (;;) {
		if (n == 3)
			return -1;
		errno = 0;
		v[n] = strtof(s, &end);
		if (end == s || errno != 0 || !isfinite(v[n]))
			return -1;
		n++;
		if (*end == '\0')
			break;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
	if (n == 1)
		v[1] = v[2] = v[0];
	return n == 1 || n == 3 ? 0 : -1;
}

int tool_preprocess_option(struct tool_preprocess *p, int opt, const char *arg)
{
	enum tool_kind kind;
	char *end;
	float v;
	int n;

	switch (opt) {
	case TOOL_OPT_SIZE:
		if (tool_size(arg, &p->out_w, &p->out_h) != 0)
			return -1;
		p->set |= TOOL_SET_SIZE;
		return 0;
	case TOOL_OPT_DTYPE:
	case TOOL_OPT_LAYOUT:
	case TOOL_OPT_ORDER:
	case TOOL_OPT_RESIZE:
	case TOOL_OPT_MATRIX:
	case TOOL_OPT_RANGE:
		kind = opt == TOOL_OPT_DTYPE    ? TOOL_DTYPE
		       : opt == TOOL_OPT_LAYOUT ? TOOL_LAYOUT
		       : opt == TOOL_OPT_ORDER  ? TOOL_ORDER
		       : opt == TOOL_OPT_RESIZE ? TOOL_RESIZE
		       : opt == TOOL_OPT_MATRIX ? TOOL_MATRIX
		                                : TOOL_RANGE;
		if ((n = tool_lookup(kind, arg)) == 0)
			return -1;
		*(opt == TOOL_OPT_DTYPE    ? &p->dtype
		  : opt == TOOL_OPT_LAYOUT ? &p->layout
		  : opt == TOOL_OPT_ORDER  ? &p->order
		  : opt == TOOL_OPT_RESIZE ? &p->resize
		  : opt == TOOL_OPT_MATRIX ? &p->matrix
		                           : &p->range) = (uint8_t)n;
		break;
	case TOOL_OPT_ROUNDING:
		for (n = 0; n < 2 && strcmp(arg, tool_roundings[n]) != 0; n++)
			;
		if (n == 2)
			return -1;
		p->rounding = (uint8_t)n;
		break;
	case TOOL_OPT_MEAN:
		if (tool_triple(arg, p->mean) != 0)
			return -1;
		break;
	case TOOL_OPT_STD:
		if (tool_triple(arg, p->std) != 0 ||
		    !(p->std[0] > 0 && p->std[1] > 0 && p->std[2] > 0))
			return -1;
		break;
	case TOOL_OPT_SCALE:
	case TOOL_OPT_PAD:
		errno = 0;
		v = strtof(arg, &end);
		if (end == arg || *end != '\0' || errno != 0 || !isfinite(v))
			return -1;
		if (opt == TOOL_OPT_PAD && !(v >= 0 && v <= 255))
			return -1;
		*(opt == TOOL_OPT_SCALE ? &p->scale : &p->pad) = v;
		break;
	default:
		return 1;
	}
	p->set |= 1u << (opt - TOOL_OPT_DTYPE);
	return 0;
}

const char *tool_option_values(int opt)
{
	switch (opt) {
	case TOOL_OPT_SIZE:
		return "WxH, width and height each 1..65535 (the daemon's "
		       "--max-out-width and --max-out-height bound them "
		       "further)";
	case TOOL_OPT_DTYPE:
		return "f32, f16 or u8";
	case TOOL_OPT_LAYOUT:
		return "nchw or nhwc";
	case TOOL_OPT_ORDER:
		return "rgb, bgr or gray";
	case TOOL_OPT_RESIZE:
		return "letterbox or stretch";
	case TOOL_OPT_MATRIX:
		return "bt601, bt709 or bt2020";
	case TOOL_OPT_RANGE:
		return "limited or full";
	case TOOL_OPT_ROUNDING:
		return "float or opencv";
	case TOOL_OPT_MEAN:
		return "one finite number or three, comma-separated";
	case TOOL_OPT_STD:
		return "one number > 0 or three, comma-separated";
	case TOOL_OPT_SCALE:
		return "a finite number";
	case TOOL_OPT_PAD:
		return "a number 0..255";
	}
	return NULL;
}

/* tool_fields: where each shared option's value lies in a tool_preprocess
 * and in an fprep_request, indexed by opt - TOOL_OPT_DTYPE (its bit in
 * set); --size is apart. */
#define TOOL_FIELD(opt, from, to)                                              \
	[(opt)-TOOL_OPT_DTYPE] = {offsetof(struct tool_preprocess, from),      \
	                          offsetof(fprep_request, to),                 \
	                          sizeof(((fprep_request *)0)->to)}
static const struct {
	size_t from, to, size;
} tool_fields[] = {
        TOOL_FIELD(TOOL_OPT_DTYPE, dtype, dtype),
        TOOL_FIELD(TOOL_OPT_LAYOUT, layout, layout),
        TOOL_FIELD(TOOL_OPT_ORDER, order, channel_order),
        TOOL_FIELD(TOOL_OPT_RESIZE, resize, resize),
        TOOL_FIELD(TOOL_OPT_MEAN, mean, mean),
        TOOL_FIELD(TOOL_OPT_STD, std, std),
        TOOL_FIELD(TOOL_OPT_SCALE, scale, scale),
        TOOL_FIELD(TOOL_OPT_PAD, pad, pad_value),
        TOOL_FIELD(TOOL_OPT_MATRIX, matrix, yuv_matrix),
        TOOL_FIELD(TOOL_OPT_RANGE, range, yuv_range),
        TOOL_FIELD(TOOL_OPT_ROUNDING, rounding, rounding),
};
#undef TOOL_FIELD
_Static_assert(sizeof(tool_fields) / sizeof(tool_fields[0]) ==
                       TOOL_OPT_ROUNDING - TOOL_OPT_DTYPE + 1,
               "a shared preprocessing option without its field");

void tool_preprocess_apply(const struct tool_preprocess *p, fprep_request *req)
{
	if (p->set & TOOL_SET_SIZE) {
		req->out_width = p->out_w;
		req->out_height = p->out_h;
	}
	for (size_t k = 0; k < sizeof(tool_fields) / sizeof(tool_fields[0]);
	     k++)
		if (p->set & (1u << k))
			memcpy((char *)req + tool_fields[k].to,
			       (const char *)p + tool_fields[k].from,
			       tool_fields[k].size);
}

const char *tool_rounding_name(int rounding)
{
	return rounding >= 0 && rounding < 2 ? tool_roundings[rounding] : "?";
}

void tool_preprocess_usage(FILE *f, int indent, int width)
{
	static const char *const lines[][2] = {
	        {"--size WxH", "tensor width x height [640x640]"},
	        {"--dtype T", "f32, f16 or u8 [f32]"},
	        {"--layout L", "nchw or nhwc [nchw]"},
	        {"--order O", "rgb, bgr or gray [rgb]"},
	        {"--resize R", "letterbox or stretch [letterbox]"},
	        {"--mean A[,B,C]",
	         "per-channel mean, subtracted after scaling [0,0,0]"},
	        {"--std A[,B,C]", "per-channel divisor after the mean, > 0 "
	                          "[1,1,1]"},
	        {"--scale S", "pixel multiplier [1/255 = 0.00392157]"},
	        {"--pad V", "letterbox border value, 0..255 [114]"},
	        {"--matrix M", "YUV colour matrix: bt601, bt709, bt2020 "
	                       "[bt601]"},
	        {"--range R", "YUV range: limited, full [limited]"},
	        {"--rounding R", "float, or opencv: uint8 pixels as "
	                         "cv2.resize's (exact) [float]"},
	};

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		fprintf(f, "%*s%-*s%s\n", indent, "", width - indent,
		        lines[i][0], lines[i][1]);
}

int tool_socket(char *list, size_t size, const char *url)
{
	size_t n = strlen(list);
	int w = snprintf(list + n, size - n, "%s%s", n > 0 ? "," : "", url);

	if (url[0] == '\0' || w < 0 || (size_t)w >= size - n) {
		list[n] = '\0';
		return -1;
	}
	return 0;
}

int tool_connect_option(struct tool_connect *c, int opt, const char *arg)
{
	char *end;
	long t;

	switch (opt) {
	case 'o':
		c->out = arg;
		return 0;
	case TOOL_OPT_SOCKET:
		c->url = c->urls;
		return tool_socket(c->urls, sizeof(c->urls), arg);
	case TOOL_OPT_TRUST_OWNER:
		c->trust_owner = arg;
		return 0;
	case TOOL_OPT_TIMEOUT:
		errno = 0;
		t = strtol(arg, &end, 10);
		if (end == arg || *end != '\0' || errno != 0 || t <= 0 ||
		    t > INT32_MAX)
			return -1;
		c->timeout_ms = (int)t;
		return 0;
	}
	return 1;
}

const char *tool_option_name(const struct option *options, int opt)
{
	for (const struct option *o = options; o->name != NULL; o++)
		if (o->val == opt)
			return o->name;
	return "?";
}

int tool_cli_parse(const char *cmd, int argc, char **argv,
                   const struct option *options, struct tool_connect *conn,
                   struct tool_preprocess *pre, tool_own_fn *own, void *spec)
{
	const char *values;
	int opt, v;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "o:h", options, NULL)) != -1) {
		if (opt == '?' || opt == ':') {
			fprintf(stderr, "frameprep %s: bad option '%s'\n", cmd,
			        argv[optind - 1]);
			return -1;
		}
		v = own != NULL ? own(spec, opt, optarg) : 1;
		if (v == TOOL_REFUSED)
			return -1;
		if (opt == 'h')
			return -2;
		if (v > 0)
			v = tool_connect_option(conn, opt, optarg);
		if (v > 0)
			v = tool_preprocess_option(pre, opt, optarg);
		if (v < 0) {
			values = tool_option_values(opt);
			fprintf(stderr,
			        "frameprep %s: bad value '%s' for --%s%s%s\n",
			        cmd, optarg != NULL ? optarg : "",
			        tool_option_name(options, opt),
			        values != NULL ? ": " : "",
			        values != NULL ? values : "");
			return -1;
		}
	}
	return optind;
}
