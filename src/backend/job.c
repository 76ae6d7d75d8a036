/*
 * job.c: what a job's request implies, decided once when the loop accepts
 * it (see backend.h): the backends, the reply and the tests read the result
 * from the job.
 */
#include "backend.h"

int fprep__job_plan(fprep__job *job)
{
	int rv = fprep_tensor_shape(&job->req, job->shape, &job->output_size);

	if (rv != FPREP_OK)
		return rv;
	fprep_transform_compute(&job->req, &job->xf);
	return FPREP_OK;
}
