/*
 * job.c: what a job's request implies, decided once when the loop accepts
 * it (see backend.h): the backends, the reply and the tests read the result
 * from the job; and a stream job's run on its session (video.h), the same
 * for every backend.
 */
#include "backend.h"
#include "clock.h"

int fprep__job_plan(fprep__job *job)
{
	int rv = fprep_tensor_shape(&job->req, job->shape, &job->output_size);

	if (rv != FPREP_OK)
		return rv;
	fprep_transform_compute(&job->req, &job->xf);
	return FPREP_OK;
}

void fprep__video_run(fprep__job *job)
{
	uint64_t t0 = fprep__now_ns();

	job->message[0] = '\0';
	job->t_start_ns = t0;
	job->video->ops->run(job->video, job);
	job->t_end_ns = fprep__now_ns();
	job->t_compute_us = (uint32_t)((job->t_end_ns - t0) / 1000);
}
