/*
 * ingress.c: the REP socket frameprepd listens on (see ingress.h).
 *
 * The socket is cooked REP: the server receives on a pool of contexts, one
 * per request in flight, which bounds the work in flight and gives
 * backpressure (a pipe with no receiving context stops being read). The
 * receive-size bound is set before any listener starts, so no peer can make
 * nng allocate more than the largest frame allowed; an oversized message
 * makes nng close that connection.
 */
#include "ingress.h"

#include <nng/protocol/reqrep0/rep.h>
#include <string.h>

#include "frameprep/frameprep.h"
#include "log.h"

static int ingress_listen(fprep__ingress *in, const char *url)
{
	nng_listener l;
	int rv;

	rv = nng_listener_create(&l, in->sock, url);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "listen %s: nng_listener_create: %s",
		           url, nng_strerror(rv));
		return FPREP_ETRANSPORT;
	}
	if (strncmp(url, "ipc://", 6) == 0) {
		rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0600);
		if (rv != 0) {
			fprep__log(FPREP_LOG_ERR,
			           "listen %s: NNG_OPT_IPC_PERMISSIONS: %s",
			           url, nng_strerror(rv));
			nng_listener_close(l);
			return FPREP_ETRANSPORT;
		}
	}
	rv = nng_listener_start(l, 0);
	if (rv == NNG_EADDRINUSE) {
		fprep__log(FPREP_LOG_ERR,
		           "listen %s: address in use (NNG_EADDRINUSE): is "
		           "another frameprepd running there?",
		           url);
		nng_listener_close(l);
		return FPREP_EBUSY;
	}
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "listen %s: nng_listener_start: %s",
		           url, nng_strerror(rv));
		nng_listener_close(l);
		return FPREP_ETRANSPORT;
	}
	in->listeners[in->nlisteners++] = l;
	return 0;
}

int fprep__ingress_open(fprep__ingress *in, const fprep__config *cfg)
{
	size_t maxsz;
	int rv;

	memset(in, 0, sizeof(*in));
	rv = nng_rep0_open(&in->sock);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "nng_rep0_open: %s",
		           nng_strerror(rv));
		return FPREP_ETRANSPORT;
	}
	in->is_open = 1;
	maxsz = (size_t)cfg->limits.max_frame_bytes + FPREP_REQUEST_HEADER_SIZE;
	rv = nng_socket_set_size(in->sock, NNG_OPT_RECVMAXSZ, maxsz);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "NNG_OPT_RECVMAXSZ: %s",
		           nng_strerror(rv));
		rv = FPREP_ETRANSPORT;
		goto err_socket;
	}
	for (unsigned i = 0; i < cfg->nlisten; i++) {
		rv = ingress_listen(in, cfg->listen[i]);
		if (rv != 0)
			goto err_socket;
	}
	return 0;

err_socket:
	fprep__ingress_close(in);
	return rv;
}

void fprep__ingress_close(fprep__ingress *in)
{
	if (!in->is_open)
		return;
	nng_close(in->sock);
	in->is_open = 0;
	in->nlisteners = 0;
}
