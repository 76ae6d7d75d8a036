/*
 * exports.c: the public names (frameprep.h) of what the library keeps
 * internal elsewhere, for programs and bindings that need it: a client's
 * lost connections, forgetting a region, CUDA pointer lookups and the
 * element check. Each is one call of the internal function, so the
 * library's own callers and the public ones share one implementation.
 */
#include <string.h>

#include "client_entry.h"
#include "client_internal.h"
#include "cuda_ptr.h"
#include "frameprep/frameprep.h"
#include "ops.h"

_Static_assert(sizeof(((fprep_cuda_pointer *)0)->handle) ==
                               FPREP__CUDA_IPC_HANDLE_SIZE &&
                       sizeof(((fprep_cuda_pointer *)0)->uuid) ==
                               FPREP__CUDA_UUID_SIZE,
               "fprep_cuda_pointer and fprep__cuda_ptr differ");

uint64_t fprep_client_conn_lost(fprep_client *client)
{
	return fprep__client_conn_lost(client);
}

void fprep_region_forget(fprep_region *r)
{
	if (r != NULL)
		fprep__region_unmap(r);
}

int fprep_cuda_pointer_lookup(const void *dptr, uint64_t size,
                              fprep_cuda_pointer *out, char *msg,
                              size_t msg_size)
{
	fprep__cuda_ptr p;
	int err;

	err = fprep__cuda_ptr_lookup(dptr, size, &p, msg, msg_size);
	if (err)
		return err;
	memcpy(out->handle, p.handle, sizeof(out->handle));
	memcpy(out->uuid, p.uuid, sizeof(out->uuid));
	out->offset = p.offset;
	out->alloc_size = p.alloc_size;
	out->ordinal = p.ordinal;
	return 0;
}

int fprep_cuda_pointer_id(const void *dptr, uint64_t *buffer_id, int *ordinal,
                          char *msg, size_t msg_size)
{
	return fprep__cuda_ptr_id(dptr, buffer_id, ordinal, msg, msg_size);
}

int fprep_element_check(const fprep_request *req, uint32_t k,
                        const fprep_element *el, uint64_t *span, char *msg,
                        size_t msg_size)
{
	return fprep__element_check(req, k, el, span, msg, msg_size);
}
