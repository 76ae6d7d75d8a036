/*
 * ingress.c: the REP socket frameprepd listens on (see ingress.h).
 *
 * The socket is cooked REP: the server receives on a pool of contexts, one
 * per request in flight, which bounds the work in flight and gives
 * backpressure (a pipe with no receiving context stops being read). The
 * receive-size bound is set before any listener starts, so no peer can make
 * nng allocate more than the largest frame allowed; an oversized message
 * makes nng close that connection.
 *
 * Before an ipc:// listener binds, the path is probed here rather than by
 * nng: in nng 1.5.2 a connection that closes before the SP handshake stops
 * the listening side from accepting for good (nng issue #1518, fixed in
 * 1.6.0), and nng's own stale-socket check is exactly such a connection. The
 * probe completes the handshake as a REQ peer before closing, which leaves
 * a running daemon unharmed; a socket file nobody listens on is removed.
 */
#include "ingress.h"

#include <errno.h>
#include <nng/protocol/reqrep0/rep.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "frameprep/frameprep.h"
#include "log.h"

/* SP protocol number of REQ v0, sent in the probe's handshake. */
#define INGRESS_SP_REQ0 0x30

/* ingress_probe_ipc checks the socket path of an ipc:// URL before binding:
 * returns 0 when it is free (absent, or a stale socket file, which is
 * removed), FPREP_EBUSY when a process accepts connections on it, or
 * FPREP_ETRANSPORT. */
static int ingress_probe_ipc(const char *path)
{
	static const unsigned char hello[8] = {
	        0, 'S', 'P', 0, 0, INGRESS_SP_REQ0, 0, 0};
	struct timeval tv = {1, 0};
	struct sockaddr_un sa;
	unsigned char peer[8];
	struct stat st;
	int fd, rv;

	if (path[0] == '@' || strlen(path) >= sizeof(sa.sun_path))
		return 0; /* abstract or over-long: nng reports it */
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return FPREP_ETRANSPORT;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		/* Someone listens: finish the SP handshake before closing. */
		if (send(fd, hello, sizeof(hello), MSG_NOSIGNAL) ==
		    (ssize_t)sizeof(hello))
			(void)!recv(fd, peer, sizeof(peer), MSG_WAITALL);
		close(fd);
		return FPREP_EBUSY;
	}
	rv = errno;
	close(fd);
	if (rv == ENOENT)
		return 0;
	if (rv == ECONNREFUSED && lstat(path, &st) == 0 &&
	    S_ISSOCK(st.st_mode)) {
		if (unlink(path) != 0)
			return FPREP_ETRANSPORT;
		fprep__log(FPREP_LOG_NOTICE,
		           "removed the stale socket file %s (nobody listened "
		           "on it)",
		           path);
		return 0;
	}
	/* Anything else (not a socket, no permission): nng reports it. */
	return 0;
}

static int ingress_listen(fprep__ingress *in, const char *url, int mode)
{
	nng_listener l;
	int rv;

	if (strncmp(url, "ipc://", 6) == 0 &&
	    ingress_probe_ipc(url + 6) == FPREP_EBUSY) {
		fprep__log(FPREP_LOG_ERR,
		           "listen %s: another process (a running frameprepd?) "
		           "accepts connections there: address in use",
		           url);
		return FPREP_EBUSY;
	}

	rv = nng_listener_create(&l, in->sock, url);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "listen %s: nng_listener_create: %s",
		           url, nng_strerror(rv));
		return FPREP_ETRANSPORT;
	}
	if (strncmp(url, "ipc://", 6) == 0) {
		rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, mode);
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

/* ingress_pipe_cb keeps the list of connected peers. It runs on nng's
 * threads and must not touch the socket. When the list cannot grow the peer
 * is not listed: it is still closed by nng_close. */
static void ingress_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	fprep__ingress *in = arg;
	nng_pipe *grown;

	pthread_mutex_lock(&in->lock);
	if (ev == NNG_PIPE_EV_ADD_POST) {
		if (in->npipes == in->cap) {
			grown = realloc(in->pipes,
			                (in->cap * 2 + 16) * sizeof(*grown));
			if (grown != NULL) {
				in->pipes = grown;
				in->cap = in->cap * 2 + 16;
			}
		}
		if (in->npipes < in->cap)
			in->pipes[in->npipes++] = p;
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		for (size_t i = 0; i < in->npipes; i++) {
			if (nng_pipe_id(in->pipes[i]) == nng_pipe_id(p)) {
				in->pipes[i] = in->pipes[--in->npipes];
				break;
			}
		}
		if (in->on_close != NULL)
			in->on_close((uint32_t)nng_pipe_id(p),
			             in->on_close_data);
	}
	pthread_mutex_unlock(&in->lock);
}

void fprep__ingress_on_close(fprep__ingress *in, fprep__pipe_cb cb, void *data)
{
	pthread_mutex_lock(&in->lock);
	in->on_close = cb;
	in->on_close_data = data;
	pthread_mutex_unlock(&in->lock);
}

int fprep__ingress_pipes(fprep__ingress *in)
{
	size_t n;

	pthread_mutex_lock(&in->lock);
	n = in->npipes;
	pthread_mutex_unlock(&in->lock);
	return (int)n;
}

void fprep__ingress_close_pipes(fprep__ingress *in)
{
	nng_pipe *copy = NULL;
	size_t n;

	/* Closed outside the lock: nng may run the REM_POST callback on
	 * this thread. */
	pthread_mutex_lock(&in->lock);
	n = in->npipes;
	if (n > 0)
		copy = malloc(n * sizeof(*copy));
	if (copy != NULL)
		memcpy(copy, in->pipes, n * sizeof(*copy));
	pthread_mutex_unlock(&in->lock);
	if (copy == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		nng_pipe_close(copy[i]);
	free(copy);
}

int fprep__ingress_open(fprep__ingress *in, const fprep__config *cfg)
{
	size_t maxsz;
	int rv;

	memset(in, 0, sizeof(*in));
	if (pthread_mutex_init(&in->lock, NULL) != 0)
		return FPREP_ENOMEM;
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
	if ((rv = nng_pipe_notify(in->sock, NNG_PIPE_EV_ADD_POST,
	                          ingress_pipe_cb, in)) != 0 ||
	    (rv = nng_pipe_notify(in->sock, NNG_PIPE_EV_REM_POST,
	                          ingress_pipe_cb, in)) != 0) {
		fprep__log(FPREP_LOG_ERR, "nng_pipe_notify: %s",
		           nng_strerror(rv));
		rv = FPREP_ETRANSPORT;
		goto err_socket;
	}
	for (unsigned i = 0; i < cfg->nlisten; i++) {
		rv = ingress_listen(in, cfg->listen[i], cfg->socket_mode);
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
	/* No pipe callback runs after nng_close has returned. */
	free(in->pipes);
	in->pipes = NULL;
	in->npipes = in->cap = 0;
	pthread_mutex_destroy(&in->lock);
}
