/*
 * trace.h: frameprepd --trace: the times of one request's stages, written
 * as text into its successful reply's message field (see protocol.h).
 */
#ifndef FPREP_SERVICE_TRACE_H
#define FPREP_SERVICE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* fprep__trace_times: one request's host times, CLOCK_MONOTONIC ns. */
typedef struct fprep__trace_times {
	uint64_t rx;   /* nng's callback: the request arrived */
	uint64_t loop; /* the loop thread took it */
	uint64_t seen; /* the loop thread took its completion */
	uint64_t sent; /* the reply is handed to nng */
} fprep__trace_times;

/* fprep__trace_text writes "trace us: loop=A lane=B [h2d=C-D kernel=E-F
 * d2h=G-H ]done=I seen=J sent=K" into buf (size bytes, NUL-terminated):
 * microseconds since t->rx of the loop's intake, the backend's start
 * (job->t_start_ns), the device stages (job->t_stage_ns, left out where
 * the backend gave none), the backend's completion (job->t_end_ns), the
 * loop's and the send. A time before rx counts as rx. */
void fprep__trace_text(char *buf, size_t size, const fprep__trace_times *t,
                       const fprep__job *job);

#endif /* FPREP_SERVICE_TRACE_H */
