/*
 * trace.c: the --trace text of a reply (trace.h). Every figure is counted
 * from the request's receipt on nng's thread, so the gaps between them are
 * the hand-offs: nng thread -> loop -> backend thread -> device stages ->
 * completion thread -> loop -> nng.
 */
#include "trace.h"

#include <stdio.h>

static unsigned long trace_us(uint64_t from_ns, uint64_t ns)
{
	return ns > from_ns ? (unsigned long)((ns - from_ns) / 1000) : 0;
}

void fprep__trace_text(char *buf, size_t size, const fprep__trace_times *t,
                       const fprep__job *job)
{
	const uint64_t *g = job->t_stage_ns;
	char dev[192] = "";
	int gpu = 1;

	for (int i = 0; i < FPREP__STAGE_COUNT; i++)
		gpu = gpu && g[i] != 0;
	if (gpu)
		snprintf(dev, sizeof(dev),
		         "h2d=%lu-%lu kernel=%lu-%lu d2h=%lu-%lu ",
		         trace_us(t->rx, g[FPREP__STAGE_H2D0]),
		         trace_us(t->rx, g[FPREP__STAGE_H2D1]),
		         trace_us(t->rx, g[FPREP__STAGE_K0]),
		         trace_us(t->rx, g[FPREP__STAGE_K1]),
		         trace_us(t->rx, g[FPREP__STAGE_D2H0]),
		         trace_us(t->rx, g[FPREP__STAGE_D2H1]));
	snprintf(buf, size,
	         "trace us: loop=%lu lane=%lu %sdone=%lu seen=%lu sent=%lu",
	         trace_us(t->rx, t->loop), trace_us(t->rx, job->t_start_ns),
	         dev, trace_us(t->rx, job->t_end_ns), trace_us(t->rx, t->seen),
	         trace_us(t->rx, t->sent));
}
