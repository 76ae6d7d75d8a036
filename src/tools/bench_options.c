/*
 * bench_options.c: frameprep-bench's command line (see bench_options.h).
 *
 * The design is simple: bench_options[] has a row per option, in --help's
 * order, with section titles between. A row says how its value is read
 * (its kind), where it goes (a field of bench_opts, and of which type),
 * the range a number must lie in, its default spelled as on the command
 * line (read through the same row at start, so a default is never out of
 * its own range) and its help text. getopt_long's table, the short options,
 * the range errors and --help are all made from it; the shared
 * preprocessing options (tool_options.h) are read and described by
 * tool_options.c. What ties options together (one source of frames, --rate
 * with one --concurrency, --doorbell with --shm both) is checked once all
 * are read, in options_check.
 */
#include "bench_options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* How a row's value is read. */
enum options_kind {
	OPTIONS_SECTION, /* no option: a title in --help */
	OPTIONS_SET,     /* no value: the field (int) takes lo */
	OPTIONS_NUMBER,  /* a finite number in the row's range */
	OPTIONS_NUMBERS, /* a comma list of up to BENCH_MAX_POINTS of them */
	OPTIONS_WORDS,   /* one of the row's words */
	OPTIONS_SIZE,    /* WxH (tool_size): two uint32_t, at offset and aux */
	OPTIONS_TEXT,    /* the argument itself (const char *) */
	OPTIONS_SOCKET,  /* URLs added to urls (tool_socket) */
	OPTIONS_FORMAT,  /* a pixel format's word (tool_lookup): uint16_t */
	OPTIONS_SHARED,  /* the preprocessing options of tool_options.h */
	OPTIONS_HELP,
	OPTIONS_VERSION,
};

/* The type of a row's field. */
enum options_type { T_INT, T_UNSIGNED, T_U64, T_DOUBLE };

/* Row flags. */
#define OPTIONS_LO_OPEN 1u /* lo itself is out of range */
#define OPTIONS_WHOLE   2u /* whole numbers only */
#define OPTIONS_SOURCE  4u /* one of the frames' sources */
#define OPTIONS_NO_DEF  8u /* --help names the default elsewhere */

struct options_word {
	const char *word;
	int value;
};

struct options_row {
	const char *name; /* long name, or a section's title */
	int letter;       /* short option, or 0 */
	const char *arg;  /* its value in --help, or NULL: no value */
	enum options_kind kind;
	enum options_type type;
	size_t offset;  /* the field in bench_opts */
	size_t aux;     /* NUMBERS: the count (unsigned); SIZE: the height */
	double lo, hi;  /* NUMBER(S): the range; SET: the value */
	unsigned flags; /* OPTIONS_* */
	const struct options_word *words; /* WORDS, ending with NULL */
	const char *def;  /* default, as given on the command line, or NULL */
	const char *also; /* another name shown in --help (same field) */
	const char *help; /* NULL: not in --help (shown with another row) */
};

#define OFF(field) offsetof(bench_opts, field)
#define HUGE_U64   18446744073709549568.0 /* the largest double < 2^64 */

static const struct options_word options_arrivals[] = {
        {"constant", BENCH_ARRIVALS_CONSTANT},
        {"poisson", BENCH_ARRIVALS_POISSON},
        {NULL, 0},
};
static const struct options_word options_shm[] = {
        {"in", 1}, {"out", 2}, {"both", 3}, {"none", 0}, {NULL, 0},
};
static const struct options_word options_verify[] = {
        {"all", BENCH_VERIFY_ALL},
        {"sample", BENCH_VERIFY_SAMPLE},
        {"none", BENCH_VERIFY_NONE},
        {NULL, 0},
};

/* clang-format off */
#define SECTION(title) {.name = title, .kind = OPTIONS_SECTION}
#define SET(name_, letter_, f, value, help_)                                   \
	{.name = name_, .letter = letter_, .kind = OPTIONS_SET,                \
	 .type = T_INT, .offset = OFF(f), .lo = value, .help = help_}
#define NUMBER(name_, letter_, arg_, f, type_, lo_, hi_, flags_, def_, help_)  \
	{.name = name_, .letter = letter_, .arg = arg_,                        \
	 .kind = OPTIONS_NUMBER, .type = type_, .offset = OFF(f), .lo = lo_,   \
	 .hi = hi_, .flags = flags_, .def = def_, .help = help_}
#define WORDS(name_, arg_, f, words_, def_, help_)                             \
	{.name = name_, .arg = arg_, .kind = OPTIONS_WORDS, .type = T_INT,     \
	 .offset = OFF(f), .words = words_, .def = def_, .help = help_}
#define TEXT(name_, letter_, arg_, f, flags_, help_)                           \
	{.name = name_, .letter = letter_, .arg = arg_, .kind = OPTIONS_TEXT,  \
	 .offset = OFF(f), .flags = flags_, .help = help_}
#define SIZE(name_, f, flags_, def_, help_)                                    \
	{.name = name_, .arg = "WxH", .kind = OPTIONS_SIZE,                    \
	 .offset = OFF(f##_w), .aux = OFF(f##_h), .flags = flags_,             \
	 .def = def_, .help = help_}

/* The rows, in --help's order. */
static const struct options_row bench_options[] = {
	SECTION("Load:"),
	{.name = "concurrency", .letter = 'c', .arg = "N[,N...]",
	 .kind = OPTIONS_NUMBERS, .type = T_UNSIGNED, .offset = OFF(conc),
	 .aux = OFF(nconc), .lo = 1, .hi = BENCH_MAX_STREAMS,
	 .flags = OPTIONS_WHOLE, .def = "1",
	 .help = "closed loop: N streams, each a thread with its own "
	         "connection; a list is a sweep"},
	{.name = "rate", .letter = 'r', .arg = "R[,R...]",
	 .kind = OPTIONS_NUMBERS, .type = T_DOUBLE, .offset = OFF(rates),
	 .aux = OFF(nrates), .lo = 0, .hi = INFINITY,
	 .flags = OPTIONS_LO_OPEN,
	 .help = "open loop: R frames/s from a pool of --concurrency "
	         "connections; latency is taken from the intended send "
	         "time; a list is a sweep"},
	WORDS("arrivals", "KIND", arrivals, options_arrivals, "constant",
	      "open loop arrivals: constant or poisson"),
	NUMBER("duration", 'd', "SECONDS", duration_s, T_DOUBLE, 0, INFINITY,
	       OPTIONS_LO_OPEN, "10", "measured time per point"),
	NUMBER("requests", 'n', "N", requests, T_U64, 1, HUGE_U64,
	       OPTIONS_WHOLE, NULL,
	       "measured requests per point instead of a time"),
	NUMBER("warmup", 'w', "SECONDS", warmup_s, T_DOUBLE, 0, INFINITY, 0,
	       "1", "unmeasured time before each point"),
	NUMBER("timeout", 't', "MS", timeout_ms, T_INT, 1, 3600000, 0,
	       "10000", "per-request reply timeout"),
	{.name = "socket", .letter = 'u', .arg = "URL",
	 .kind = OPTIONS_SOCKET, .offset = OFF(urls),
	 .help = "daemon URL (default: $FRAMEPREP_SOCKET, else "
	         "ipc://$XDG_RUNTIME_DIR/frameprep.sock, else "
	         "ipc:///tmp/frameprep-$UID.sock); repeat it or give a "
	         "comma list for several daemons: requests are spread over "
	         "them and resent when one dies (no --shm)"},
	TEXT("trust-socket-owner", 0, "USER", trust_owner, 0,
	     "dial an ipc:// socket owned by USER too (default: only "
	     "yours, root's or frameprep's; $FRAMEPREP_TRUST_SOCKET_OWNER "
	     "likewise)"),
	SECTION("Frames (one of; default --synthetic 1920x1080):"),
	TEXT("image", 'i', "FILE", spec.image, OPTIONS_SOURCE,
	     "one image, decoded once (stb_image)"),
	TEXT("image-dir", 0, "DIR", spec.image_dir, OPTIONS_SOURCE,
	     "every image in DIR, sent round robin"),
	SIZE("synthetic", spec.synth, OPTIONS_SOURCE | OPTIONS_NO_DEF,
	     "1920x1080", "seeded random pixels"),
	SIZE("frame-size", spec.frame, 0, NULL,
	     "resize decoded images to WxH first"),
	{.name = "format", .letter = 'f', .arg = "FMT",
	 .kind = OPTIONS_FORMAT, .offset = OFF(spec.format), .def = "bgr8",
	 .help = "bgr8, rgb8, bgra8, rgba8, gray8, nv12, i420, yuyv "
	         "(images are converted as the frameprep CLI does), or "
	         "jpeg: the --image/--image-dir files sent as they are"},
	NUMBER("seed", 0, "N", spec.seed, T_U64, 0, HUGE_U64, 0, "1",
	       "synthetic pixels and Poisson arrivals"),
	SECTION("Video (instead of frames):"),
	TEXT("video", 0, "FILE", video, 0,
	     "replay an H.264 or HEVC file (.mp4, .mkv, .h264, .hevc) as "
	     "video streams: frames/s, latency from a packet's send to its "
	     "frame's tensor, every stream's frames and pts verified"),
	NUMBER("streams", 0, "N", video_streams, T_UNSIGNED, 1,
	       BENCH_MAX_STREAMS, OPTIONS_WHOLE, "1",
	       "with --video: N producers, each a thread with its own "
	       "connection and stream"),
	SET("realtime", 0, video_realtime, 1,
	    "with --video: each producer at the file's frame rate (default: "
	    "flat out)"),
	NUMBER("window", 0, "N", video_window, T_UNSIGNED, 1, BENCH_MAX_WINDOW,
	       OPTIONS_WHOLE, "4",
	       "with --video: packets each stream keeps in flight, so that "
	       "a GPU decodes the next while it preprocesses one (1: each "
	       "waits for the reply before it, the one-packet latency)"),
	SECTION("Tensor (defaults: the YOLO convention):"),
	{.name = "size", .letter = 's', .kind = OPTIONS_SHARED},
	SET("echo", 0, echo, 1, "send ECHO requests: the transport alone"),
	SET("trace", 0, trace, 1,
	    "tabulate the stage times of frameprepd --trace (medians, p99 "
	    "and the hand-offs between them); replies without one fail "
	    "the run"),
	WORDS("shm", "WHERE", shm, options_shm, "none",
	      "in, out, both, none: frames and/or tensors through a "
	      "shared-memory region per connection (ipc:// only; a frame is "
	      "written there when it differs from the last one)"),
	NUMBER("rois", 0, "N", rois, T_UNSIGNED, 1, FPREP_ELEMENTS_MAX, 0,
	       NULL,
	       "each request: N boxes of its frame (ROIS), one (N, C, H, W) "
	       "tensor; every reply checked whole (--verify), no ceiling "
	       "run"),
	NUMBER("batch", 0, "N", batch, T_UNSIGNED, 1, FPREP_ELEMENTS_MAX, 0,
	       NULL,
	       "each request: N frames (BATCH), one (N, C, H, W) tensor; "
	       "frames/s = N x the request rate"),
	SET("no-stage", 0, no_stage, 1,
	    "with --shm none: send frames through the socket; by default "
	    "the library stages them through shared memory on ipc:// (a "
	    "copy per request) and through the client's doorbell; the "
	    "report counts the requests the daemon took there"),
	SET("no-doorbell", 0, no_doorbell, 1,
	    "staged frames through the socket, not the client's doorbell"),
	SET("shm-reply", 0, shm_reply, 1,
	    "with --shm out or both: the daemon also writes each reply into "
	    "the region, where the client waits (a futex) instead of on the "
	    "socket"),
	NUMBER("spin-us", 0, "N", spin_us, T_UNSIGNED, 0, 1000000, 0, "0",
	       "with --shm-reply or --doorbell: each stream polls for its "
	       "reply up to N us before it sleeps"),
	SET("doorbell", 0, doorbell, 1,
	    "with --shm both: each stream sends its requests through a "
	    "doorbell that frameprepd polls while it spins (its --spin-us), "
	    "through the socket while not; the report counts the requests "
	    "the daemon took there"),
	SET("cuda-out", 0, cuda_out, 1,
	    "tensors into this process's memory on its first GPU (pick it "
	    "with CUDA_VISIBLE_DEVICES; the daemon's GPU), where an "
	    "in-process GPU library leaves its output: a CUDA region per "
	    "connection (ipc:// only); sampled "
	    "tensors are copied back and compared on the stream's thread"),
	SECTION("Checks:"),
	WORDS("verify", "MODE", verify, options_verify, "sample",
	      "all, sample, none: compare tensors with the CPU reference "
	      "(sample: the first reply of each input and every "
	      "--verify-every-th, compared on a thread of its own so streams "
	      "never pause)"),
	NUMBER("verify-every", 0, "N", verify_every, T_UNSIGNED, 1, 1e9, 0,
	       "64", "sampling period"),
	{.name = "ceiling", .kind = OPTIONS_SET, .type = T_INT,
	 .offset = OFF(ceiling), .lo = 1, .def = "on", .also = "no-ceiling",
	 .help = "before each point, run the same load with ECHO and "
	         "report achieved / transport ceiling"},
	SET("no-ceiling", 0, ceiling, 0, NULL),
	NUMBER("ceiling-duration", 0, "S", ceiling_s, T_DOUBLE, 0, INFINITY,
	       OPTIONS_LO_OPEN, "2", "length of that ECHO run"),
	NUMBER("pcie-gbps", 0, "G", pcie_gbps, T_DOUBLE, 0, INFINITY,
	       OPTIONS_LO_OPEN, NULL,
	       "measured PCIe GB/s per direction: report achieved / PCIe "
	       "ceiling"),
	SECTION("Output:"),
	TEXT("json", 0, "FILE", json, 0, "results as JSON"),
	TEXT("csv", 0, "FILE", csv, 0, "results as CSV, one row per point"),
	TEXT("plot", 0, "FILE.png", plot, 0,
	     "p50/p99 latency vs throughput (needs gnuplot)"),
	SET("quiet", 'q', quiet, 1, "no progress line"),
	{.name = "help", .letter = 'h', .kind = OPTIONS_HELP,
	 .help = "this text"},
	{.name = "version", .letter = 'V', .kind = OPTIONS_VERSION,
	 .help = "the version"},
};
/* clang-format on */

#define OPTIONS_NROWS (sizeof(bench_options) / sizeof(bench_options[0]))

/* The shared preprocessing options, spliced into getopt_long's table. */
static const struct option options_shared[] = {TOOL_PREPROCESS_OPTIONS};
#define OPTIONS_NSHARED (sizeof(options_shared) / sizeof(options_shared[0]))

/* Help's columns: the option, then its text from OPTIONS_TEXT_COL, lines
 * broken before OPTIONS_WIDTH. */
#define OPTIONS_TEXT_COL 30
#define OPTIONS_WIDTH    79

/* options_key returns the value getopt_long gives for row r: its letter,
 * or one above every shared option's. */
static int options_key(const struct options_row *r)
{
	return r->letter != 0 ? r->letter
	                      : TOOL_OPT_END + (int)(r - bench_options);
}

/* options_is_option tells whether row r is an option of its own (not a
 * title, not the shared options' place). */
static int options_is_option(const struct options_row *r)
{
	return r->kind != OPTIONS_SECTION && r->kind != OPTIONS_SHARED;
}

/* options_find returns the row of getopt_long's value key, or NULL. */
static const struct options_row *options_find(int key)
{
	for (size_t k = 0; k < OPTIONS_NROWS; k++)
		if (options_is_option(&bench_options[k]) &&
		    options_key(&bench_options[k]) == key)
			return &bench_options[k];
	return NULL;
}

/* options_number parses the finite number at s into *v, and where it
 * ends into *end. Returns 0 or -1. */
static int options_number(const char *s, const char **end, double *v)
{
	char *e;

	errno = 0;
	*v = strtod(s, &e);
	*end = e;
	return (e == s || errno != 0 || !isfinite(*v)) ? -1 : 0;
}

/* options_in_range tells whether v lies in row r's range. */
static int options_in_range(const struct options_row *r, double v)
{
	if ((r->flags & OPTIONS_WHOLE) && v != floor(v))
		return 0;
	if ((r->flags & OPTIONS_LO_OPEN) ? !(v > r->lo) : !(v >= r->lo))
		return 0;
	return v <= r->hi;
}

/* options_store writes v into element i of row r's field. */
static void options_store(bench_opts *o, const struct options_row *r, size_t i,
                          double v)
{
	char *field = (char *)o + r->offset;

	switch (r->type) {
	case T_INT:
		((int *)(void *)field)[i] = (int)v;
		break;
	case T_UNSIGNED:
		((unsigned *)(void *)field)[i] = (unsigned)v;
		break;
	case T_U64:
		((uint64_t *)(void *)field)[i] = (uint64_t)v;
		break;
	case T_DOUBLE:
		((double *)(void *)field)[i] = v;
		break;
	}
}

/* options_numbers reads row r's number, or comma list of them, from s.
 * Returns 0 or -1. */
static int options_numbers(bench_opts *o, const struct options_row *r,
                           const char *s)
{
	double v[BENCH_MAX_POINTS];
	size_t n = 0, max = r->kind == OPTIONS_NUMBERS ? BENCH_MAX_POINTS : 1;
	const char *end;

	for (;;) {
		if (n == max || options_number(s, &end, &v[n]) != 0 ||
		    !options_in_range(r, v[n]))
			return -1;
		n++;
		if (*end == '\0')
			break;
		if (*end != ',' || max == 1)
			return -1;
		s = end + 1;
	}
	for (size_t i = 0; i < n; i++)
		options_store(o, r, i, v[i]);
	if (r->kind == OPTIONS_NUMBERS)
		*(unsigned *)(void *)((char *)o + r->aux) = (unsigned)n;
	return 0;
}

/* options_word reads one of row r's words from s. Returns 0 or -1. */
static int options_word(bench_opts *o, const struct options_row *r,
                        const char *s)
{
	for (const struct options_word *w = r->words; w->word != NULL; w++)
		if (strcmp(w->word, s) == 0) {
			options_store(o, r, 0, w->value);
			return 0;
		}
	return -1;
}

/* options_set reads row r's value s (NULL: no value) into *o. Returns 0
 * or -1 when s is not a value of r's. */
static int options_set(bench_opts *o, const struct options_row *r,
                       const char *s)
{
	char *field = (char *)o + r->offset;
	int n;

	switch (r->kind) {
	case OPTIONS_SET:
		options_store(o, r, 0, r->lo);
		return 0;
	case OPTIONS_NUMBER:
	case OPTIONS_NUMBERS:
		return options_numbers(o, r, s);
	case OPTIONS_WORDS:
		return options_word(o, r, s);
	case OPTIONS_SIZE:
		return tool_size(s, (uint32_t *)(void *)field,
		                 (uint32_t *)(void *)((char *)o + r->aux));
	case OPTIONS_TEXT:
		*(const char **)(void *)field = s;
		return 0;
	case OPTIONS_SOCKET:
		if (tool_socket(o->urls, sizeof(o->urls), s) != 0)
			return -1;
		o->url = o->urls;
		return 0;
	case OPTIONS_FORMAT:
		n = tool_lookup(TOOL_FORMAT, s);
		if (n == 0)
			return -1;
		*(uint16_t *)(void *)field = (uint16_t)n;
		return 0;
	default:
		return 0;
	}
}

/* options_bound writes x as errors show a bound. */
static void options_bound(char *buf, size_t size, double x)
{
	snprintf(buf, size, "%.15g", x);
}

/* options_takes says in words what row r takes, into buf. */
static void options_takes(const struct options_row *r, char *buf, size_t size)
{
	const char *what =
	        (r->flags & OPTIONS_WHOLE) ? "a whole number" : "a number";
	char lo[32], hi[32];
	size_t len;

	options_bound(lo, sizeof(lo), r->lo);
	options_bound(hi, sizeof(hi), r->hi);
	switch (r->kind) {
	case OPTIONS_NUMBER:
	case OPTIONS_NUMBERS:
		len = (size_t)snprintf(
		        buf, size, "%s%s %s %s", what,
		        r->kind == OPTIONS_NUMBERS ? " (or a comma list)" : "",
		        (r->flags & OPTIONS_LO_OPEN) ? "above" : "from", lo);
		if (r->hi < HUGE_U64 && len < size)
			snprintf(buf + len, size - len, " to %s", hi);
		return;
	case OPTIONS_WORDS:
		len = (size_t)snprintf(buf, size, "one of");
		for (const struct options_word *w = r->words;
		     w->word != NULL && len < size; w++)
			len += (size_t)snprintf(buf + len, size - len, "%s %s",
			                        w == r->words ? "" : ",",
			                        w->word);
		return;
	case OPTIONS_SIZE:
		snprintf(buf, size, "WxH, each from 1 to 65535");
		return;
	case OPTIONS_SOCKET:
		snprintf(buf, size, "URLs of at most %d bytes in all",
		         TOOL_URLS_SIZE - 1);
		return;
	default:
		snprintf(buf, size, "see --help");
		return;
	}
}

/* options_bad says that s is no value of row r's. Returns 2. */
static int options_bad(const struct options_row *r, const char *s)
{
	char takes[160];

	options_takes(r, takes, sizeof(takes));
	fprintf(stderr, "frameprep-bench: invalid --%s '%s': %s (see --help)\n",
	        r->name, s, takes);
	return 2;
}

/* options_wrap prints text from column col, lines broken at spaces before
 * OPTIONS_WIDTH, the later ones indented to col. */
static void options_wrap(FILE *f, int col, const char *text)
{
	int room = OPTIONS_WIDTH - col;

	while (*text != '\0') {
		int n = (int)strlen(text);

		if (n > room) {
			n = room;
			while (n > 0 && text[n] != ' ')
				n--;
			if (n == 0)
				n = room;
		}
		fprintf(f, "%.*s\n", n, text);
		text += n;
		while (*text == ' ')
			text++;
		if (*text != '\0')
			fprintf(f, "%*s", col, "");
	}
}

/* options_usage_row prints row r's lines of --help. */
static void options_usage_row(FILE *f, const struct options_row *r)
{
	char left[64], text[512];
	int n;

	if (r->kind == OPTIONS_SECTION) {
		fprintf(f, "%s%s\n", r == bench_options ? "" : "\n", r->name);
		return;
	}
	if (r->kind == OPTIONS_SHARED) {
		fprintf(f, "  %-*s%s\n", OPTIONS_TEXT_COL - 2, "-s WxH",
		        "same as --size WxH");
		tool_preprocess_usage(f, 6, OPTIONS_TEXT_COL);
		return;
	}
	if (r->help == NULL)
		return;
	n = snprintf(
	        left, sizeof(left), "  %s%c%s--%s%s%s%s%s",
	        r->letter != 0 ? "-" : " ", r->letter != 0 ? r->letter : ' ',
	        r->letter != 0 ? ", " : "  ", r->name,
	        r->also != NULL ? ", --" : "", r->also != NULL ? r->also : "",
	        r->arg != NULL ? " " : "", r->arg != NULL ? r->arg : "");
	if (r->def != NULL && !(r->flags & OPTIONS_NO_DEF))
		snprintf(text, sizeof(text), "%s (default %s)", r->help,
		         r->def);
	else
		snprintf(text, sizeof(text), "%s", r->help);
	if (n > OPTIONS_TEXT_COL - 1) {
		fprintf(f, "%s  ", left);
		options_wrap(f, n + 2, text);
		return;
	}
	fprintf(f, "%-*s", OPTIONS_TEXT_COL, left);
	options_wrap(f, OPTIONS_TEXT_COL, text);
}

void bench_options_usage(FILE *f)
{
	fprintf(f, "Usage: frameprep-bench [OPTIONS]\n"
	           "Load-test frameprepd and check every reply.\n\n");
	for (size_t k = 0; k < OPTIONS_NROWS; k++)
		options_usage_row(f, &bench_options[k]);
	fprintf(f, "\nExit status: 0 when every reply was right; 1 when any "
	           "reply was lost,\ntimed out, wrong or an error; 2 on a "
	           "usage or setup error.\n");
}

/* options_table fills getopt_long's table (longs, room for every row and
 * shared option and the end) and its short options (shorts, 64 bytes). */
static void options_table(struct option *longs, char *shorts)
{
	size_t n = 0, s = 0;

	for (size_t k = 0; k < OPTIONS_NROWS; k++) {
		const struct options_row *r = &bench_options[k];

		if (!options_is_option(r))
			continue;
		longs[n++] = (struct option){
		        r->name,
		        r->kind == OPTIONS_SET || r->kind == OPTIONS_HELP ||
		                        r->kind == OPTIONS_VERSION
		                ? no_argument
		                : required_argument,
		        NULL, options_key(r)};
		if (r->letter != 0) {
			shorts[s++] = (char)r->letter;
			if (r->arg != NULL)
				shorts[s++] = ':';
		}
	}
	for (size_t k = 0; k < OPTIONS_NSHARED; k++)
		longs[n++] = options_shared[k];
	longs[n] = (struct option){NULL, 0, NULL, 0};
	memcpy(shorts + s, "s:", 3);
}

/* options_defaults fills *o with every row's default. */
static void options_defaults(bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	fprep_request_init(&o->spec.tmpl, FPREP_PIX_BGR8, 1, 1);
	for (size_t k = 0; k < OPTIONS_NROWS; k++)
		if (bench_options[k].def != NULL)
			(void)options_set(o, &bench_options[k],
			                  bench_options[k].def);
}

/* options_fail prints a usage error that ties options together. Returns
 * 2. */
static int options_fail(const char *why)
{
	fprintf(stderr, "frameprep-bench: %s\n", why);
	return 2;
}

/* options_check checks what ties the options together, once all are read.
 * Returns 0 or 2. */
static int options_check(bench_opts *o)
{
	o->shm_in = (o->shm & 1) != 0;
	o->shm_out = (o->shm & 2) != 0;
	if (o->source > 1)
		return options_fail("give one of --image, --image-dir, "
		                    "--synthetic");
	if (o->spec.format == FPREP_PIX_JPEG && !o->spec.image &&
	    !o->spec.image_dir)
		return options_fail("--format jpeg sends JPEG files: give "
		                    "--image or --image-dir");
	if (o->nrates && o->nconc > 1)
		return options_fail("with --rate, --concurrency is the pool "
		                    "size: give one value");
	if (o->video != NULL &&
	    (o->source || o->nrates || o->echo || o->shm || o->rois ||
	     o->batch || o->doorbell || o->cuda_out ||
	     o->spec.format != FPREP_PIX_BGR8))
		return options_fail("--video replays a file: no other source, "
		                    "--format, --rate, --echo, --shm, --rois, "
		                    "--batch, --doorbell or --cuda-out");
	if (o->cuda_out && (o->shm_out || o->echo || o->rois || o->batch))
		return options_fail("--cuda-out takes no --shm out/both, "
		                    "--echo, --rois or --batch (the tensor "
		                    "goes to the GPU)");
	if (o->doorbell && !(o->shm_in && o->shm_out))
		return options_fail("--doorbell needs --shm both (a request "
		                    "through a doorbell has its frame and its "
		                    "tensor in regions)");
	return 0;
}

/* options_shared_name returns the name of the shared option key, or
 * "option". */
static const char *options_shared_name(int key)
{
	for (size_t k = 0; k < OPTIONS_NSHARED; k++)
		if (options_shared[k].val == key)
			return options_shared[k].name;
	return "option";
}

/* options_given_shared reads the shared option key (or an unknown one,
 * '?') with argument arg into *pre. Returns 0 or 2 (a usage error,
 * said). */
static int options_given_shared(struct tool_preprocess *pre, int key,
                                const char *arg)
{
	int n = tool_preprocess_option(pre, key, arg);

	if (n < 0) {
		fprintf(stderr, "frameprep-bench: invalid --%s '%s': %s\n",
		        options_shared_name(key), arg, tool_option_values(key));
		return 2;
	}
	if (n > 0) {
		bench_options_usage(stderr);
		return 2;
	}
	return 0;
}

/* options_given reads option key with argument arg (NULL: none) into *o,
 * the shared ones into *pre. Returns 0, -1 (help or version printed), or
 * 2 (a usage error, said). */
static int options_given(bench_opts *o, struct tool_preprocess *pre, int key,
                         const char *arg)
{
	const struct options_row *r = options_find(key);

	if (r == NULL)
		return options_given_shared(pre, key, arg);
	if (r->kind == OPTIONS_HELP) {
		bench_options_usage(stdout);
		return -1;
	}
	if (r->kind == OPTIONS_VERSION) {
		printf("frameprep-bench %s\n", FPREP_VERSION_STRING);
		return -1;
	}
	if (options_set(o, r, arg) != 0)
		return options_bad(r, arg);
	if (r->flags & OPTIONS_SOURCE)
		o->source++;
	if (r->offset == OFF(duration_s))
		o->requests = 0; /* the later of -d and -n wins */
	else if (r->offset == OFF(requests))
		o->duration_s = 0;
	return 0;
}

int bench_options_parse(int argc, char **argv, bench_opts *o)
{
	struct option longs[OPTIONS_NROWS + OPTIONS_NSHARED + 1];
	struct tool_preprocess pre = {0};
	char shorts[64];
	int c, rc;

	options_defaults(o);
	options_table(longs, shorts);
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		rc = options_given(o, &pre, c, optarg);
		if (rc != 0)
			return rc;
	}
	tool_preprocess_apply(&pre, &o->spec.tmpl);
	if (optind < argc) {
		fprintf(stderr, "frameprep-bench: unexpected argument '%s'\n",
		        argv[optind]);
		return 2;
	}
	return options_check(o);
}
