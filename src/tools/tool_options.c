/*
 * tool_options.c: the preprocessing options shared by the frameprep CLI and
 * frameprep-bench (see tool_options.h). Each table is indexed by the
 * protocol's enum value; index 0 is unused, as in the protocol.
 */
#include "tool_options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const tool_formats[] = {NULL,    "bgr8",  "rgb8",
                                           "bgra8", "rgba8", "gray8",
                                           "nv12",  "i420",  "yuyv"};
static const char *const tool_matrices[] = {NULL, "bt601", "bt709", "bt2020"};
static const char *const tool_ranges[] = {NULL, "limited", "full"};
static const char *const tool_dtypes[] = {NULL, "f32", "f16", "u8"};
static const char *const tool_layouts[] = {NULL, "nchw", "nhwc"};
static const char *const tool_orders[] = {NULL, "rgb", "bgr", "gray"};
static const char *const tool_resizes[] = {NULL, "letterbox", "stretch"};

static const struct {
	const char *const *names;
	int n;
} tool_tables[] = {
        [TOOL_FORMAT] = {tool_formats, 9}, [TOOL_DTYPE] = {tool_dtypes, 4},
        [TOOL_LAYOUT] = {tool_layouts, 3}, [TOOL_ORDER] = {tool_orders, 4},
        [TOOL_RESIZE] = {tool_resizes, 3}, [TOOL_MATRIX] = {tool_matrices, 4},
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
