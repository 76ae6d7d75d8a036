/*
 * cuda_ptr.c: a client's device buffer as an IPC handle, offset and device
 * UUID (see cuda_ptr.h), through the CUDA driver API opened at run time.
 *
 * The few driver types and constants used are declared here with the
 * values of CUDA's cuda.h (stable ABI since CUDA 4 for these; the _v2 entry
 * points since CUDA 11.4), so that libframeprep builds without the CUDA
 * toolkit.
 */
#include "cuda_ptr.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "frameprep/frameprep.h"

typedef int cu_result; /* CUresult; 0 is CUDA_SUCCESS */
typedef unsigned long long cu_deviceptr;
typedef int cu_device;
typedef void *cu_context;

enum {
	CU_POINTER_ATTRIBUTE_CONTEXT = 1,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
	CU_MEMORYTYPE_DEVICE = 2,
};

static struct {
	pthread_once_t once;
	int ok;
	char why[96];
	cu_result (*init)(unsigned);
	cu_result (*pointer_get_attribute)(void *, int, cu_deviceptr);
	cu_result (*pointer_get_attributes)(unsigned, int *, void **,
	                                    cu_deviceptr);
	cu_result (*mem_get_address_range)(cu_deviceptr *, size_t *,
	                                   cu_deviceptr);
	cu_result (*ipc_get_mem_handle)(void *, cu_deviceptr);
	cu_result (*device_get)(cu_device *, int);
	cu_result (*device_get_uuid)(void *, cu_device);
	cu_result (*ctx_push_current)(cu_context);
	cu_result (*ctx_pop_current)(cu_context *);
	cu_result (*get_error_name)(cu_result, const char **);
} cu = {.once = PTHREAD_ONCE_INIT};

static void cuda_ptr_load(void)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define CU_SYM(field, name) {name, offsetof(__typeof__(cu), field)}
	        CU_SYM(init, "cuInit"),
	        CU_SYM(pointer_get_attribute, "cuPointerGetAttribute"),
	        CU_SYM(pointer_get_attributes, "cuPointerGetAttributes"),
	        CU_SYM(mem_get_address_range, "cuMemGetAddressRange_v2"),
	        CU_SYM(ipc_get_mem_handle, "cuIpcGetMemHandle"),
	        CU_SYM(device_get, "cuDeviceGet"),
	        CU_SYM(device_get_uuid, "cuDeviceGetUuid_v2"),
	        CU_SYM(ctx_push_current, "cuCtxPushCurrent_v2"),
	        CU_SYM(ctx_pop_current, "cuCtxPopCurrent_v2"),
	        CU_SYM(get_error_name, "cuGetErrorName"),
#undef CU_SYM
	};
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (lib == NULL) {
		snprintf(cu.why, sizeof(cu.why),
		         "no CUDA driver in this process (libcuda.so.1)");
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(lib, syms[i].name);
		if (f == NULL) {
			snprintf(cu.why, sizeof(cu.why),
			         "the CUDA driver lacks %s (too old)",
			         syms[i].name);
			return;
		}
		memcpy((char *)&cu + syms[i].off, &f, sizeof(f));
	}
	if (cu.init(0) != 0) {
		snprintf(cu.why, sizeof(cu.why),
		         "cuInit failed: no usable GPU");
		return;
	}
	cu.ok = 1; /* libcuda stays loaded for the life of the process */
}

static const char *cuda_ptr_errname(cu_result r)
{
	const char *s = NULL;

	if (cu.get_error_name(r, &s) != 0 || s == NULL)
		return "CUDA_ERROR_UNKNOWN";
	return s;
}

int fprep__cuda_ptr_lookup(const void *dptr, uint64_t size,
                           fprep__cuda_ptr *out, char *msg, size_t msg_size)
{
	cu_deviceptr p = (cu_deviceptr)(uintptr_t)dptr, base = 0;
	cu_context ctx = NULL, popped;
	unsigned mem_type = 0;
	size_t alloc = 0;
	cu_device dev;
	int ordinal = -1, err = 0;
	cu_result r;

	memset(out, 0, sizeof(*out));
	if (size == 0)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "CUDA region size is 0");
	pthread_once(&cu.once, cuda_ptr_load);
	if (!cu.ok)
		return fprep__fail(msg, msg_size, FPREP_EUNSUPPORTED, "%s",
		                   cu.why);
	if (cu.pointer_get_attribute(
	            &mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != 0 ||
	    mem_type != CU_MEMORYTYPE_DEVICE ||
	    cu.pointer_get_attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) !=
	            0 ||
	    cu.pointer_get_attribute(
	            &ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != 0)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "pointer %p is not CUDA device memory",
		                   dptr);
	if ((r = cu.ctx_push_current(ctx)) != 0)
		return fprep__fail(msg, msg_size, FPREP_ECUDA,
		                   "cuCtxPushCurrent: %s", cuda_ptr_errname(r));
	if ((r = cu.mem_get_address_range(&base, &alloc, p)) != 0) {
		err = fprep__fail(msg, msg_size, FPREP_EINVAL,
		                  "cuMemGetAddressRange(%p): %s", dptr,
		                  cuda_ptr_errname(r));
	} else if (size > alloc - (p - base)) {
		err = fprep__fail(msg, msg_size, FPREP_EINVAL,
		                  "CUDA region of %llu bytes at offset %llu "
		                  "runs past its allocation of %zu bytes",
		                  (unsigned long long)size,
		                  (unsigned long long)(p - base), alloc);
	} else if ((r = cu.ipc_get_mem_handle(out->handle, base)) != 0) {
		err = fprep__fail(msg, msg_size, FPREP_EINVAL,
		                  "cuIpcGetMemHandle: %s (memory from "
		                  "cudaMalloc/cuMemAlloc is needed, not a "
		                  "stream-ordered pool)",
		                  cuda_ptr_errname(r));
	} else if ((r = cu.device_get(&dev, ordinal)) != 0 ||
	           (r = cu.device_get_uuid(out->uuid, dev)) != 0) {
		err = fprep__fail(msg, msg_size, FPREP_ECUDA,
		                  "cuDeviceGetUuid(%d): %s", ordinal,
		                  cuda_ptr_errname(r));
	}
	cu.ctx_pop_current(&popped);
	if (err != 0)
		return err;
	out->offset = p - base;
	out->alloc_size = alloc;
	out->ordinal = ordinal;
	return 0;
}

int fprep__cuda_ptr_id(const void *dptr, uint64_t *buffer_id, int *ordinal,
                       char *msg, size_t msg_size)
{
	int attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
	               CU_POINTER_ATTRIBUTE_BUFFER_ID,
	               CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
	unsigned mem_type = 0;
	unsigned long long id = 0;
	int dev = -1;
	void *data[] = {&mem_type, &id, &dev};
	cu_result r;

	*buffer_id = 0;
	*ordinal = -1;
	pthread_once(&cu.once, cuda_ptr_load);
	if (!cu.ok)
		return fprep__fail(msg, msg_size, FPREP_EUNSUPPORTED, "%s",
		                   cu.why);
	/* Memory the driver does not know reads as type 0, not an error. */
	r = cu.pointer_get_attributes(3, attrs, data,
	                              (cu_deviceptr)(uintptr_t)dptr);
	if (r != 0)
		return fprep__fail(msg, msg_size, FPREP_ECUDA,
		                   "cuPointerGetAttributes(%p): %s", dptr,
		                   cuda_ptr_errname(r));
	if (mem_type != CU_MEMORYTYPE_DEVICE)
		return fprep__fail(msg, msg_size, FPREP_EINVAL,
		                   "pointer %p is not CUDA device memory",
		                   dptr);
	*buffer_id = id;
	*ordinal = dev;
	return 0;
}
