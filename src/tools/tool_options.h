/*
 * tool_options.h: the spellings and parsers of the preprocessing options
 * that the frameprep CLI and frameprep-bench share (--size, --format,
 * --matrix, --range, --dtype, --layout, --order, --resize, --mean, --std,
 * --rounding), so both tools accept and print exactly the same words, and
 * the connection's options of the CLI's commands (--socket,
 * --trust-socket-owner, --timeout, --output).
 */
#ifndef FPREP_TOOL_OPTIONS_H
#define FPREP_TOOL_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "frameprep/frameprep.h"

/* The kinds of named option values. */
enum tool_kind {
	TOOL_FORMAT, /* enum fprep_pixel_format: bgr8 rgb8 bgra8 rgba8 gray8
	                nv12 i420 yuyv */
	TOOL_MATRIX, /* enum fprep_yuv_matrix: bt601 bt709 bt2020 */
	TOOL_RANGE,  /* enum fprep_yuv_range: limited full */
	TOOL_DTYPE,  /* enum fprep_dtype: f32 f16 u8 */
	TOOL_LAYOUT, /* enum fprep_layout: nchw nhwc */
	TOOL_ORDER,  /* enum fprep_channel_order: rgb bgr gray */
	TOOL_RESIZE, /* enum fprep_resize: letterbox stretch */
};

/* tool_lookup returns the protocol value that the word s names for kind,
 * or 0 when s names none. */
int tool_lookup(enum tool_kind kind, const char *s);

/* tool_name returns the word for value of kind, or "?". */
const char *tool_name(enum tool_kind kind, int value);

/* tool_size parses "WxH" (each 1..65535) into *w, *h. Returns 0 or -1. */
int tool_size(const char *s, uint32_t *w, uint32_t *h);

/* tool_triple parses "a" (used for all three) or "a,b,c" (finite numbers)
 * into v. Returns 0 or -1. */
int tool_triple(const char *s, float v[3]);

/* The getopt_long values of the shared preprocessing options. --size is
 * 's' (frameprep-bench also takes -s); the others lie above every
 * character, below each tool's own values (which start at TOOL_OPT_END). */
enum tool_opt {
	TOOL_OPT_SIZE = 's',
	TOOL_OPT_DTYPE = 0x100,
	TOOL_OPT_LAYOUT,
	TOOL_OPT_ORDER,
	TOOL_OPT_RESIZE,
	TOOL_OPT_MEAN,
	TOOL_OPT_STD,
	TOOL_OPT_SCALE,
	TOOL_OPT_PAD,
	TOOL_OPT_MATRIX,
	TOOL_OPT_RANGE,
	TOOL_OPT_ROUNDING,
	TOOL_OPT_SOCKET, /* the connection's options (tool_connect_option) */
	TOOL_OPT_TIMEOUT,
	TOOL_OPT_TRUST_OWNER,
	TOOL_OPT_END,
};

/* TOOL_PREPROCESS_OPTIONS: the struct option entries of the shared
 * preprocessing options, spliced into each tool's getopt_long table, so
 * both tools spell them from this one list. */
/* clang-format off */
#define TOOL_PREPROCESS_OPTIONS                                                \
	{"size", required_argument, NULL, TOOL_OPT_SIZE},                      \
	{"dtype", required_argument, NULL, TOOL_OPT_DTYPE},                    \
	{"layout", required_argument, NULL, TOOL_OPT_LAYOUT},                  \
	{"order", required_argument, NULL, TOOL_OPT_ORDER},                    \
	{"resize", required_argument, NULL, TOOL_OPT_RESIZE},                  \
	{"mean", required_argument, NULL, TOOL_OPT_MEAN},                      \
	{"std", required_argument, NULL, TOOL_OPT_STD},                        \
	{"scale", required_argument, NULL, TOOL_OPT_SCALE},                    \
	{"pad", required_argument, NULL, TOOL_OPT_PAD},                        \
	{"matrix", required_argument, NULL, TOOL_OPT_MATRIX},                  \
	{"range", required_argument, NULL, TOOL_OPT_RANGE},                    \
	{"rounding", required_argument, NULL, TOOL_OPT_ROUNDING}
/* clang-format on */

/* tool_preprocess: what the shared options asked for; a field is applied
 * to a request only when its bit is in set (1 << (opt - TOOL_OPT_DTYPE),
 * TOOL_SET_SIZE for --size), so the request keeps fprep_request_init's
 * defaults for the rest. Zero-initialise before use. */
#define TOOL_SET_SIZE (1u << 15)
struct tool_preprocess {
	unsigned set;
	uint32_t out_w, out_h;
	uint8_t dtype, layout, order, resize;
	uint8_t matrix, range; /* of a YUV source (yuv_matrix, yuv_range) */
	uint8_t rounding;      /* enum fprep_rounding */
	float mean[3], std[3], scale, pad;
};

/* tool_preprocess_option applies option opt with argument arg to *p.
 * Returns 0, -1 when arg is not a valid value for opt (the caller names
 * the option in its message), or 1 when opt is not a preprocessing
 * option. Values: --size WxH (1..65535 each); --dtype/--layout/--order/
 * --resize by name (tool_lookup); --mean one or three finite numbers;
 * --std the same, each > 0; --scale a finite number; --pad 0..255;
 * --matrix bt601|bt709|bt2020; --range limited|full; --rounding
 * float|opencv (tool_rounding_name). */
int tool_preprocess_option(struct tool_preprocess *p, int opt, const char *arg);

/* tool_option_values says in words which values preprocessing option opt
 * takes (for a usage error's message), or returns NULL for another
 * option. */
const char *tool_option_values(int opt);

/* tool_rounding_name returns the word for enum fprep_rounding value
 * rounding ("float", "opencv"), or "?". */
const char *tool_rounding_name(int rounding);

/* tool_preprocess_apply copies the fields set in *p into req. */
void tool_preprocess_apply(const struct tool_preprocess *p, fprep_request *req);

/* tool_preprocess_usage prints one line per shared option, its words and
 * its default (fprep_request_init's), each starting with indent spaces
 * and its description at column width. */
void tool_preprocess_usage(FILE *f, int indent, int width);

/* TOOL_URLS_SIZE: room for the daemon URLs of --socket. */
#define TOOL_URLS_SIZE 4096

/* tool_socket adds url, or a comma-separated list of URLs, to list (size
 * bytes, "" at first), the form fprep_client_open takes for several
 * daemons. Returns 0 or -1 when it does not fit. */
int tool_socket(char *list, size_t size, const char *url);

/* TOOL_CONNECT_OPTIONS: the struct option entries of --socket,
 * --trust-socket-owner, --output and --timeout (tool_connect_option), for
 * the commands that take them all. */
/* clang-format off */
#define TOOL_CONNECT_OPTIONS                                                   \
	{"socket", required_argument, NULL, TOOL_OPT_SOCKET},                  \
	{"trust-socket-owner", required_argument, NULL, TOOL_OPT_TRUST_OWNER}, \
	{"output", required_argument, NULL, 'o'},                              \
	{"timeout", required_argument, NULL, TOOL_OPT_TIMEOUT}
/* clang-format on */

/* tool_connect: the options of the CLI's commands that talk to a daemon
 * and write a file. Zero-initialise before use. */
struct tool_connect {
	const char *url;           /* urls once --socket was given, else NULL */
	const char *trust_owner;   /* --trust-socket-owner USER, or NULL */
	const char *out;           /* -o/--output FILE, or NULL */
	int timeout_ms;            /* --timeout MS (> 0), or the caller's */
	char urls[TOOL_URLS_SIZE]; /* the --socket URLs, comma-separated */
};

/* tool_connect_option applies option opt with argument arg to *c: 'o'
 * (--output), TOOL_OPT_SOCKET (tool_socket), TOOL_OPT_TRUST_OWNER and
 * TOOL_OPT_TIMEOUT (a whole number of milliseconds, 1..INT32_MAX, nothing
 * after it). Returns 0, -1 when arg is not a valid value for opt, or 1
 * when opt is not one of these. */
int tool_connect_option(struct tool_connect *c, int opt, const char *arg);

/* tool_option_name returns the long name of option value opt in the
 * getopt_long table options (ended by a NULL name), or "?". */
const char *tool_option_name(const struct option *options, int opt);

/* tool_own_fn applies option opt of a command's own, with argument arg
 * (NULL for an option without one), to spec. Returns 0, -1 when arg is
 * not a valid value for opt, TOOL_REFUSED after printing why opt does not
 * apply, or 1 when opt is not one of the command's own. */
typedef int tool_own_fn(void *spec, int opt, const char *arg);
#define TOOL_REFUSED (-2)

/* tool_cli_parse parses the options of CLI command cmd (argv[0] is cmd)
 * with getopt_long's table options ("o:h" the short ones): -h/--help, then
 * own(spec, ...) when own is not NULL, then tool_connect_option into
 * *conn and tool_preprocess_option into *pre. Returns the index of the
 * first operand, -1 after printing a usage error on stderr ("frameprep
 * CMD: bad option", "bad value ... for --NAME"), or -2 for --help. Not
 * reentrant (getopt_long's globals). */
int tool_cli_parse(const char *cmd, int argc, char **argv,
                   const struct option *options, struct tool_connect *conn,
                   struct tool_preprocess *pre, tool_own_fn *own, void *spec);

#endif /* FPREP_TOOL_OPTIONS_H */
