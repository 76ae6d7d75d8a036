/*
 * region.c: client-side shared-memory regions (fprep_region_*).
 *
 * The design is simple: create a POSIX shared-memory object with a unique
 * name and mode 0600, size it, map it, ask the daemon to REGISTER it (the
 * daemon maps it by name), then unlink the name. From then on the memory is
 * shared by exactly the two mappings and disappears with the last of them,
 * so a crashed client or daemon leaves nothing in /dev/shm.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "frameprep/frameprep.h"

struct fprep_region {
	fprep_client *client;
	void *base;
	size_t size;
	uint32_t id;
};

static atomic_uint region_counter;

int fprep_region_open(fprep_region **rp, fprep_client *client, size_t size)
{
	fprep_request req;
	fprep_result res;
	fprep_region *r;
	char name[FPREP_REGION_NAME_MAX + 1];
	int fd, err;

	*rp = NULL;
	if (size == 0)
		return FPREP_EINVAL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return FPREP_ENOMEM;
	snprintf(name, sizeof(name), "/frameprep-%ld-%u", (long)getpid(),
	         atomic_fetch_add(&region_counter, 1));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = FPREP_EREGION;
		goto err_alloc;
	}
	if (ftruncate(fd, (off_t)size) != 0) {
		err = FPREP_EREGION;
		goto err_fd;
	}
	r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->base == MAP_FAILED) {
		err = errno == ENOMEM ? FPREP_ENOMEM : FPREP_EREGION;
		goto err_fd;
	}
	r->size = size;
	r->client = client;

	memset(&req, 0, sizeof(req));
	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_REGISTER;
	req.region_size = size;
	snprintf(req.region_name, sizeof(req.region_name), "%s", name);
	err = fprep_client_request(client, &req, NULL, &res);
	if (err)
		goto err_map;
	err = (int)res.header.status;
	r->id = res.header.region_id;
	fprep_result_fini(&res);
	if (err)
		goto err_map;
	if (r->id == 0) {
		err = FPREP_EPROTO;
		goto err_map;
	}
	shm_unlink(name);
	close(fd);
	*rp = r;
	return 0;

err_map:
	munmap(r->base, size);
err_fd:
	close(fd);
	shm_unlink(name);
err_alloc:
	free(r);
	return err;
}

void fprep_region_close(fprep_region *r)
{
	fprep_request req;
	fprep_result res;

	if (r == NULL)
		return;
	memset(&req, 0, sizeof(req));
	req.version = FPREP_PROTOCOL_VERSION;
	req.kind = FPREP_KIND_UNREGISTER;
	req.region_id = r->id;
	if (fprep_client_request(r->client, &req, NULL, &res) == 0)
		fprep_result_fini(&res);
	munmap(r->base, r->size);
	free(r);
}

void *fprep_region_base(const fprep_region *r)
{
	return r->base;
}

size_t fprep_region_size(const fprep_region *r)
{
	return r->size;
}

uint32_t fprep_region_id(const fprep_region *r)
{
	return r->id;
}

void fprep_request_set_shm(fprep_request *req, const fprep_region *in,
                           uint64_t in_offset, const fprep_region *out,
                           uint64_t out_offset, uint64_t out_capacity)
{
	req->input_loc = in ? FPREP_LOC_SHM : FPREP_LOC_INLINE;
	req->in_region = in ? in->id : 0;
	req->in_offset = in ? in_offset : 0;
	req->output_loc = out ? FPREP_LOC_SHM : FPREP_LOC_INLINE;
	req->out_region = out ? out->id : 0;
	req->out_offset = out ? out_offset : 0;
	req->out_capacity = out ? out_capacity : 0;
}
