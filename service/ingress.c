/*
 * ingress.c: the REP socket frameprepd listens on (see ingress.h).
 *
 * The socket is cooked REP: the server receives on a pool of contexts, one
 * per request in flight, which bounds the work in flight and gives
 * backpressure (a pipe with no receiving context stops being read). The
 * receive-size bound is set before any listener starts, so no peer can make
 * nng allocate more than the largest frame allowed; an oversized message
 * makes nng close that connection without saying why, so a peer that
 * closes before sending one complete request is logged with the limit.
 *
 * Before a listener binds an ipc:// path, the path is probed with an SP
 * handshake: a process that answers there makes the start fail with
 * "address in use", a socket file nobody listens on is removed, and a path
 * that belongs to another user is refused with a message naming its owner
 * (nng alone would report only EADDRINUSE). nng bounds each handshake to 10 s
 * (not an option): a peer that connects and sends nothing is dropped then, and
 * holds nothing meanwhile, since handshakes run side by side.
 *
 * This needs nng 1.10 or later (the build links 1.11 where the system's is
 * older). nng 1.5.2 (Debian 12) had two bugs any local client could
 * trigger, for which this file carried workarounds that 1.11 does not
 * need (the audit's reproductions, tests/integration/nng_soak.py, show
 * neither): a peer that left during the SP handshake stopped the ipc://
 * listener for good (nng #1518, fixed in 1.6.0; a thread here checked and
 * replaced listeners), and connections closed while a message arrived
 * stopped its pipe reaper, after which every connection leaked its
 * descriptor and nng_close waited forever (closed here on a thread with a
 * deadline).
 */
#include "ingress.h"

#include <errno.h>
#include <inttypes.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/transport/ipc/ipc.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend.h"
#include "frameprep/frameprep.h"
#include "log.h"
#include "metrics.h"

/* SP protocol number of REQ v0, sent in the handshake. */
#define INGRESS_SP_REQ0 0x30
/* The probe before binding: a running daemon answers at once. */
#define INGRESS_PROBE_DEADLINE_MS 1000

/* ingress_handshake connects to the ipc socket at path and completes the
 * SP handshake as a REQ peer, each step bounded by deadline_ms; *connected
 * tells whether the connection was made. Returns 0 when the listener
 * answered, else an errno: that of socket() or connect() (EAGAIN: the
 * connection was not taken in time), EAGAIN when no answer came in time,
 * EPROTO for an answer that is not an SP header. The connection is
 * closed. */
static int ingress_handshake(const char *path, int deadline_ms, int *connected)
{
	static const unsigned char hello[8] = {
	        0, 'S', 'P', 0, 0, INGRESS_SP_REQ0, 0, 0};
	struct timeval tv = {deadline_ms / 1000, (deadline_ms % 1000) * 1000};
	struct sockaddr_un sa;
	unsigned char peer[8];
	ssize_t n;
	int fd, rv = 0;

	*connected = 0;
	if (path[0] == '@' || strlen(path) >= sizeof(sa.sun_path))
		return EINVAL;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	/* SO_SNDTIMEO also bounds connect() on a full backlog. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rv = errno == EINPROGRESS ? EAGAIN : errno;
		close(fd);
		return rv;
	}
	*connected = 1;
	if (send(fd, hello, sizeof(hello), MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(hello)) {
		rv = errno != 0 ? errno : EAGAIN;
	} else {
		n = recv(fd, peer, sizeof(peer), MSG_WAITALL);
		if (n < 0)
			rv = errno == EWOULDBLOCK ? EAGAIN : errno;
		else if (n == 0)
			rv = ECONNRESET;
		else if (n < (ssize_t)sizeof(peer))
			rv = EAGAIN;
		else if (memcmp(peer, hello, 4) != 0)
			rv = EPROTO;
	}
	close(fd);
	return rv;
}

/* ingress_foreign tells whether path exists and belongs to another user
 * than the daemon's, and then names the owner in who: "user alice (uid
 * 1001)". */
static int ingress_foreign(const char *path, char *who, size_t size)
{
	struct passwd pw, *res = NULL;
	struct stat st;
	char buf[1024];

	if (lstat(path, &st) != 0 || st.st_uid == geteuid())
		return 0;
	if (getpwuid_r(st.st_uid, &pw, buf, sizeof(buf), &res) == 0 &&
	    res != NULL)
		snprintf(who, size, "user %s (uid %u)", res->pw_name,
		         (unsigned)st.st_uid);
	else
		snprintf(who, size, "uid %u", (unsigned)st.st_uid);
	return 1;
}

/* ingress_probe_ipc checks the socket path of an ipc:// URL before binding:
 * returns 0 when it is free (absent, or a stale socket file, which is
 * removed), FPREP_EBUSY when a process accepts connections on it,
 * FPREP_EPERM when a stale socket file may not be removed (another user's
 * in a sticky directory), or FPREP_ETRANSPORT. */
static int ingress_probe_ipc(const char *path)
{
	struct stat st;
	int connected, rv;

	rv = ingress_handshake(path, INGRESS_PROBE_DEADLINE_MS, &connected);
	if (connected)
		return FPREP_EBUSY;
	if (rv == EMFILE || rv == ENFILE || rv == ENOMEM || rv == ENOBUFS)
		return FPREP_ETRANSPORT;
	if (rv == ECONNREFUSED && lstat(path, &st) == 0 &&
	    S_ISSOCK(st.st_mode)) {
		if (unlink(path) != 0)
			return errno == EPERM || errno == EACCES
			               ? FPREP_EPERM
			               : FPREP_ETRANSPORT;
		fprep__log(FPREP_LOG_NOTICE,
		           "removed the stale socket file %s (nobody listened "
		           "on it)",
		           path);
		return 0;
	}
	/* Absent, or anything else (not a socket, no permission, abstract
	 * or over-long): nng reports it. */
	return 0;
}

/* ingress_listen creates and starts a listener on url into *out. */
static int ingress_listen(fprep__ingress *in, const char *url, int mode,
                          nng_listener *out)
{
	nng_listener l;
	char who[96];
	int rv;

	if (strncmp(url, "ipc://", 6) == 0) {
		int foreign = ingress_foreign(url + 6, who, sizeof(who));

		rv = ingress_probe_ipc(url + 6);
		if (rv == FPREP_EBUSY && foreign) {
			fprep__log(
			        FPREP_LOG_ERR,
			        "listen %s: %s owns the socket file and a "
			        "process accepts connections on it: not this "
			        "daemon's path (listen on a path in a "
			        "directory only the service user may write, "
			        "as the packaged unit's /run/frameprep/)",
			        url, who);
			return FPREP_EBUSY;
		}
		if (rv == FPREP_EBUSY) {
			fprep__log(FPREP_LOG_ERR,
			           "listen %s: another process (a running "
			           "frameprepd?) accepts connections there: "
			           "address in use",
			           url);
			return FPREP_EBUSY;
		}
		/* Still there: another user's file, or a stale socket of
		 * theirs that a sticky directory keeps. */
		if (foreign && ingress_foreign(url + 6, who, sizeof(who))) {
			fprep__log(
			        FPREP_LOG_ERR,
			        "listen %s: the path belongs to %s, and this "
			        "daemon (uid %u) may not replace it: remove "
			        "it (as its owner or root), or listen on a "
			        "path in a directory only the service user "
			        "may write (as the packaged unit's "
			        "/run/frameprep/)",
			        url, who, (unsigned)geteuid());
			return FPREP_EPERM;
		}
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
	*out = l;
	return 0;
}

/* ingress_max_bytes is the receive limit: the largest message accepted. */
static size_t ingress_max_bytes(const fprep__config *cfg)
{
	return (size_t)cfg->limits.max_frame_bytes + FPREP_REQUEST_HEADER_SIZE;
}

/* ingress_peer_closed logs a peer's connection that closed; with the
 * ingress lock held, on an nng thread. */
static void ingress_peer_closed(fprep__ingress *in, const fprep__peer *peer)
{
	char who[96];

	if (in->closing)
		return;
	if (peer->pid != 0)
		snprintf(who, sizeof(who), "pid %" PRIu64 ", uid %" PRIu64,
		         peer->pid, peer->uid);
	else
		snprintf(who, sizeof(who), "tcp");
	if (peer->requests > 0) {
		fprep__log(FPREP_LOG_DEBUG,
		           "connection %d (%s) closed after %" PRIu64
		           " requests",
		           nng_pipe_id(peer->pipe), who, peer->requests);
		return;
	}
	fprep__log(FPREP_LOG_INFO,
	           "connection %d (%s) closed before one complete request: "
	           "the peer left, or sent a message larger than %zu bytes "
	           "(--max-frame-bytes %" PRIu64 " plus the %d-byte header), "
	           "on which the connection is dropped",
	           nng_pipe_id(peer->pipe), who, ingress_max_bytes(in->cfg),
	           in->cfg->limits.max_frame_bytes, FPREP_REQUEST_HEADER_SIZE);
}

/* ingress_pipe_cb keeps the list of connected peers. It runs on nng's
 * threads and must not touch the socket. When the list cannot grow the peer
 * is not listed: it is still closed by nng_close. */
static void ingress_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	fprep__ingress *in = arg;
	fprep__peer *grown, peer;

	memset(&peer, 0, sizeof(peer));
	peer.pipe = p;
	if (ev == NNG_PIPE_EV_ADD_POST &&
	    nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &peer.pid) == 0)
		(void)nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &peer.uid);
	pthread_mutex_lock(&in->lock);
	if (ev == NNG_PIPE_EV_ADD_POST) {
		if (in->npeers == in->cap) {
			grown = realloc(in->peers,
			                (in->cap * 2 + 16) * sizeof(*grown));
			if (grown != NULL) {
				in->peers = grown;
				in->cap = in->cap * 2 + 16;
			}
		}
		if (in->npeers < in->cap) {
			in->peers[in->npeers++] = peer;
			fprep__metrics_connection(1);
		}
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		for (size_t i = 0; i < in->npeers; i++) {
			if (nng_pipe_id(in->peers[i].pipe) == nng_pipe_id(p)) {
				peer = in->peers[i];
				fprep__metrics_connection(-1);
				ingress_peer_closed(in, &peer);
				in->peers[i] = in->peers[--in->npeers];
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
	int n = 0;

	pthread_mutex_lock(&in->lock);
	n = (int)in->npeers;
	pthread_mutex_unlock(&in->lock);
	return n;
}

void fprep__ingress_request(fprep__ingress *in, nng_pipe pipe)
{
	pthread_mutex_lock(&in->lock);
	for (size_t i = 0; i < in->npeers; i++) {
		if (nng_pipe_id(in->peers[i].pipe) == nng_pipe_id(pipe)) {
			in->peers[i].requests++;
			break;
		}
	}
	pthread_mutex_unlock(&in->lock);
}

void fprep__ingress_tick(fprep__ingress *in)
{
	int fd, err;

	if (!in->is_open)
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	err = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	if ((err == EMFILE || err == ENFILE) && !in->nofiles) {
		fprep__log(FPREP_LOG_ERR,
		           "out of file descriptors (%s): new connections "
		           "cannot be accepted until some close",
		           strerror(err));
		in->nofiles = 1;
	} else if (err == 0 && in->nofiles) {
		fprep__log(FPREP_LOG_NOTICE,
		           "file descriptors available again");
		in->nofiles = 0;
	}
}

void fprep__ingress_close_pipes(fprep__ingress *in)
{
	nng_pipe *copy = NULL;
	size_t n;

	/* Closed outside the lock: nng may run the REM_POST callback on
	 * this thread. */
	pthread_mutex_lock(&in->lock);
	in->closing = 1;
	n = in->npeers;
	if (n > 0)
		copy = malloc(n * sizeof(*copy));
	for (size_t i = 0; copy != NULL && i < n; i++)
		copy[i] = in->peers[i].pipe;
	pthread_mutex_unlock(&in->lock);
	if (copy == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		nng_pipe_close(copy[i]);
	free(copy);
}

int fprep__ingress_open(fprep__ingress *in, const fprep__config *cfg)
{
	int rv;

	memset(in, 0, sizeof(*in));
	in->cfg = cfg;
	if (pthread_mutex_init(&in->lock, NULL) != 0)
		return FPREP_ENOMEM;
	rv = nng_rep0_open(&in->sock);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "nng_rep0_open: %s",
		           nng_strerror(rv));
		pthread_mutex_destroy(&in->lock);
		return FPREP_ETRANSPORT;
	}
	in->is_open = 1;
	rv = nng_socket_set_size(in->sock, NNG_OPT_RECVMAXSZ,
	                         ingress_max_bytes(cfg));
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
		rv = ingress_listen(in, cfg->listen[i], cfg->socket_mode,
		                    &in->listeners[i]);
		if (rv != 0)
			goto err_socket;
		in->nlisteners++;
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
	in->is_open = 0;
	in->nlisteners = 0;
	nng_close(in->sock);
	/* No pipe callback runs after nng_close has returned. */
	free(in->peers);
	in->peers = NULL;
	in->npeers = in->cap = 0;
	pthread_mutex_destroy(&in->lock);
}
