/*
 * server.h: frameprepd's event loop: the request state machine on a pool
 * of nng contexts, the hand-off to the backend, signals and the ordered
 * shutdown.
 */
#ifndef FPREP_SERVICE_SERVER_H
#define FPREP_SERVICE_SERVER_H

#include "backend.h"
#include "config.h"

/* fprep__server_run listens on cfg's URLs and serves requests with
 * backend on the calling thread (which becomes the loop thread) until
 * SIGINT or SIGTERM, or until a job reports a fatal device error. It takes
 * ownership of backend and closes it during shutdown. device names the
 * device in logs and INFO ("cpu", "cuda:0"). SIGHUP reloads the settings
 * file into *cfg's live settings, on this thread (fprep__config_reload);
 * cfg must outlive the call.
 *
 * Returns the process exit status: 0 after a clean shutdown, 1 when
 * start-up failed, a fatal device error occurred or the loop did not close
 * cleanly. A watchdog ends the process with status 1 if shutdown takes
 * longer than cfg->shutdown_timeout_ms plus a margin; when nng cannot
 * close its socket (see shutdown.c), the process ends with _exit(status)
 * instead of returning. */
int fprep__server_run(fprep__config *cfg, fprep__backend *backend,
                      const char *device);

#endif /* FPREP_SERVICE_SERVER_H */
