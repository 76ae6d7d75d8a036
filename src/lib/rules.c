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

int fprep_limits_parse(const char *text, fprep_limits *lim)
{
	uint64_t w, h, ow, oh;

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
	/* A daemon without ROIS and BATCH tells neither: none accepted. */
	if (rules_info_value(text, "max_elements", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_elements = (uint32_t)w;
	if (rules_info_value(text, "max_batch_bytes", UINT64_MAX,
	                     &lim->max_batch_bytes) != 0)
		lim->max_batch_bytes = 0;
	/* Nor do older daemons tell the JPEG caps: 0, not known. */
	if (rules_info_value(text, "max_jpeg_scans", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_jpeg_scans = (uint32_t)w;
	if (rules_info_value(text, "max_jpeg_scan_pixels", UINT64_MAX,
	                     &lim->max_jpeg_scan_pixels) != 0)
		lim->max_jpeg_scan_pixels = 0;
	/* Nor the video streams' limits: 0, no streams. */
	if (rules_info_value(text, "max_packet_bytes", UINT64_MAX,
	                     &lim->max_packet_bytes) != 0)
		lim->max_packet_bytes = 0;
	if (rules_info_value(text, "max_streams_per_conn", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_streams_per_conn = (uint32_t)w;
	if (rules_info_value(text, "max_streams_per_uid", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_streams_per_uid = (uint32_t)w;
	if (rules_info_value(text, "max_stream_frames", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_stream_frames = (uint32_t)w;
	if (rules_info_value(text, "max_video_sessions", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_video_sessions = (uint32_t)w;
	return FPREP_OK;
}
