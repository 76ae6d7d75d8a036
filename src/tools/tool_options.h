/*
 * tool_options.h: the spellings and parsers of the preprocessing options
 * that the frameprep CLI and frameprep-bench share (--size, --format,
 * --matrix, --range, --dtype, --layout, --order, --resize, --mean, --std),
 * so both tools accept
 * and print exactly the same words.
 */
#ifndef FPREP_TOOL_OPTIONS_H
#define FPREP_TOOL_OPTIONS_H

#include <stdint.h>

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

#endif /* FPREP_TOOL_OPTIONS_H */
