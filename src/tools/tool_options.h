/*
 * tool_options.h: the spellings and parsers of the preprocessing options
 * that the frameprep CLI and frameprep-bench share (--size, --format,
 * --dtype, --layout, --order, --resize, --mean, --std), so both tools accept
 * and print exactly the same words.
 */
#ifndef FPREP_TOOL_OPTIONS_H
#define FPREP_TOOL_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

/* The kinds of named option values. */
enum tool_kind {
	TOOL_FORMAT, /* enum fprep_pixel_format: bgr8 rgb8 bgra8 rgba8 gray8 */
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

/* TOOL_URLS_SIZE: room for the daemon URLs of --socket. */
#define TOOL_URLS_SIZE 4096

/* tool_socket adds url, or a comma-separated list of URLs, to list (size
 * bytes, "" at first), the form fprep_client_open takes for several
 * daemons. Returns 0 or -1 when it does not fit. */
int tool_socket(char *list, size_t size, const char *url);

#endif /* FPREP_TOOL_OPTIONS_H */
