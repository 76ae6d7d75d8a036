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
 * In nng 1.5.2 a connection that closes during the SP handshake stops the
 * ipc:// listener from handing new connections to the socket for good (nng
 * issue #1518, fixed in 1.6.0): any local process allowed to connect can
 * do it. The transport still answers the handshake, so the listener check
 * thread connects to each ipc:// listener every --listener-check-ms, as a
 * REQ peer, and waits for the socket to add that connection (its pipe's
 * peer pid is the daemon's own, which keeps it out of the logs). A
 * listener that fails this within INGRESS_CHECK_DEADLINE_MS is retired:
 * its socket file is removed and a new listener with the same options
 * takes the path, while the retired one stays open for the connections it
 * had accepted and is closed once they are gone. nng's own stale-socket
 * check before binding is exactly such an early-closing connection, so the
 * path is probed here the same way before a listener binds; a socket file
 * nobody listens on is removed. nng bounds each handshake to 10 s (fixed
 * in 1.5.2, not an option): a peer that connects and sends nothing is
 * dropped then, and holds nothing meanwhile, since handshakes run side by
 * side.
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
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"
#include "frameprep/frameprep.h"
#include "log.h"
#include "metrics.h"

/* SP protocol number of REQ v0, sent in the handshake. */
#define INGRESS_SP_REQ0 0x30
/* How long each step of a check (connect, send, answer) may take. */
#define INGRESS_CHECK_DEADLINE_MS 1000
/* The probe before binding: a running daemon answers at once. */
#define INGRESS_PROBE_DEADLINE_MS 1000
/* How long nng_close may take before the socket is left to the exit. */
#define INGRESS_CLOSE_DEADLINE_MS 2000

/* ingress_closer: an nng_close running on its own thread. Whoever comes
 * last (the thread, or a waiter that gave up) frees it. */
struct ingress_closer {
	nng_socket sock;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;      /* nng_close returned */
	int abandoned; /* the waiter gave up on it */
};

/* ingress_handshake connects to the ipc socket at path and completes the
 * SP handshake as a REQ peer, each step bounded by deadline_ms; *connected
 * tells whether the connection was made. Returns 0 when the listener
 * answered, else an errno: that of socket() or connect() (EAGAIN: the
 * connection was not taken in time), EAGAIN when no answer came in time,
 * EPROTO for an answer that is not an SP header. The connection is closed,
 * or on success left open in *fdp when fdp is not NULL. */
static int ingress_handshake(const char *path, int deadline_ms, int *connected,
                             int *fdp)
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
	/* Closing after the peer's header left no handshake unfinished:
	 * ours is in its buffer. */
	if (rv == 0 && fdp != NULL)
		*fdp = fd;
	else
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

	rv = ingress_handshake(path, INGRESS_PROBE_DEADLINE_MS, &connected,
	                       NULL);
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

	if (in->closing || (peer->pid != 0 && peer->pid == in->self_pid))
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
	peer.listener = nng_listener_id(nng_pipe_listener(p));
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
			if (peer.pid != in->self_pid)
				fprep__metrics_connection(1);
		}
		if (peer.pid == in->self_pid)
			in->self_added++;
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		for (size_t i = 0; i < in->npeers; i++) {
			if (nng_pipe_id(in->peers[i].pipe) == nng_pipe_id(p)) {
				peer = in->peers[i];
				if (peer.pid != in->self_pid)
					fprep__metrics_connection(-1);
				ingress_peer_closed(in, &peer);
				in->peers[i] = in->peers[--in->npeers];
				break;
			}
		}
		/* Every connection is reported, the check's own too: a
		 * client in this process (a test, an embedding program)
		 * shares its pid. */
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

	/* The check's own connection counts as well: it closes within its
	 * deadline, and a client in this process shares the pid. */
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

/* ingress_check_handshake connects to the listener at path as a REQ peer
 * and waits until the socket has added the connection: the handshake
 * alone is answered by nng's transport even after the listener stopped
 * handing connections to the socket. Returns 0 or an errno, as
 * ingress_handshake does. */
static int ingress_check_handshake(fprep__ingress *in, const char *path,
                                   int *connected)
{
	const struct timespec tick = {0, 2000000};
	uint64_t added;
	int fd, rv;

	pthread_mutex_lock(&in->lock);
	added = in->self_added;
	pthread_mutex_unlock(&in->lock);
	rv = ingress_handshake(path, INGRESS_CHECK_DEADLINE_MS, connected, &fd);
	if (rv != 0)
		return rv;
	rv = EAGAIN;
	for (int t = 0; t < INGRESS_CHECK_DEADLINE_MS / 2 && rv != 0; t++) {
		pthread_mutex_lock(&in->lock);
		if (in->self_added != added)
			rv = 0;
		pthread_mutex_unlock(&in->lock);
		if (rv != 0)
			nanosleep(&tick, NULL);
	}
	close(fd);
	return rv;
}

/* ingress_close_retired closes retired listener r. nng removes the
 * socket file of a listener it closes, by name: the file of the listener
 * now serving the path is kept under a second name meanwhile and put
 * back. */
static void ingress_close_retired(fprep__ingress *in, unsigned r)
{
	const char *path = in->cfg->listen[in->retired[r].index] + 6;
	char keep[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	int kept;

	kept = snprintf(keep, sizeof(keep), "%s.keep", path) <
	       (int)sizeof(keep);
	if (kept) {
		(void)unlink(keep);
		kept = link(path, keep) == 0;
	}
	nng_listener_close(in->retired[r].l);
	if (kept && rename(keep, path) != 0)
		(void)unlink(keep);
	in->nretired--;
	memmove(&in->retired[r], &in->retired[r + 1],
	        (in->nretired - r) * sizeof(in->retired[0]));
}

/* ingress_retire takes the stuck listener i off its path, which a new
 * listener then takes, and keeps it open for the connections it had
 * accepted: the oldest retired listener is closed when there are too
 * many. */
static void ingress_retire(fprep__ingress *in, unsigned i)
{
	if (in->nretired == FPREP__MAX_RETIRED) {
		fprep__log(FPREP_LOG_WARNING,
		           "listen %s: %d stuck listeners kept: closing the "
		           "oldest, which drops its connections",
		           in->cfg->listen[i], FPREP__MAX_RETIRED);
		ingress_close_retired(in, 0);
	}
	(void)unlink(in->cfg->listen[i] + 6);
	in->retired[in->nretired].l = in->listeners[i];
	in->retired[in->nretired].index = i;
	in->nretired++;
	in->listeners[i] = (nng_listener)NNG_LISTENER_INITIALIZER;
}

/* ingress_reap_retired closes the retired listeners that have no
 * connection left. */
static void ingress_reap_retired(fprep__ingress *in)
{
	for (unsigned r = 0; r < in->nretired;) {
		int id = nng_listener_id(in->retired[r].l), busy = 0;

		pthread_mutex_lock(&in->lock);
		for (size_t k = 0; k < in->npeers && !busy; k++)
			busy = in->peers[k].listener == id;
		pthread_mutex_unlock(&in->lock);
		if (busy)
			r++;
		else
			ingress_close_retired(in, r);
	}
}

/* ingress_check_listener checks the ipc:// listener i (see the top of the
 * file) and recreates it when it does not answer; on the check thread. */
static void ingress_check_listener(fprep__ingress *in, unsigned i)
{
	const char *url = in->cfg->listen[i];
	int connected, rv;

	if (nng_listener_id(in->listeners[i]) > 0) {
		rv = ingress_check_handshake(in, url + 6, &connected);
		if (rv == EMFILE || rv == ENFILE) {
			if (!in->check_nofiles)
				fprep__log(FPREP_LOG_ERR,
				           "listen %s: out of file descriptors "
				           "(%s): new connections cannot be "
				           "accepted until some close",
				           url, strerror(rv));
			in->check_nofiles = 1;
			return;
		}
		if (rv == 0) {
			if (in->check_nofiles)
				fprep__log(FPREP_LOG_NOTICE,
				           "listen %s: file descriptors "
				           "available again",
				           url);
			in->check_nofiles = 0;
			return;
		}
		if (rv == ENOMEM || rv == ENOBUFS)
			return; /* the check itself could not run */
		if (connected)
			fprep__log(
			        FPREP_LOG_WARNING,
			        "listen %s: the listener stopped accepting "
			        "connections (the check's connection was "
			        "not taken within %d ms; nng 1.5.2 does this "
			        "after a peer leaves during the handshake): "
			        "starting a new one on the path; the "
			        "connections it had stay",
			        url, INGRESS_CHECK_DEADLINE_MS);
		else
			fprep__log(FPREP_LOG_WARNING,
			           "listen %s: the check cannot connect (%s): "
			           "starting a new listener on the path; the "
			           "connections the old one had stay",
			           url, strerror(rv));
		ingress_retire(in, i);
	}
	rv = ingress_listen(in, url, in->cfg->socket_mode, &in->listeners[i]);
	if (rv == 0) {
		fprep__log(FPREP_LOG_NOTICE, "listen %s: listening again", url);
		in->check_failed[i] = 0;
	} else if (!in->check_failed[i]) {
		fprep__log(FPREP_LOG_ERR,
		           "listen %s: could not listen again: retrying every "
		           "%d ms",
		           url, in->cfg->listener_check_ms);
		in->check_failed[i] = 1;
	}
}

/* ingress_check_main is the listener check thread. */
static void *ingress_check_main(void *arg)
{
	fprep__ingress *in = arg;
	int period_ms = in->cfg->listener_check_ms;
	struct timespec ts;
	uint64_t next;

	pthread_mutex_lock(&in->check_lock);
	while (!in->check_stop) {
		next = fprep__now_ns() + (uint64_t)period_ms * 1000000u;
		ts.tv_sec = (time_t)(next / 1000000000u);
		ts.tv_nsec = (long)(next % 1000000000u);
		while (!in->check_stop &&
		       pthread_cond_timedwait(&in->check_cond, &in->check_lock,
		                              &ts) != ETIMEDOUT)
			;
		if (in->check_stop)
			break;
		pthread_mutex_unlock(&in->check_lock);
		for (unsigned i = 0; i < in->nlisteners; i++)
			if (strncmp(in->cfg->listen[i], "ipc://", 6) == 0)
				ingress_check_listener(in, i);
		ingress_reap_retired(in);
		pthread_mutex_lock(&in->check_lock);
	}
	pthread_mutex_unlock(&in->check_lock);
	return NULL;
}

/* ingress_check_start starts the check thread when there is an ipc://
 * listener to check. */
static int ingress_check_start(fprep__ingress *in)
{
	pthread_condattr_t attr;
	unsigned nipc = 0;
	int rv;

	for (unsigned i = 0; i < in->nlisteners; i++)
		nipc += strncmp(in->cfg->listen[i], "ipc://", 6) == 0;
	if (in->cfg->listener_check_ms == 0 || nipc == 0)
		return 0;
	if (pthread_mutex_init(&in->check_lock, NULL) != 0)
		return FPREP_ENOMEM;
	if (pthread_condattr_init(&attr) != 0 ||
	    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&in->check_cond, &attr) != 0) {
		pthread_mutex_destroy(&in->check_lock);
		return FPREP_ENOMEM;
	}
	pthread_condattr_destroy(&attr);
	in->check_stop = 0;
	rv = pthread_create(&in->check_thread, NULL, ingress_check_main, in);
	if (rv != 0) {
		pthread_cond_destroy(&in->check_cond);
		pthread_mutex_destroy(&in->check_lock);
		fprep__log(FPREP_LOG_ERR, "listener check thread: %s",
		           strerror(rv));
		return FPREP_ENOMEM;
	}
	in->check_running = 1;
	return 0;
}

/* ingress_check_stop stops and joins the check thread. Idempotent. */
static void ingress_check_stop(fprep__ingress *in)
{
	if (!in->check_running)
		return;
	pthread_mutex_lock(&in->check_lock);
	in->check_stop = 1;
	pthread_cond_signal(&in->check_cond);
	pthread_mutex_unlock(&in->check_lock);
	pthread_join(in->check_thread, NULL);
	pthread_cond_destroy(&in->check_cond);
	pthread_mutex_destroy(&in->check_lock);
	in->check_running = 0;
}

void fprep__ingress_close_pipes(fprep__ingress *in)
{
	nng_pipe *copy = NULL;
	size_t n;

	ingress_check_stop(in);
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
	in->self_pid = (uint64_t)getpid();
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
	rv = ingress_check_start(in);
	if (rv != 0)
		goto err_socket;
	return 0;

err_socket:
	(void)fprep__ingress_close(in);
	return rv;
}

static void ingress_closer_free(struct ingress_closer *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void *ingress_closer_main(void *arg)
{
	struct ingress_closer *c = arg;
	int abandoned;

	nng_close(c->sock);
	pthread_mutex_lock(&c->lock);
	c->done = 1;
	abandoned = c->abandoned;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	if (abandoned)
		ingress_closer_free(c);
	return NULL;
}

/* ingress_close_bounded runs nng_close(sock) and waits for it at most
 * deadline_ms. Returns 0 once it returned, or FPREP_ETIMEDOUT: it goes on
 * on a detached thread that nobody waits for. */
static int ingress_close_bounded(nng_socket sock, int deadline_ms)
{
	struct ingress_closer *c = calloc(1, sizeof(*c));
	pthread_condattr_t attr;
	struct timespec ts;
	pthread_t thread;
	uint64_t end;
	int rv = 0;

	if (c == NULL || pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		nng_close(sock);
		return 0;
	}
	if (pthread_condattr_init(&attr) != 0 ||
	    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&c->cond, &attr) != 0) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		nng_close(sock);
		return 0;
	}
	pthread_condattr_destroy(&attr);
	c->sock = sock;
	if (pthread_create(&thread, NULL, ingress_closer_main, c) != 0) {
		ingress_closer_free(c);
		nng_close(sock);
		return 0;
	}
	end = fprep__now_ns() + (uint64_t)deadline_ms * 1000000u;
	ts.tv_sec = (time_t)(end / 1000000000u);
	ts.tv_nsec = (long)(end % 1000000000u);
	pthread_mutex_lock(&c->lock);
	while (!c->done && rv != ETIMEDOUT)
		rv = pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	if (!c->done) {
		c->abandoned = 1;
		pthread_mutex_unlock(&c->lock);
		pthread_detach(thread);
		return FPREP_ETIMEDOUT;
	}
	pthread_mutex_unlock(&c->lock);
	pthread_join(thread, NULL);
	ingress_closer_free(c);
	return 0;
}

int fprep__ingress_close(fprep__ingress *in)
{
	if (!in->is_open)
		return 0;
	ingress_check_stop(in);
	in->is_open = 0;
	in->nlisteners = 0;
	if (ingress_close_bounded(in->sock, INGRESS_CLOSE_DEADLINE_MS) != 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "shutdown: nng_close did not return within %d ms "
		           "(nng 1.5.2 waits forever for a connection that was "
		           "closed while a message was arriving on it): the "
		           "socket is left to the process exit",
		           INGRESS_CLOSE_DEADLINE_MS);
		/* Pipe callbacks may still come: they find no one to tell,
		 * and the peer list and its lock stay. */
		fprep__ingress_on_close(in, NULL, NULL);
		return FPREP_ETIMEDOUT;
	}
	/* No pipe callback runs after nng_close has returned. */
	free(in->peers);
	in->peers = NULL;
	in->npeers = in->cap = 0;
	pthread_mutex_destroy(&in->lock);
	return 0;
}
