/*
 * rules.c: the request rules that more than one side decides, each once.
 *
 * The design is simple: a rule that the C client, the Python package and
 * the daemon all need is a function here, public, and every one of them
 * calls it instead of deciding again: which requests may come through a
 * doorbell entry (the daemon refuses the others with the same sentence
 * the client would give) and what the daemon's INFO text says its limits
 * are. The tensor's shape (fprep_tensor_shape, protocol.c) and the
 * letterbox fit (fprep_fit_compute, ops_cpu.c) are the other two; they
 * live beside the codec and the reference ops that use them.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"

int fprep_doorbell_check(const fprep_request *req, char *why, size_t why_size)
{
	const char *text;

	if (req->kind != FPREP_KIND_FRAME && req->kind != FPREP_KIND_ECHO)
		text = "only FRAME and ECHO requests come that way";
	else if (req->input_loc == FPREP_LOC_INLINE)
		text = "input_loc: inline through a doorbell: the frame must "
		       "be in a region (SHM or CUDA)";
	else if (req->output_loc == FPREP_LOC_INLINE)
		text = "output_loc: inline through a doorbell: the reply in "
		       "the entry carries no payload, so the tensor must go "
		       "to a region (SHM or CUDA)";
	else
		return FPREP_OK;
	if (why == NULL || why_size == 0)
		return FPREP_EINVAL;
	if (req->kind != FPREP_KIND_FRAME && req->kind != FPREP_KIND_ECHO)
		snprintf(why, why_size, "kind: %u through a doorbell: %s",
		         req->kind, text);
	else
		snprintf(why, why_size, "%s", text);
	return FPREP_EINVAL;
}

/* rules_info_value parses the unsigned value of "key: value" in the INFO
 * text into *v; returns 0, or -1 when the key is missing or its value is
 * not a number of at most max. */
static int rules_info_value(const char *text, const char *key, uint64_t max,
                            uint64_t *v)
{
	size_t klen = strlen(key);
	const char *p = text;
	unsigned long long x;
	char *end;

	for (; p != NULL; p = strchr(p, '\n'), p = p != NULL ? p + 1 : NULL) {
		if (strncmp(p, key, klen) != 0 || strncmp(p + klen, ": ", 2))
			continue;
		errno = 0;
		x = strtoull(p + klen + 2, &end, 10);
		if (end == p + klen + 2 || (*end != '\n' && *end != '\0') ||
		    errno != 0 || x > max)
			return -1;
		*v = x;
		return 0;
	}
	return -1;
}

/* rules_told: the limits that older daemons, or daemons without a
 * feature, do not tell, and their fields (size: 4 or 8 bytes). Missing,
 * each is 0: for ROIS and BATCH (max_elements, max_batch_bytes) none
 * accepted; for the JPEG caps not known; for video streams no streams
 * (max_video_sessions: not told, a CPU daemon's or an older one's). */
struct rules_limit {
	const char *key;
	size_t offset;
	size_t size;
};
#define RULES_FIELD(f)                                                         \
#f, offsetof(fprep_limits, f), sizeof(((fprep_limits *)0)->f)
static const struct rules_limit rules_told[] = {
        {RULES_FIELD(max_elements)},        {RULES_FIELD(max_batch_bytes)},
        {RULES_FIELD(max_jpeg_scans)},      {RULES_FIELD(max_jpeg_scan_pixels)},
        {RULES_FIELD(max_packet_bytes)},    {RULES_FIELD(max_streams_per_conn)},
        {RULES_FIELD(max_streams_per_uid)}, {RULES_FIELD(max_stream_frames)},
        {RULES_FIELD(max_video_sessions)},
};
#undef RULES_FIELD

int fprep_limits_parse(const char *text, fprep_limits *lim)
{
	uint64_t w, h, ow, oh, v;

	memset(lim, 0, sizeof(*lim));
	if (text == NULL ||
	    rules_info_value(text, "max_width", UINT32_MAX, &w) ||
	    rules_info_value(text, "max_height", UINT32_MAX, &h) ||
	    rules_info_value(text, "max_frame_bytes", UINT64_MAX,
	                     &lim->max_frame_bytes) ||
	    rules_info_value(text, "max_out_width", UINT32_MAX, &ow) ||
	    rules_info_value(text, "max_out_height", UINT32_MAX, &oh) ||
	    rules_info_value(text, "max_tensor_bytes", UINT64_MAX,
	                     &lim->max_tensor_bytes)) {
		memset(lim, 0, sizeof(*lim));
		return FPREP_EPROTO;
	}
	lim->max_width = (uint32_t)w;
	lim->max_height = (uint32_t)h;
	lim->max_out_width = (uint32_t)ow;
	lim->max_out_height = (uint32_t)oh;
	/* The limits a daemon may not tell are 0 when it does not. */
	for (size_t i = 0; i < sizeof(rules_told) / sizeof(rules_told[0]);
	     i++) {
		const struct rules_limit *t = &rules_told[i];
		uint8_t *field = (uint8_t *)lim + t->offset;
		uint32_t narrow;

		if (rules_info_value(text, t->key,
		                     t->size == 8 ? UINT64_MAX : UINT32_MAX,
		                     &v) != 0)
			v = 0;
		narrow = (uint32_t)v;
		memcpy(field, t->size == 8 ? (void *)&v : (void *)&narrow,
		       t->size);
	}
	return FPREP_OK;
}
