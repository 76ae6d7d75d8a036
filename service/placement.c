/*
 * placement.c: where a request's frame and tensor lie, when they lie in a
 * registered region (daemon.h, fprep__place_*): the region a FRAME, ROIS
 * or BATCH names for its input or output, or a stream packet for its
 * tensors, found among its connection's, checked (its kind, the span
 * inside it, an output clear of doorbell areas) and marked in use as the
 * job's. slot.c and streams.c both use it; it answers a request it
 * refuses (answer.c) and calls neither of them. Loop thread.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "daemon.h"

fprep__memreg *fprep__place_region(fprep__slot *s, int loc, uint32_t id,
                                   uint64_t offset, uint64_t len,
                                   const char *field)
{
	char why[FPREP_MESSAGE_SIZE], span[32];
	fprep__memreg *r;
	int rv;

	FPREP__LOOP_ONLY(s->srv);
	r = fprep__regions_find(&s->srv->regions, id, s->pipe);
	if (r == NULL) {
		snprintf(why, sizeof(why),
		         "%s_region %" PRIu32 " is not a region of this "
		         "connection",
		         field, id);
		fprep__answer_fail(s, FPREP_EREGION, why);
		return NULL;
	}
	if (fprep__memreg_on_device(r) != (loc == FPREP_LOC_CUDA)) {
		snprintf(why, sizeof(why),
		         "%s_region %" PRIu32 " is a %s region, not %s", field,
		         id,
		         fprep__memreg_on_device(r) ? "CUDA" : "shared-memory",
		         loc == FPREP_LOC_CUDA ? "CUDA" : "SHM");
		fprep__answer_fail(s, FPREP_EREGION, why);
		return NULL;
	}
	snprintf(span, sizeof(span), "%s_offset + length", field);
	rv = fprep__memreg_span(r, offset, len, span, why, sizeof(why));
	if (rv != 0) {
		fprep__answer_fail(s, rv, why);
		return NULL;
	}
	return r;
}

fprep__memreg *fprep__place_output(fprep__slot *s, int loc, uint32_t id,
                                   uint64_t offset, uint64_t len)
{
	fprep__memreg *out =
	        fprep__place_region(s, loc, id, offset, len, "out");

	if (out == NULL)
		return NULL;
	/* A tensor or reply written over a doorbell area could post
	 * requests of its own there (and one that posts itself again would
	 * be served for ever). */
	if (fprep__doorbells_overlap(&s->srv->doorbells, out,
	                             out->base + offset, len)) {
		fprep__answer_fail(s, FPREP_EINVAL,
		                   "out_offset + length: the output overlaps a "
		                   "doorbell area");
		return NULL;
	}
	/* After the replies written there before (fprep__memreg.replies). */
	(void)atomic_load_explicit(&out->replies, memory_order_acquire);
	return out;
}

void fprep__place_job_output(fprep__slot *s, fprep__memreg *out,
                             uint64_t offset)
{
	fprep__job *job = &s->job;

	FPREP__LOOP_ONLY(s->srv);
	FPREP__ASSERT(job->out_region == NULL);
	job->output = out->base + offset;
	job->output_pinned = out->pinned;
	job->output_device = fprep__memreg_on_device(out);
	job->out_region = out;
	fprep__regions_use(out);
}
