/*
 * loop_fixture.h: the parts of frameprepd's loop that the tests of its
 * modules (tests/service) set up around the module they test: the server's
 * loop thread, its libuv loop and event queue, its regions table on a
 * backend (the fake, fake_backend.h), and a region registered in it.
 * Header-only; loop thread (the test's).
 */
#ifndef FPREP_TESTS_LOOP_FIXTURE_H
#define FPREP_TESTS_LOOP_FIXTURE_H

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <uv.h>

#include "daemon.h"
#include "evq.h"
#include "regions.h"

/* loop_fixture_open makes the calling thread srv's loop thread and opens
 * srv's loop, its event queue (each event to drain(ev, data)) and its
 * regions table on backend b (4 regions a pipe, each and all at most
 * region_size bytes; their events FPREP__EV_REGION). Returns 0 or -1. */
static inline int loop_fixture_open(fprep__server *srv, fprep__backend *b,
                                    fprep__evq_drain_cb drain, void *data,
                                    uint64_t region_size)
{
	srv->loop_thread = pthread_self();
	if (uv_loop_init(&srv->loop) != 0 ||
	    fprep__evq_init(&srv->evq, &srv->loop, drain, NULL, data) != 0)
		return -1;
	fprep__regions_init(&srv->regions, b, &srv->evq, FPREP__EV_REGION, 4,
	                    region_size, region_size);
	return 0;
}

/* loop_fixture_registered: fprep__regions_register's result callback;
 * data is the uint32_t that takes the region's id (0 until then). */
static inline void loop_fixture_registered(void *data, int status, uint32_t id,
                                           const char *msg)
{
	(void)msg;
	*(uint32_t *)data = status == FPREP_OK ? id : UINT32_MAX;
}

/* loop_fixture_region registers the shared-memory object name (size bytes)
 * for pipe, as the calling user, in srv's regions table and runs the loop
 * until that is done. Returns the region, or NULL when it was refused. */
static inline fprep__memreg *loop_fixture_region(fprep__server *srv,
                                                 const char *name,
                                                 uint64_t size, uint32_t pipe)
{
	char why[FPREP_MESSAGE_SIZE];
	uint32_t id = 0;

	if (fprep__regions_register(&srv->regions, name, size, pipe,
	                            (uint64_t)getuid(), loop_fixture_registered,
	                            &id, why, sizeof(why)) != 0)
		return NULL;
	while (id == 0)
		uv_run(&srv->loop, UV_RUN_ONCE);
	return id != UINT32_MAX ? fprep__regions_find(&srv->regions, id, pipe)
	                        : NULL;
}

#endif /* FPREP_TESTS_LOOP_FIXTURE_H */
