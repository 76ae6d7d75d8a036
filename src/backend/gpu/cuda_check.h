/*
 * cuda_check.h: the one way CUDA runtime and NVRTC calls are checked.
 *
 * FPREP__CUDA(st, call) and FPREP__NVRTC(st, call) evaluate call; on failure
 * they log the call's text, file and line with the error's name and
 * description, record a short "function: errorName" sentence and the code
 * in *st, and yield nonzero. Usage:
 *
 *	if (FPREP__CUDA(&st, cudaMalloc(&p, n)))
 *		goto fail;
 *
 * Errors are translated to enum fprep_err once, here (FPREP_ECUDA,
 * FPREP_ENVRTC), keeping the original name in the text.
 */
#ifndef FPREP_GPU_CUDA_CHECK_H
#define FPREP_GPU_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "log.h"

/* fprep__gpu_status: the last failed CUDA or NVRTC call. err is FPREP_ECUDA
 * or FPREP_ENVRTC (0 when nothing failed), code the library's own error
 * number, text "cudaMemcpyAsync: cudaErrorIllegalAddress". */
typedef struct fprep__gpu_status {
	int err;
	int code;
	char text[128];
} fprep__gpu_status;

/* gpu_check_record fills st from a failed call (the function name is the
 * call text up to its '(') and logs the whole call. */
static inline void gpu_check_record(fprep__gpu_status *st, int err, int code,
                                    const char *name, const char *desc,
                                    const char *call, const char *file,
                                    int line)
{
	size_t n = strcspn(call, "(");
	fprep__log(FPREP_LOG_ERR, "%s:%d: %s failed: %s (%s)", file, line, call,
	           name, desc);
	if (st == NULL)
		return;
	st->err = err;
	st->code = code;
	snprintf(st->text, sizeof st->text, "%.*s: %s", (int)(n < 60 ? n : 60),
	         call, name);
}

/* fprep__cuda_check returns 0 if e is cudaSuccess, else records it. */
static inline int fprep__cuda_check(fprep__gpu_status *st, cudaError_t e,
                                    const char *call, const char *file,
                                    int line)
{
	if (e == cudaSuccess)
		return 0;
	gpu_check_record(st, FPREP_ECUDA, (int)e, cudaGetErrorName(e),
	                 cudaGetErrorString(e), call, file, line);
	return 1;
}

/* fprep__nvrtc_check returns 0 if r is NVRTC_SUCCESS, else records it. */
static inline int fprep__nvrtc_check(fprep__gpu_status *st, nvrtcResult r,
                                     const char *call, const char *file,
                                     int line)
{
	if (r == NVRTC_SUCCESS)
		return 0;
	gpu_check_record(st, FPREP_ENVRTC, (int)r, nvrtcGetErrorString(r),
	                 "NVRTC", call, file, line);
	return 1;
}

#define FPREP__CUDA(st, call)                                                  \
	fprep__cuda_check((st), (call), #call, __FILE__, __LINE__)
#define FPREP__NVRTC(st, call)                                                 \
	fprep__nvrtc_check((st), (call), #call, __FILE__, __LINE__)

#endif /* FPREP_GPU_CUDA_CHECK_H */
