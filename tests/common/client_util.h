/*
 * client_util.h: requests the tests send through the public client API
 * with their answer reduced to a status and a message. Header-only.
 */
#ifndef FPREP_TESTS_CLIENT_UTIL_H
#define FPREP_TESTS_CLIENT_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "frameprep/frameprep.h"

/* client_outcome reduces a call on c that returned err with the reply
 * *res to a status: err, its message "transport: " and c's last error;
 * else the reply's status, its message the reply's (and *res is
 * finished). The message goes into msg (msg_size bytes). */
static inline int client_outcome(fprep_client *c, int err, fprep_result *res,
                                 char *msg, size_t msg_size)
{
	if (err) {
		snprintf(msg, msg_size, "transport: %s",
		         fprep_client_last_error(c));
		return err;
	}
	snprintf(msg, msg_size, "%s", res->header.message);
	err = (int)res->header.status;
	fprep_result_fini(res);
	return err;
}

/* client_register_cuda sends a REGISTER_CUDA of size bytes at offset in
 * the allocation that handle names (FPREP_CUDA_HANDLE_SIZE bytes) on the
 * device uuid names (FPREP_CUDA_UUID_SIZE bytes). Returns client_outcome's
 * status and message; the region's id goes into *id where id is not NULL
 * (0 when refused). */
static inline int client_register_cuda(fprep_client *c, const uint8_t *handle,
                                       const uint8_t *uuid, uint64_t offset,
                                       uint64_t size, uint32_t *id, char *msg,
                                       size_t msg_size)
{
	fprep_register_request req;
	fprep_result res;
	int err;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_REGISTER_CUDA;
	req.region_size = size;
	req.cuda_offset = offset;
	memcpy(req.cuda_handle, handle, FPREP_CUDA_HANDLE_SIZE);
	memcpy(req.cuda_uuid, uuid, FPREP_CUDA_UUID_SIZE);
	err = fprep_client_register(c, &req, &res);
	if (id != NULL)
		*id = err == 0 ? res.header.region_id : 0;
	return client_outcome(c, err, &res, msg, msg_size);
}

/* client_register_made_up sends client_register_cuda's REGISTER_CUDA
 * with a handle and a device uuid that name nothing (every byte 0x5a,
 * 0xa5): what the daemon checks before it opens anything. */
static inline int client_register_made_up(fprep_client *c, uint64_t offset,
                                          uint64_t size, char *msg,
                                          size_t msg_size)
{
	uint8_t handle[FPREP_CUDA_HANDLE_SIZE], uuid[FPREP_CUDA_UUID_SIZE];

	memset(handle, 0x5a, sizeof(handle));
	memset(uuid, 0xa5, sizeof(uuid));
	return client_register_cuda(c, handle, uuid, offset, size, NULL, msg,
	                            msg_size);
}

/* client_register_send sends the REGISTER, UNREGISTER or DOORBELL request
 * req on c. Returns the reply's status, with its region id in *id and its
 * message in msg (msg_size bytes) where they are not NULL; or -err when the
 * call failed (the message "transport: " and c's last error). */
static inline int client_register_send(fprep_client *c,
                                       fprep_register_request *req,
                                       uint32_t *id, char *msg, size_t msg_size)
{
	fprep_result res;
	int err, status;

	err = fprep_client_register(c, req, &res);
	if (err) {
		if (msg != NULL)
			snprintf(msg, msg_size, "transport: %s",
			         fprep_client_last_error(c));
		return -err;
	}
	status = (int)res.header.status;
	if (id != NULL)
		*id = res.header.region_id;
	if (msg != NULL)
		snprintf(msg, msg_size, "%s", res.header.message);
	fprep_result_fini(&res);
	return status;
}

/* client_unregister sends an UNREGISTER of region id on c; returns as
 * client_register_send. */
static inline int client_unregister(fprep_client *c, uint32_t id, char *msg,
                                    size_t msg_size)
{
	fprep_register_request req;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_UNREGISTER;
	req.region_id = id;
	return client_register_send(c, &req, NULL, msg, msg_size);
}

#endif /* FPREP_TESTS_CLIENT_UTIL_H */
