/*
 * client_region.c: client-side shared-memory regions (fprep_region_*).
 *
 * The design is simple: create a POSIX shared-memory object with a unique
 * name and mode 0600, size it, map it, ask the daemon to REGISTER it (the
 * daemon maps it by name), then unlink the name. From then on the memory is
 * shared by exactly the two mappings and disappears with the last of them,
 * so a crashed client or daemon leaves nothing in /dev/shm. A daemon that
 * runs as another user gets one ACL entry for its uid (the kernel's peer
 * credentials of the connection say which): group and others keep no
 * access, and the owner stays the client's user.
 *
 * A CUDA region (fprep_region_open_cuda) is the client's own device
 * memory: the library finds the allocation holding the buffer, its IPC
 * handle and the device's UUID (cuda_ptr.h) and sends them with the
 * buffer's offset in a REGISTER_CUDA; nothing is mapped on this side.
 *
 * This file sits below the route (client.c) and above the doorbell and
 * nng carriers: a region's REGISTER goes through nng, a request in a
 * region's doorbell entry through fprep__client_call_entry. Making room
 * among the client's own regions for the caller's (fprep_region_open) is
 * the route's work, asked through fprep__client_make_room.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/acl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client_conn.h"
#include "client_entry.h"
#include "client_internal.h"
#include "cuda_ptr.h"
#include "frameprep/frameprep.h"

struct fprep_region {
	fprep_client *client;
	void *base;
	size_t size;
	uint32_t id;
	int location;          /* FPREP_LOC_SHM or FPREP_LOC_CUDA */
	uint64_t lost;         /* the client's lost connections at REGISTER */
	int unregistered;      /* fprep_region_unregister was called */
	_Atomic(uint8_t *) db; /* the doorbell area (fprep_region_doorbell) */
	unsigned db_entries;
};

static atomic_uint region_counter;

/* region_grant gives the daemon's user read and write access to the object
 * open on fd when the daemon runs as another user than this process. The
 * daemon's uid comes from the connection's peer credentials (recorded
 * only for a trusted peer, and checked again here: FPREP_EPERM); when no
 * connection has been made yet, an INFO request makes one. */
static int region_grant(fprep_client *client, int fd)
{
	fprep_result res;
	uint64_t uid;
	char text[160];
	acl_t acl;
	int err;

	if (fprep__client_peer_uid(client, &uid) != 0) {
		if (fprep_client_info(client, &res) == 0)
			fprep_result_fini(&res);
		if (fprep__client_peer_uid(client, &uid) != 0)
			return 0; /* tcp://: REGISTER is refused there anyway */
	}
	if (uid == (uint64_t)geteuid())
		return 0;
	/* The connection's peer was checked when it was made; check again
	 * here, where the grant is made, so no path grants an unchecked
	 * user. */
	if (!fprep__client_trusts(client, uid)) {
		snprintf(text, sizeof(text),
		         "refusing to share memory with uid %llu: not a "
		         "trusted owner of the daemon's socket",
		         (unsigned long long)uid);
		return fprep__client_set_error(client, FPREP_EPERM, text);
	}
	snprintf(text, sizeof(text), "u::rw-,u:%llu:rw-,g::---,m::rw-,o::---",
	         (unsigned long long)uid);
	if ((acl = acl_from_text(text)) == NULL)
		return FPREP_ENOMEM;
	err = acl_set_fd(fd, acl) == 0 ? 0 : FPREP_EREGION;
	acl_free(acl);
	return err;
}

int fprep_region_open(fprep_region **rp, fprep_client *client, size_t size)
{
	int err = fprep__region_open(rp, client, size);

	/* The client's own regions (its stages, the doorbell it set up of
	 * itself) count against the daemon's limits on regions: the
	 * caller's region comes first. */
	if (err == FPREP_ELIMIT && fprep__client_make_room(client) > 0)
		err = fprep__region_open(rp, client, size);
	return err;
}

int fprep__region_open(fprep_region **rp, fprep_client *client, size_t size)
{
	fprep_register_request req;
	fprep_result res;
	fprep_region *r;
	char name[FPREP_REGION_NAME_MAX + 1];
	uint64_t gen;
	int fd, err;

	*rp = NULL;
	if (size == 0)
		return FPREP_EINVAL;
	if ((err = fprep__client_check_shm(client)) != 0)
		return err;
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
	if ((err = region_grant(client, fd)) != 0)
		goto err_fd;
	r->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->base == MAP_FAILED) {
		err = errno == ENOMEM ? FPREP_ENOMEM : FPREP_EREGION;
		goto err_fd;
	}
	r->size = size;
	r->client = client;
	r->location = FPREP_LOC_SHM;
	r->lost = fprep__client_conn_lost(client);

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER;
	req.region_size = size;
	snprintf(req.region_name, sizeof(req.region_name), "%s", name);
	err = fprep_client_register(client, &req, &res);
	if (err)
		goto err_map;
	/* The connection the reply came on is counted by now (a REGISTER
	 * that waited for a redial went out on the new one). */
	gen = fprep__client_conn_gen(client);
	err = (int)res.header.status;
	r->id = res.header.region_id;
	/* The daemon's reason (shm_open NAME: No such file or directory,
	 * when it does not see this /dev/shm) is already the client's last
	 * error, worded "server: NAME: ..." as every refusal is. */
	fprep_result_fini(&res);
	if (err)
		goto err_map;
	if (r->id == 0) {
		err = FPREP_EPROTO;
		goto err_map;
	}
	shm_unlink(name);
	close(fd);
	if (fprep__client_add_shm(client, r->id, r->base, r->size, gen) != 0) {
		fprep_region_close(r);
		return FPREP_ENOMEM;
	}
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

int fprep_region_open_cuda(fprep_region **rp, fprep_client *client, void *dptr,
                           size_t size)
{
	char why[FPREP_MESSAGE_SIZE];
	fprep__cuda_ptr ptr;
	fprep_register_request req;
	fprep_result res;
	fprep_region *r;
	int err;

	*rp = NULL;
	if ((err = fprep__client_check_shm(client)) != 0)
		return err;
	err = fprep__cuda_ptr_lookup(dptr, size, &ptr, why, sizeof(why));
	if (err)
		return fprep__client_set_error(client, err, why);
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return FPREP_ENOMEM;
	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER_CUDA;
	req.region_size = size;
	req.cuda_offset = ptr.offset;
	memcpy(req.cuda_handle, ptr.handle, sizeof(req.cuda_handle));
	memcpy(req.cuda_uuid, ptr.uuid, sizeof(req.cuda_uuid));
	r->lost = fprep__client_conn_lost(client);
	err = fprep_client_register(client, &req, &res);
	if (err)
		goto err_alloc;
	err = (int)res.header.status;
	r->id = res.header.region_id;
	if (err)
		fprep__client_set_error(client, err, res.header.message);
	fprep_result_fini(&res);
	if (err)
		goto err_alloc;
	if (r->id == 0) {
		err = FPREP_EPROTO;
		goto err_alloc;
	}
	r->client = client;
	r->base = dptr;
	r->size = size;
	r->location = FPREP_LOC_CUDA;
	*rp = r;
	return 0;

err_alloc:
	free(r);
	return err;
}

void fprep_region_unregister(fprep_region *r)
{
	fprep_register_request req;
	fprep_result res;

	/* In a forked child the parent's region stays registered: the
	 * parent still uses it. */
	if (r->unregistered || fprep__client_forked(r->client))
		return;
	r->unregistered = 1;
	atomic_store(&r->db, NULL);
	if (r->location == FPREP_LOC_SHM)
		fprep__client_remove_shm(r->client, r->id, r->base);
	/* After a lost connection the daemon forgot r, and its id may be
	 * another region's now. */
	if (fprep__client_conn_lost(r->client) != r->lost)
		return;
	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_UNREGISTER;
	req.region_id = r->id;
	if (fprep_client_register(r->client, &req, &res) == 0)
		fprep_result_fini(&res);
}

void fprep_region_close(fprep_region *r)
{
	if (r == NULL)
		return;
	fprep_region_unregister(r);
	if (r->location == FPREP_LOC_SHM)
		munmap(r->base, r->size);
	free(r);
}

int fprep_region_doorbell(fprep_region *r, uint64_t offset, unsigned entries)
{
	fprep_register_request req;
	fprep_result res;
	int err;

	if (r->location != FPREP_LOC_SHM || entries == 0 ||
	    entries > FPREP_DOORBELL_ENTRIES_MAX || offset % 64 != 0 ||
	    offset > r->size ||
	    r->size - offset <
	            FPREP_DOORBELL_HEADER_SIZE +
	                    (size_t)entries * FPREP_DOORBELL_ENTRY_SIZE)
		return fprep__client_set_error(
		        r->client, FPREP_EINVAL,
		        "a doorbell area needs a shared-memory region, 1 to "
		        "64 entries and a 64-byte aligned offset with room "
		        "for them inside the region");
	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_DOORBELL;
	req.region_id = r->id;
	req.doorbell_entries = entries;
	req.doorbell_offset = offset;
	if ((err = fprep_client_register(r->client, &req, &res)) != 0)
		return err;
	err = (int)res.header.status;
	if (err)
		fprep__client_set_error(r->client, err, res.header.message);
	fprep_result_fini(&res);
	if (err)
		return err;
	r->db_entries = entries;
	atomic_store(&r->db, (uint8_t *)r->base + offset);
	return 0;
}

int fprep_region_request(fprep_region *r, unsigned k, fprep_request *req,
                         fprep_result *res)
{
	uint8_t *db = atomic_load(&r->db);
	int err;

	memset(res, 0, sizeof(*res));
	if (r->unregistered || fprep__client_conn_lost(r->client) != r->lost)
		return fprep__client_set_error(
		        r->client, FPREP_EREGION,
		        "the region was unregistered, or the daemon it was "
		        "registered with is gone (restarted): open a new one");
	if (k >= r->db_entries)
		db = NULL;
	err = fprep__client_call_entry(r->client, db, k, r->lost, req, res);
	if (err == FPREP_ETIMEDOUT && db != NULL)
		atomic_store(&r->db, NULL);
	return err;
}

void fprep__region_unmap(fprep_region *r)
{
	if (r->location == FPREP_LOC_SHM)
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

int fprep_region_location(const fprep_region *r)
{
	return r->location;
}

void fprep_request_set_regions(fprep_request *req, const fprep_region *in,
                               uint64_t in_offset, const fprep_region *out,
                               uint64_t out_offset, uint64_t out_capacity)
{
	fprep_request_set_shm(req, in, in_offset, out, out_offset,
	                      out_capacity);
}

void fprep_request_set_shm(fprep_request *req, const fprep_region *in,
                           uint64_t in_offset, const fprep_region *out,
                           uint64_t out_offset, uint64_t out_capacity)
{
	req->input_loc = in ? (uint8_t)in->location : FPREP_LOC_INLINE;
	req->in_region = in ? in->id : 0;
	req->in_offset = in ? in_offset : 0;
	req->output_loc = out ? (uint8_t)out->location : FPREP_LOC_INLINE;
	req->out_region = out ? out->id : 0;
	req->out_offset = out ? out_offset : 0;
	req->out_capacity = out ? out_capacity : 0;
}
