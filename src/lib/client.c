/*
 * client.c: the blocking client of frameprepd.
 *
 * A client is one cooked nng REQ socket dialled synchronously to the
 * daemon. Each request goes through an nng context with its own aio: a
 * blocking call takes a call slot (a context, its aios and its wait for a
 * reply in shared memory) from the client's pool, created on demand up to
 * FPREP_CLIENT_MAX_CALLS and reused, so several threads may make blocking
 * calls on one client at once, and the asynchronous, pipelined API (one
 * context and aio per request in flight) sits beside them on the same
 * socket. With one daemon,
 * resending is off: the daemon sees every request once. With several (a
 * comma-separated list of URLs) the one socket dials them all: nng hands
 * each request to a connection that is free, and resends a request whose
 * connection closed, or that got no reply within half the timeout, to
 * another, so a request may be processed twice but is answered once. A
 * reply is kept in the nng message
 * it arrived in; the result's payload points into it, so a tensor is never
 * copied. nng errors are translated to enum fprep_err here, once, and their
 * text is kept for fprep_client_last_error.
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "client_entry.h"
#include "client_internal.h"
#include "frameprep/frameprep.h"
#include "ops.h"

#define CLIENT_DEFAULT_TIMEOUT_MS 30000
/* Daemons one client may dial. */
#define CLIENT_MAX_DAEMONS 16
/* Shortest resend interval with several daemons. */
#define CLIENT_MIN_RESEND_MS 1000
/* A lost connection is redialled after 20 ms, the wait doubling up to
 * 200 ms while the daemon stays away, so a restarted daemon is reached
 * within 200 ms of its start (the dialers take these from the socket). */
#define CLIENT_RECONNECT_MIN_MS 20
#define CLIENT_RECONNECT_MAX_MS 200

/* The last fprep_client_open failure of each thread (there is no client
 * to keep it in). */
static _Thread_local char client_open_error[512];

/* The last failure of each thread on a client: the client's serial
 * number (0: none) and the sentence. A client's calls may run on several
 * threads at once, so each thread reads its own. */
static _Thread_local struct {
	uint64_t serial;
	char text[256];
} client_last;

/* The deadline of the calling thread's fprep_client_request, which the
 * requests it makes on the way share (serial: its client's, 0: none). */
static _Thread_local struct {
	uint64_t serial;
	nng_time deadline;
} client_outer;

/* Serial numbers of clients, so that a thread's last failure is not
 * read for another client opened at the same address. */
static _Atomic uint64_t client_serials = 1;

/* Forks made since the first client was opened: a child's count differs
 * from that of every client its parent opened (its atfork handler, added
 * once, counts in the child). Such a client is abandoned in the child:
 * its connection, threads and locks are the parent's (the bundled nng
 * resets itself there, deploy/nng-1.11.0-fork-child.patch), so every
 * call on it fails with FPREP_EFORKED and closing it frees nothing. */
static _Atomic unsigned client_fork_gen;
static pthread_once_t client_fork_once = PTHREAD_ONCE_INIT;

static void client_fork_child(void)
{
	atomic_fetch_add_explicit(&client_fork_gen, 1, memory_order_relaxed);
}

static void client_fork_watch(void)
{
	(void)pthread_atfork(NULL, NULL, client_fork_child);
}

/* client_slot: what one blocking call uses, the whole call long: its own
 * nng context, the aio of its send and receive, and the receive of a
 * reply that comes in shared memory (raio) with its wait. Created on
 * demand, up to FPREP_CLIENT_MAX_CALLS, and kept for the next call. */
struct client_slot {
	fprep_client *c;
	nng_ctx ctx;
	nng_aio *aio;
	nng_aio *raio;                /* the reply's receive, with a callback */
	_Atomic uint64_t *reply_word; /* request_id of the awaited header */
	uint64_t reply_id;            /* the awaited request's id */
	_Atomic int reply_state;      /* CLIENT_WAIT_* */
	int raio_busy;                /* raio cancelled, not yet waited for */
	struct client_slot *next;     /* in the free list */
};

/* client_trust: the users whose ipc:// socket (file and peer) a client
 * dials besides its own user and root: the service account, when it
 * exists, and the one the caller named (fprep_client_open_trusting). */
struct client_trust {
	uid_t service;
	int has_service;
	uid_t named;
	int has_named;
};

struct fprep_client {
	nng_socket sock;
	unsigned fork_gen;        /* client_fork_gen when it was opened */
	int timeout_ms;           /* per request, send plus reply */
	uint64_t serial;          /* this client's, for client_last */
	_Atomic uint64_t next_id; /* the next request id */
	_Atomic unsigned refs;    /* 1 until closed, + 1 per pending */

	/* The blocking calls' slots: nslots made, the free ones listed. */
	pthread_mutex_t slot_mtx;
	pthread_cond_t slot_cv;
	struct client_slot *slots[FPREP_CLIENT_MAX_CALLS];
	unsigned nslots;
	struct client_slot *free_slots;

	pthread_mutex_t limits_mtx; /* asking for the limits */
	_Atomic int limits_state;   /* CLIENT_LIMITS_* */
	fprep_limits limits;        /* the daemon's, when CLIENT_LIMITS_KNOWN */
	struct client_trust trust;  /* who may own the daemon's socket */
	unsigned daemons;           /* URLs dialled */
	_Atomic uint64_t
	        peer_uid; /* the daemon's uid + 1 (ipc://), 0 unknown */
	_Atomic uint64_t conn_gen;  /* connections made so far */
	_Atomic uint64_t conn_lost; /* connections lost so far */

	/* The reply in shared memory (protocol.h): the regions this client
	 * registered. */
	pthread_mutex_t shm_mtx;
	struct client_shm *shm; /* nshm entries, under shm_mtx */
	unsigned nshm;
	_Atomic unsigned spin_us; /* poll the reply this long, then sleep */

	/* The doorbell (fprep_client_doorbell): its region and its area, one
	 * entry, used by one blocking call at a time (db_busy); the others
	 * go through nng. db_area NULL: no doorbell, or given up. It is set
	 * up and dropped under db_mtx, and db_region, db_area and db_gen
	 * change only while db_busy is held too, so a call that holds
	 * db_busy sees them stay. db_mode: CLIENT_DB_AUTO (set up by the
	 * first staged call), ON or OFF; db_tried: 1 + the connection on
	 * which the last set-up was tried (0: none), not tried again on it. */
	pthread_mutex_t db_mtx;
	fprep_region *db_region;
	_Atomic(uint8_t *) db_area;
	_Atomic uint64_t db_gen;  /* the connection it was registered on */
	_Atomic uint64_t db_lost; /* conn_lost then: used while unchanged */
	_Atomic uint64_t db_tried;
	_Atomic int db_mode;
	atomic_flag db_busy;

	/* Inline frames staged through shared memory (client_stage.c). */
	struct fprep__stages stages;
	_Atomic int stage_off; /* fprep_client_set_staging(client, 0) */
};

int fprep__client_forked(const fprep_client *c)
{
	return c->fork_gen !=
	       atomic_load_explicit(&client_fork_gen, memory_order_relaxed);
}

/* A call slot's wait for a reply in shared memory: the caller sets
 * WAITING before it posts the receive and leaves it for IDLE (a CAS) when
 * the header arrived; the receive's callback takes WAITING to NNG (a CAS)
 * before it touches the header's memory, so it never touches a header
 * whose caller has left. */
enum { CLIENT_WAIT_IDLE, CLIENT_WAIT_WAITING, CLIENT_WAIT_NNG };

/* client_shm: a shared-memory region this client registered, on its
 * connection gen. */
struct client_shm {
	uint32_t id;
	uint8_t *base;
	size_t size;
	uint64_t gen;
};

static void client_reply_cb(void *arg);
static void client_raio_retire(struct client_slot *s);

/* What the reply aio's callback stores in the awaited request_id when nng
 * delivered the reply (or failed) first: no request has this id. */
#define CLIENT_REPLY_VIA_NNG UINT64_MAX

/* The doorbell's region: its area with one entry fits in a page. */
#define CLIENT_DOORBELL_BYTES 4096

/* The doorbell's mode: set up by the first staged call (the default),
 * set up by fprep_client_doorbell(client, 1), or off. */
enum { CLIENT_DB_AUTO, CLIENT_DB_ON, CLIENT_DB_OFF };

static void client_doorbell_drop(fprep_client *c);

/* Whether the daemon's limits were asked for: not yet, known, or asked
 * without an answer (not asked again). */
enum { CLIENT_LIMITS_UNASKED, CLIENT_LIMITS_KNOWN, CLIENT_LIMITS_UNKNOWN };

/* The service account of the packaged daemon: a socket it owns may be
 * dialled like one of the caller's own. */
#define CLIENT_SERVICE_USER "frameprep"

/* client_error records a sentence about the last failure and returns
 * err. */
static int client_error(fprep_client *c, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int client_error(fprep_client *c, int err, const char *fmt, ...)
{
	va_list ap;

	client_last.serial = c->serial;
	va_start(ap, fmt);
	vsnprintf(client_last.text, sizeof(client_last.text), fmt, ap);
	va_end(ap);
	return err;
}

/* client_error_clear forgets the calling thread's last failure on c. */
static void client_error_clear(fprep_client *c)
{
	client_last.serial = c->serial;
	client_last.text[0] = '\0';
}

/* client_forked_error is FPREP_EFORKED with the sentence that names the
 * fix. */
static int client_forked_error(fprep_client *c)
{
	return client_error(c, FPREP_EFORKED,
	                    "this client was opened before the process forked "
	                    "(it is the parent's): a child process must open "
	                    "a client of its own");
}

int fprep__client_set_error(fprep_client *c, int err, const char *text)
{
	return client_error(c, err, "%s", text);
}

/* client_nng_err translates an nng error. */
static int client_nng_err(int rv)
{
	switch (rv) {
	case NNG_ETIMEDOUT:
		return FPREP_ETIMEDOUT;
	case NNG_ENOMEM:
		return FPREP_ENOMEM;
	case NNG_ECLOSED:
		return FPREP_ECLOSED;
	}
	return FPREP_ETRANSPORT;
}

int fprep_default_url(char *buf, size_t size)
{
	const char *env = getenv(FPREP_SOCKET_ENV);
	const char *dir = getenv("XDG_RUNTIME_DIR");
	int n;

	if (env != NULL && env[0] != '\0')
		n = snprintf(buf, size, "%s", env);
	else if (dir != NULL && dir[0] != '\0')
		n = snprintf(buf, size, "ipc://%s/frameprep.sock", dir);
	else
		n = snprintf(buf, size, "ipc:///tmp/frameprep-%u.sock",
		             (unsigned)getuid());
	if (n < 0 || (size_t)n >= size)
		return FPREP_ELIMIT;
	return FPREP_OK;
}

/* client_open_fail records why fprep_client_open failed and returns
 * err. */
static int client_open_fail(int err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int client_open_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(client_open_error, sizeof(client_open_error), fmt, ap);
	va_end(ap);
	return err;
}

/* client_owner_name writes the user name of uid (or its number). */
static void client_owner_name(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *found = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &found) == 0 &&
	    found != NULL)
		snprintf(buf, size, "%s, uid %u", pw.pw_name, (unsigned)uid);
	else
		snprintf(buf, size, "uid %u", (unsigned)uid);
}

/* client_trust_init fills *t: the service account's uid (when that user
 * exists here) and the user named by name (a user name or a uid; NULL or
 * "": $FRAMEPREP_TRUST_SOCKET_OWNER, else nobody). Returns 0, or
 * FPREP_EINVAL for a name that is no user. */
static int client_trust_init(struct client_trust *t, const char *name)
{
	struct passwd pw, *found = NULL;
	char tmp[1024], *end;
	unsigned long uid;

	memset(t, 0, sizeof(*t));
	if (getpwnam_r(CLIENT_SERVICE_USER, &pw, tmp, sizeof(tmp), &found) ==
	            0 &&
	    found != NULL) {
		t->service = pw.pw_uid;
		t->has_service = 1;
	}
	if (name == NULL || name[0] == '\0')
		name = getenv(FPREP_TRUST_SOCKET_OWNER_ENV);
	if (name == NULL || name[0] == '\0')
		return 0;
	found = NULL;
	if (getpwnam_r(name, &pw, tmp, sizeof(tmp), &found) == 0 &&
	    found != NULL) {
		t->named = pw.pw_uid;
		t->has_named = 1;
		return 0;
	}
	errno = 0;
	uid = strtoul(name, &end, 10);
	if (name[0] >= '0' && name[0] <= '9' && *end == '\0' && errno == 0 &&
	    uid <= (unsigned long)(uid_t)-1 - 1) {
		t->named = (uid_t)uid;
		t->has_named = 1;
		return 0;
	}
	return client_open_fail(FPREP_EINVAL,
	                        "trusting the socket owner '%.100s': no such "
	                        "user",
	                        name);
}

/* client_trusted_owner says whether a socket (its file, or the daemon at
 * its other end) owned by uid may be dialled: it is the caller's, root's,
 * the service account's or the user named to be trusted. Anyone else
 * could have created the path first and would receive the frames. */
static int client_trusted_owner(const struct client_trust *t, uid_t uid)
{
	return uid == 0 || uid == getuid() || uid == geteuid() ||
	       (t->has_service && uid == t->service) ||
	       (t->has_named && uid == t->named);
}

/* client_pipe_added records the daemon's uid when a connection is made
 * (ipc:// only: tcp:// has no peer credentials). nng's thread. */
static void client_pipe_added(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
	fprep_client *c = arg;
	uint64_t uid;

	(void)ev;
	if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &uid) == 0 &&
	    client_trusted_owner(&c->trust, (uid_t)uid))
		atomic_store(&c->peer_uid, uid + 1);
}

uint64_t fprep__client_conn_gen(fprep_client *c)
{
	return atomic_load(&c->conn_gen);
}

/* client_pipe_removed counts a lost connection (the daemon died or
 * restarted), so that a wait for a reply in shared memory, which nng
 * does not end, sees it. nng's thread. */
static void client_pipe_removed(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
	fprep_client *c = arg;

	(void)pipe;
	(void)ev;
	atomic_fetch_add(&c->conn_lost, 1);
}

uint64_t fprep__client_conn_lost(fprep_client *c)
{
	return atomic_load(&c->conn_lost);
}

int fprep__client_trusts(const fprep_client *c, uint64_t uid)
{
	return uid <= (uid_t)-1 && client_trusted_owner(&c->trust, (uid_t)uid);
}

int fprep__client_peer_uid(fprep_client *c, uint64_t *uid)
{
	uint64_t v = atomic_load(&c->peer_uid);

	if (v == 0)
		return FPREP_EUNSUPPORTED;
	*uid = v - 1;
	return 0;
}

/* client_check_ipc checks the socket file of an ipc:// URL before it is
 * dialled (before any byte is sent): that it exists (naming a missing
 * directory), is a socket, and has a trusted owner, whoever gave the URL:
 * anyone could have created the path first (in /tmp, say). */
static int client_check_ipc(const char *url, const char *path,
                            const struct client_trust *trust)
{
	char buf[512], owner[128];
	const char *dir;
	struct stat st;

	if (stat(path, &st) != 0) {
		if (errno != ENOENT)
			return client_open_fail(
			        FPREP_ETRANSPORT,
			        "connecting to %.200s: %.200s: %s", url, path,
			        strerror(errno));
		snprintf(buf, sizeof(buf), "%s", path);
		dir = dirname(buf);
		if (stat(dir, &st) != 0)
			return client_open_fail(
			        FPREP_ETRANSPORT,
			        "connecting to %.200s: the directory %.200s %s",
			        url, dir,
			        errno == ENOENT ? "does not exist"
			                        : strerror(errno));
		return client_open_fail(FPREP_ETRANSPORT,
		                        "connecting to %.200s: no socket at "
		                        "%.200s",
		                        url, path);
	}
	if (!S_ISSOCK(st.st_mode))
		return client_open_fail(FPREP_ETRANSPORT,
		                        "connecting to %.200s: %.200s is not a "
		                        "socket",
		                        url, path);
	if (!client_trusted_owner(trust, st.st_uid)) {
		client_owner_name(st.st_uid, owner, sizeof(owner));
		return client_open_fail(
		        FPREP_EPERM,
		        "refusing %.200s: the socket is owned by %s, not by "
		        "you, root or " CLIENT_SERVICE_USER
		        ", so another user may be listening (to dial it "
		        "anyway, trust that "
		        "owner: " FPREP_TRUST_SOCKET_OWNER_ENV
		        "=USER, or the tools' --trust-socket-owner USER)",
		        path, owner);
	}
	return FPREP_OK;
}

/* client_check_tcp checks that a tcp:// URL names a port. */
static int client_check_tcp(const char *url, const char *hostport)
{
	const char *colon, *bracket = strrchr(hostport, ']');
	char *end;
	unsigned long port;

	colon = strrchr(bracket != NULL ? bracket : hostport, ':');
	if (colon == NULL || colon == hostport)
		return client_open_fail(FPREP_EINVAL,
		                        "'%.200s' has no %s: give "
		                        "tcp://HOST:PORT",
		                        url, colon == NULL ? "port" : "host");
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
	    port == 0 || port > 65535)
		return client_open_fail(FPREP_EINVAL,
		                        "'%.200s' has no valid port: give "
		                        "tcp://HOST:PORT, PORT in 1..65535",
		                        url);
	return FPREP_OK;
}

/* client_check_url checks url as the daemon checks its listen URLs, and
 * the socket an ipc:// URL names, its owner included. */
static int client_check_url(const char *url, const struct client_trust *trust)
{
	if (strncmp(url, "ipc://", 6) == 0 && url[6] != '\0')
		return client_check_ipc(url, url + 6, trust);
	if (strncmp(url, "tcp://", 6) == 0 && url[6] != '\0')
		return client_check_tcp(url, url + 6);
	return client_open_fail(FPREP_EINVAL,
	                        "'%.200s' is not an ipc:// or tcp:// URL", url);
}

/* client_pipe_cb drops a new ipc:// connection whose peer (the process
 * that listens) is not a trusted owner, before anything is sent on it, so
 * a socket replaced after the file's check (or on a redial) is not
 * trusted either; a connection it keeps is counted here (conn_gen),
 * before any request can go out on it, so a reply that came on it finds
 * it counted. nng's thread. */
static void client_pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	fprep_client *c = arg;
	uint64_t uid;

	(void)ev;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) == 0 &&
	    !client_trusted_owner(&c->trust, (uid_t)uid)) {
		nng_pipe_close(p);
		return;
	}
	atomic_fetch_add(&c->conn_gen, 1);
}

/* client_split cuts url, a comma-separated list, into urls (pointers into
 * buf) and their number *n. */
static int client_split(const char *url, const char **urls, unsigned *n,
                        char *buf, size_t size)
{
	char *save = NULL, *u;

	*n = 0;
	if (strlen(url) >= size)
		return client_open_fail(FPREP_ELIMIT,
		                        "the URL list is longer than %zu bytes",
		                        size - 1);
	strcpy(buf, url);
	if (buf[0] == ',' || (buf[0] != '\0' && buf[strlen(buf) - 1] == ',') ||
	    strstr(buf, ",,") != NULL)
		return client_open_fail(FPREP_EINVAL,
		                        "'%.200s': an empty URL in the list",
		                        url);
	for (u = strtok_r(buf, ",", &save); u != NULL;
	     u = strtok_r(NULL, ",", &save)) {
		if (*n == CLIENT_MAX_DAEMONS)
			return client_open_fail(FPREP_ELIMIT,
			                        "more than %d daemon URLs",
			                        CLIENT_MAX_DAEMONS);
		urls[(*n)++] = u;
	}
	if (*n == 0)
		return client_open_fail(FPREP_EINVAL, "an empty URL");
	return 0;
}

/* client_resend_ms is the REQ resend interval: off for one daemon; for
 * several, half the timeout (a request may then be processed twice). */
static nng_duration client_resend_ms(const fprep_client *c)
{
	if (c->daemons < 2)
		return NNG_DURATION_INFINITE;
	return c->timeout_ms / 2 > CLIENT_MIN_RESEND_MS ? c->timeout_ms / 2
	                                                : CLIENT_MIN_RESEND_MS;
}

/* client_cond_wait waits on cv (mtx held) until it is signalled or
 * deadline (nng's clock) comes; returns 0 when deadline had come before
 * the wait, else 1. */
static int client_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mtx,
                            nng_time deadline)
{
	nng_time now = nng_clock();
	struct timespec ts;

	if (now >= deadline)
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)((deadline - now) / 1000);
	ts.tv_nsec += (long)((deadline - now) % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	(void)pthread_cond_timedwait(cv, mtx, &ts);
	return 1;
}

/* What client_dial returns when no daemon answered within the client's
 * timeout (no nng error has this value). */
#define CLIENT_DIAL_TIMEDOUT (-1)

/* client_dialing: the URLs of one open dialled at once, each
 * synchronously on a thread of its own, so that the open waits no longer
 * than the client's timeout: nng's handshake waits 10 s for a daemon
 * that accepted the connection and does not answer (one stopped with
 * SIGSTOP). refs: the opener's and one per thread still running;
 * whichever drops the last frees it. */
struct client_dialing {
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	_Atomic unsigned refs;
	nng_socket sock;
	int redial; /* several daemons: a failed URL is dialled again */
	unsigned n, done;
	struct client_dial_job {
		struct client_dialing *d;
		char url[512];
		int rv, finished;
	} job[CLIENT_MAX_DAEMONS];
};

static void client_dialing_unref(struct client_dialing *d)
{
	if (atomic_fetch_sub(&d->refs, 1) == 1) {
		pthread_cond_destroy(&d->cv);
		pthread_mutex_destroy(&d->mtx);
		free(d);
	}
}

/* client_dial_thread dials one URL; of several daemons, one that does not
 * answer is dialled again in the background. */
static void *client_dial_thread(void *arg)
{
	struct client_dial_job *j = arg;
	struct client_dialing *d = j->d;
	int rv = nng_dial(d->sock, j->url, NULL, 0);

	if (rv != 0 && rv != NNG_ECLOSED && d->redial)
		(void)nng_dial(d->sock, j->url, NULL, NNG_FLAG_NONBLOCK);
	pthread_mutex_lock(&d->mtx);
	j->rv = rv;
	j->finished = 1;
	d->done++;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mtx);
	client_dialing_unref(d);
	return NULL;
}

/* client_dial_start starts the dial of job j on a thread, or dials it
 * here when no thread can be had. */
static void client_dial_start(struct client_dial_job *j)
{
	pthread_attr_t attr;
	pthread_t t;
	int ok;

	atomic_fetch_add(&j->d->refs, 1);
	ok = pthread_attr_init(&attr) == 0;
	if (ok) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		ok = pthread_create(&t, &attr, client_dial_thread, j) == 0;
		pthread_attr_destroy(&attr);
	}
	if (!ok)
		client_dial_thread(j);
}

/* client_dial dials every URL, waiting for them up to the client's
 * timeout. One daemon must answer; of several, those that do not (or
 * whose ipc:// socket file is missing, down[i]) are dialled again in the
 * background, and at least one must answer. Returns 0, the nng error of
 * the last failure, or CLIENT_DIAL_TIMEDOUT when none answered in time
 * (a dial still under way ends when the socket closes), with *failed
 * naming its URL. */
static int client_dial(fprep_client *c, const char **urls, const int *down,
                       const char **failed)
{
	nng_time deadline = nng_clock() + (nng_time)c->timeout_ms;
	struct client_dialing *d = calloc(1, sizeof(*d));
	int last = NNG_ECONNREFUSED;
	unsigned up = 0;

	if (d == NULL)
		return NNG_ENOMEM;
	pthread_mutex_init(&d->mtx, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->refs = 1;
	d->sock = c->sock;
	d->redial = c->daemons > 1;
	d->n = c->daemons;
	for (unsigned i = 0; i < d->n; i++) {
		d->job[i].d = d;
		snprintf(d->job[i].url, sizeof(d->job[i].url), "%s", urls[i]);
		if (down[i]) {
			/* Dial threads of earlier jobs may be counting too. */
			pthread_mutex_lock(&d->mtx);
			d->job[i].rv = NNG_ECONNREFUSED;
			d->job[i].finished = 1;
			d->done++;
			pthread_mutex_unlock(&d->mtx);
			(void)nng_dial(c->sock, urls[i], NULL,
			               NNG_FLAG_NONBLOCK);
		} else {
			client_dial_start(&d->job[i]);
		}
	}
	pthread_mutex_lock(&d->mtx);
	while (d->done < d->n && client_cond_wait(&d->cv, &d->mtx, deadline))
		;
	for (unsigned i = 0; i < d->n; i++) {
		if (d->job[i].finished && d->job[i].rv == 0) {
			up++;
			continue;
		}
		last = d->job[i].finished ? d->job[i].rv : CLIENT_DIAL_TIMEDOUT;
		*failed = urls[i];
	}
	pthread_mutex_unlock(&d->mtx);
	client_dialing_unref(d);
	return up > 0 ? 0 : last;
}

int fprep__client_check_shm(fprep_client *c)
{
	if (c->daemons < 2)
		return 0;
	return client_error(c, FPREP_EUNSUPPORTED,
	                    "shared memory and CUDA regions need a client of "
	                    "one daemon (this one dials %u): a region is "
	                    "registered with one daemon, and requests are "
	                    "spread over all",
	                    c->daemons);
}

/* client_destroy frees c's memory (its sockets and slots are gone). */
static void client_destroy(fprep_client *c)
{
	fprep__stages_destroy(&c->stages);
	pthread_mutex_destroy(&c->limits_mtx);
	pthread_cond_destroy(&c->slot_cv);
	pthread_mutex_destroy(&c->slot_mtx);
	pthread_mutex_destroy(&c->shm_mtx);
	pthread_mutex_destroy(&c->db_mtx);
	free(c->shm);
	free(c);
}

/* client_slot_new makes a call slot of c, or returns an nng error. Under
 * slot_mtx. */
static int client_slot_new(fprep_client *c, struct client_slot **sp)
{
	struct client_slot *s = calloc(1, sizeof(*s));
	int rv;

	if (s == NULL)
		return NNG_ENOMEM;
	s->c = c;
	if ((rv = nng_ctx_open(&s->ctx, c->sock)) != 0)
		goto err_free;
	/* Each step's aio carries what is left of the call's time; these
	 * bound a step given no time of its own. */
	if ((rv = nng_ctx_set_ms(s->ctx, NNG_OPT_SENDTIMEO, c->timeout_ms)) !=
	            0 ||
	    (rv = nng_ctx_set_ms(s->ctx, NNG_OPT_RECVTIMEO, c->timeout_ms)) !=
	            0)
		goto err_ctx;
	if ((rv = nng_aio_alloc(&s->aio, NULL, NULL)) != 0)
		goto err_ctx;
	if ((rv = nng_aio_alloc(&s->raio, client_reply_cb, s)) != 0)
		goto err_aio;
	c->slots[c->nslots++] = s;
	*sp = s;
	return 0;

err_aio:
	nng_aio_free(s->aio);
err_ctx:
	nng_ctx_close(s->ctx);
err_free:
	free(s);
	return rv;
}

/* client_slot_get takes a free call slot of c for one blocking call into
 * *sp, making one while fewer than FPREP_CLIENT_MAX_CALLS exist, else
 * waiting for one until deadline. Returns 0, or FPREP_ETIMEDOUT or
 * FPREP_ENOMEM, recorded. */
static int client_slot_get(fprep_client *c, nng_time deadline,
                           struct client_slot **sp)
{
	int rv = 0;

	pthread_mutex_lock(&c->slot_mtx);
	while (c->free_slots == NULL && rv == 0) {
		if (c->nslots < FPREP_CLIENT_MAX_CALLS) {
			rv = client_slot_new(c, &c->free_slots);
			break;
		}
		if (!client_cond_wait(&c->slot_cv, &c->slot_mtx, deadline))
			rv = NNG_ETIMEDOUT;
	}
	if (rv == 0) {
		*sp = c->free_slots;
		c->free_slots = (*sp)->next;
	}
	pthread_mutex_unlock(&c->slot_mtx);
	if (rv == NNG_ETIMEDOUT)
		return client_error(c, FPREP_ETIMEDOUT,
		                    "timed out after %d ms waiting for one of "
		                    "the client's %d calls in flight to end",
		                    c->timeout_ms, FPREP_CLIENT_MAX_CALLS);
	if (rv != 0)
		return client_error(c, client_nng_err(rv),
		                    "opening a context: %s (nng error %d)",
		                    nng_strerror(rv), rv);
	return 0;
}

/* client_slot_put gives s back to its client's free slots. */
static void client_slot_put(struct client_slot *s)
{
	fprep_client *c = s->c;

	pthread_mutex_lock(&c->slot_mtx);
	s->next = c->free_slots;
	c->free_slots = s;
	pthread_cond_signal(&c->slot_cv);
	pthread_mutex_unlock(&c->slot_mtx);
}

int fprep_client_open(fprep_client **clientp, const char *url, int timeout_ms)
{
	return fprep_client_open_trusting(clientp, url, timeout_ms, NULL);
}

int fprep_client_open_trusting(fprep_client **clientp, const char *url,
                               int timeout_ms, const char *trust_owner)
{
	char defurl[512], list[CLIENT_MAX_DAEMONS * 512];
	const char *urls[CLIENT_MAX_DAEMONS];
	int down[CLIENT_MAX_DAEMONS];
	struct client_trust trust;
	unsigned n = 0;
	fprep_client *c;
	int rv, err;

	*clientp = NULL;
	if (timeout_ms < 0)
		return FPREP_EINVAL;
	if ((err = client_trust_init(&trust, trust_owner)))
		return err;
	if (url == NULL) {
		if ((err = fprep_default_url(defurl, sizeof(defurl))))
			return err;
		url = defurl;
	}
	if ((err = client_split(url, urls, &n, list, sizeof(list))))
		return err;
	for (unsigned i = 0; i < n; i++) {
		down[i] = 0;
		err = client_check_url(urls[i], &trust);
		if (err == FPREP_ETRANSPORT && n > 1)
			down[i] = 1; /* no socket file yet: maybe later */
		else if (err != 0)
			return err;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return FPREP_ENOMEM;
	c->trust = trust;
	c->daemons = n;
	c->timeout_ms = timeout_ms ? timeout_ms : CLIENT_DEFAULT_TIMEOUT_MS;
	c->next_id = 1;
	c->refs = 1;
	c->serial = atomic_fetch_add(&client_serials, 1);
	(void)pthread_once(&client_fork_once, client_fork_watch);
	c->fork_gen = atomic_load(&client_fork_gen);
	atomic_flag_clear(&c->db_busy);
	pthread_mutex_init(&c->db_mtx, NULL);
	pthread_mutex_init(&c->shm_mtx, NULL);
	pthread_mutex_init(&c->slot_mtx, NULL);
	pthread_cond_init(&c->slot_cv, NULL);
	pthread_mutex_init(&c->limits_mtx, NULL);
	fprep__stages_init(&c->stages);
	if ((rv = nng_req0_open(&c->sock)) != 0) {
		err = client_nng_err(rv);
		goto err_free;
	}
	if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME,
	                            client_resend_ms(c))) != 0 ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT,
	                            CLIENT_RECONNECT_MIN_MS)) != 0 ||
	    (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT,
	                            CLIENT_RECONNECT_MAX_MS)) != 0 ||
	    (rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, 0)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_POST,
	                          client_pipe_added, c)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, client_pipe_cb,
	                          c)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST,
	                          client_pipe_removed, c)) != 0) {
		err = client_nng_err(rv);
		goto err_close;
	}
	if ((rv = client_dial(c, urls, down, &url)) == CLIENT_DIAL_TIMEDOUT) {
		nng_close(c->sock);
		client_open_fail(FPREP_ETIMEDOUT,
		                 "connecting to %.200s: timed out after %d ms "
		                 "(the daemon took the connection but did not "
		                 "answer: stopped, or overloaded?)",
		                 url, c->timeout_ms);
		client_destroy(c);
		return FPREP_ETIMEDOUT;
	}
	if (rv != 0) {
		err = FPREP_ETRANSPORT;
		goto err_close;
	}
	client_open_error[0] = '\0';
	*clientp = c;
	return FPREP_OK;

err_close:
	nng_close(c->sock);
err_free:
	snprintf(client_open_error, sizeof(client_open_error),
	         "connecting to %.200s: %s (nng error %d)", url,
	         nng_strerror(rv), rv);
	client_destroy(c);
	return err;
}

/* client_unref frees c once it is closed and no pending request still
 * needs it (a pending waited for after the close reports into it). */
static void client_unref(fprep_client *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1)
		client_destroy(c);
}

void fprep_client_close(fprep_client *client)
{
	if (client == NULL || fprep__client_forked(client))
		return;
	fprep__stages_fini(&client->stages);
	(void)fprep_client_doorbell(client, 0);
	for (unsigned i = 0; i < client->nslots; i++) {
		struct client_slot *s = client->slots[i];

		nng_aio_stop(s->aio);
		client_raio_retire(s);
		nng_aio_stop(s->raio);
		nng_ctx_close(s->ctx);
	}
	nng_close(client->sock);
	for (unsigned i = 0; i < client->nslots; i++) {
		nng_aio_free(client->slots[i]->aio);
		nng_aio_free(client->slots[i]->raio);
		free(client->slots[i]);
	}
	client->nslots = 0;
	client_unref(client);
}

void fprep_client_set_spin(fprep_client *client, unsigned spin_us)
{
	atomic_store_explicit(&client->spin_us, spin_us, memory_order_relaxed);
}

const char *fprep_client_last_error(const fprep_client *client)
{
	if (client == NULL)
		return client_open_error;
	return client_last.serial == client->serial ? client_last.text : "";
}

unsigned fprep__client_shed_stages(fprep_client *c)
{
	unsigned shed = fprep__stages_shed(&c->stages);

	/* A doorbell the client set up of itself goes too, until the next
	 * connection (not while it is being set up). */
	if (atomic_load(&c->db_mode) == CLIENT_DB_AUTO &&
	    pthread_mutex_trylock(&c->db_mtx) == 0) {
		if (atomic_load(&c->db_mode) == CLIENT_DB_AUTO &&
		    c->db_region != NULL) {
			client_doorbell_drop(c);
			shed++;
		}
		pthread_mutex_unlock(&c->db_mtx);
	}
	return shed;
}

void fprep_client_set_staging(fprep_client *client, int on)
{
	atomic_store(&client->stage_off, !on);
	if (!on)
		fprep__stages_fini(&client->stages);
}

void fprep_result_fini(fprep_result *res)
{
	if ((uintptr_t)res->priv & FPREP__RESULT_STAGED)
		fprep__stage_release(res->priv);
	else if (res->priv != NULL)
		nng_msg_free(res->priv);
	memset(res, 0, sizeof(*res));
}

/* client_step_error records the nng error rv of a step of a call (what
 * names it) and returns its enum fprep_err. */
static int client_step_error(fprep_client *c, int rv, const char *what)
{
	if (rv == NNG_ETIMEDOUT)
		return client_error(c, FPREP_ETIMEDOUT,
		                    "%s: timed out after %d ms", what,
		                    c->timeout_ms);
	return client_error(c, client_nng_err(rv), "%s: %s (nng error %d)",
	                    what, nng_strerror(rv), rv);
}

/* client_left is what is left of the call's time until deadline for
 * the next step (at least 1 ms: nng takes 0 as "now"). */
static nng_duration client_left(nng_time deadline)
{
	nng_time now = nng_clock();

	return now >= deadline ? 1 : (nng_duration)(deadline - now);
}

/* client_deadline is when a call on c that starts now must end: the
 * client's timeout from now, or the deadline of the fprep_client_request
 * it is part of. */
static nng_time client_deadline(const fprep_client *c)
{
	if (client_outer.serial == c->serial)
		return client_outer.deadline;
	return nng_clock() + (nng_time)c->timeout_ms;
}

/* client_send sends msg (taking it) on the slot's context before the
 * call's deadline. Returns 0 or an enum fprep_err, recorded. */
static int client_send(struct client_slot *s, nng_msg *msg, nng_time deadline)
{
	int rv;

	nng_aio_set_timeout(s->aio, client_left(deadline));
	nng_aio_set_msg(s->aio, msg);
	nng_ctx_send(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	if ((rv = nng_aio_result(s->aio)) != 0) {
		nng_msg_free(nng_aio_get_msg(s->aio));
		nng_aio_set_msg(s->aio, NULL);
		return client_step_error(s->c, rv, "sending the request");
	}
	return 0;
}

/* client_take_reply takes the reply that aio's finished receive holds
 * into *replyp, or records and returns its error. */
static int client_take_reply(fprep_client *c, nng_aio *aio, nng_msg **replyp)
{
	int rv;

	if ((rv = nng_aio_result(aio)) != 0)
		return client_step_error(c, rv, "waiting for the reply");
	*replyp = nng_aio_get_msg(aio);
	nng_aio_set_msg(aio, NULL);
	return FPREP_OK;
}

/* client_roundtrip sends msg (taking it) on the slot's context and waits
 * for the reply, all before the call's deadline. */
static int client_roundtrip(struct client_slot *s, nng_msg *msg,
                            nng_time deadline, nng_msg **replyp)
{
	int rv;

	*replyp = NULL;
	if ((rv = client_send(s, msg, deadline)) != 0)
		return rv;
	nng_aio_set_timeout(s->aio, client_left(deadline));
	nng_ctx_recv(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	return client_take_reply(s->c, s->aio, replyp);
}

int fprep__client_add_shm(fprep_client *c, uint32_t id, void *base, size_t size,
                          uint64_t gen)
{
	struct client_shm *t;

	pthread_mutex_lock(&c->shm_mtx);
	t = realloc(c->shm, (c->nshm + 1) * sizeof(*t));
	if (t == NULL) {
		pthread_mutex_unlock(&c->shm_mtx);
		return FPREP_ENOMEM;
	}
	t[c->nshm++] = (struct client_shm){id, base, size, gen};
	c->shm = t;
	pthread_mutex_unlock(&c->shm_mtx);
	return 0;
}

void fprep__client_remove_shm(fprep_client *c, uint32_t id, void *base)
{
	pthread_mutex_lock(&c->shm_mtx);
	for (unsigned i = 0; i < c->nshm; i++)
		if (c->shm[i].id == id && c->shm[i].base == base) {
			c->shm[i] = c->shm[--c->nshm];
			break;
		}
	pthread_mutex_unlock(&c->shm_mtx);
}

/* client_reply_area finds where the daemon writes the reply of req, which
 * asks for it in its output region (shm_reply): a region this client
 * registered, the reply header inside it. Returns the header's address,
 * or NULL after recording why. */
static uint8_t *client_reply_area(fprep_client *c, const fprep_request *req)
{
	uint64_t end, gen = atomic_load(&c->conn_gen);
	uint8_t *area = NULL;

	pthread_mutex_lock(&c->shm_mtx);
	for (unsigned i = 0; i < c->nshm; i++) {
		const struct client_shm *r = &c->shm[i];

		/* A region of an earlier connection is gone, and its id
		 * may be another region's now. */
		if (r->id != req->out_region || r->gen != gen)
			continue;
		end = req->out_offset + req->out_capacity;
		if (req->output_loc == FPREP_LOC_SHM &&
		    req->out_capacity >= FPREP_REPLY_HEADER_SIZE &&
		    end >= req->out_offset && end <= r->size && end % 8 == 0)
			area = r->base + end - FPREP_REPLY_HEADER_SIZE;
		break;
	}
	pthread_mutex_unlock(&c->shm_mtx);
	if (area == NULL)
		client_error(c, FPREP_EINVAL,
		             "shm_reply: out_region %" PRIu32 " is not a "
		             "shared-memory region of this client, or "
		             "out_offset + out_capacity (a multiple of 8) "
		             "does not lie inside it",
		             req->out_region);
	return area;
}

static long client_futex(_Atomic uint64_t *word, int op, uint32_t val)
{
	/* The low 32 bits of the little-endian request_id. */
	return syscall(SYS_futex, (uint32_t *)(void *)word, op, val, NULL, NULL,
	               0);
}

/* client_reply_cb: the reply's receive ended (on an nng thread): nng's
 * reply came, or an error, or the caller cancelled it after taking the
 * header from shared memory. While the caller still waits, it is told to
 * take nng's reply (or nng's error) instead: a value no request id has in
 * the header's request_id, and a wake. The header, once there, is never
 * overwritten. */
static void client_reply_cb(void *arg)
{
	struct client_slot *s = arg;
	int state = CLIENT_WAIT_WAITING;
	uint64_t v;

	if (!atomic_compare_exchange_strong(&s->reply_state, &state,
	                                    CLIENT_WAIT_NNG))
		return;
	v = atomic_load(s->reply_word);
	while (v != s->reply_id &&
	       !atomic_compare_exchange_weak(s->reply_word, &v,
	                                     CLIENT_REPLY_VIA_NNG))
		;
	client_futex(s->reply_word, FUTEX_WAKE, INT_MAX);
}

/* client_raio_retire waits for the receive that the slot's last reply
 * through shared memory cancelled (its callback has long run, as a rule)
 * and drops nng's copy of that reply, so raio can take the next
 * receive. */
static void client_raio_retire(struct client_slot *s)
{
	if (!s->raio_busy)
		return;
	nng_aio_wait(s->raio);
	if (nng_aio_result(s->raio) == 0)
		nng_msg_free(nng_aio_get_msg(s->raio));
	nng_aio_set_msg(s->raio, NULL);
	s->raio_busy = 0;
}

/* client_wait_word waits until the request_id at word is no longer v: it
 * polls for up to the client's spin_us, then sleeps in futex(2) (woken by
 * the daemon's write or by the receive's callback) for at most 10 ms, so
 * that the caller sees a connection that closed meanwhile. */
static void client_wait_word(fprep_client *c, _Atomic uint64_t *word,
                             uint64_t v)
{
	const struct timespec bound = {0, 10000000};
	unsigned spin_us =
	        atomic_load_explicit(&c->spin_us, memory_order_relaxed);
	struct timespec t0, t;
	unsigned i;

	if (spin_us != 0) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (i = 1;; i++) {
			if (atomic_load_explicit(word, memory_order_relaxed) !=
			    v)
				return;
			if (i % 64 != 0)
				continue;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000 +
			            (t.tv_nsec - t0.tv_nsec) / 1000 >=
			    (long)spin_us)
				break;
		}
	}
	syscall(SYS_futex, (uint32_t *)(void *)word, FUTEX_WAIT, (uint32_t)v,
	        &bound, NULL, 0);
}

/* client_roundtrip_shm is client_roundtrip for a request whose reply the
 * daemon also writes at area (protocol.h, "The reply in shared memory"):
 * it waits on the futex there, not on nng's receive, and whichever of the
 * two comes first is the reply. A reply read from memory is copied into a
 * message of its own, and nng's copy is dropped: the receive is cancelled
 * without waiting (its callback runs on an nng thread, a hand-off that
 * would add to every request's latency), and waited for after the next
 * request is sent, while the daemon works on that one. */
static int client_roundtrip_shm(struct client_slot *s, nng_msg *msg,
                                uint8_t *area, uint64_t id, nng_time deadline,
                                nng_msg **replyp)
{
	_Atomic uint64_t *word = (_Atomic uint64_t *)(void *)(area + 8);
	uint64_t lost = atomic_load(&s->c->conn_lost);
	nng_msg *copy;
	uint64_t v;
	int rv;

	*replyp = NULL;
	atomic_store_explicit(word, 0, memory_order_relaxed);
	if ((rv = client_send(s, msg, deadline)) != 0)
		return rv;
	client_raio_retire(s);
	s->reply_word = word;
	s->reply_id = id;
	atomic_store(&s->reply_state, CLIENT_WAIT_WAITING);
	nng_aio_set_timeout(s->raio, client_left(deadline));
	nng_ctx_recv(s->ctx, s->raio);
	/* The receive's own timeout ends the wait: its callback wakes us. */
	while ((v = atomic_load_explicit(word, memory_order_acquire)) != id &&
	       v != CLIENT_REPLY_VIA_NNG) {
		if (atomic_load(&s->c->conn_lost) != lost) {
			/* The daemon died: its reply will not come there. */
			nng_aio_cancel(s->raio);
			nng_aio_wait(s->raio);
			if (nng_aio_result(s->raio) == 0)
				nng_msg_free(nng_aio_get_msg(s->raio));
			nng_aio_set_msg(s->raio, NULL);
			atomic_store(&s->reply_state, CLIENT_WAIT_IDLE);
			return client_error(s->c, FPREP_ETRANSPORT,
			                    "the connection to the daemon "
			                    "closed while a request waited for "
			                    "its reply in shared memory");
		}
		client_wait_word(s->c, word, v);
	}
	if (v == id && nng_msg_alloc(&copy, FPREP_REPLY_HEADER_SIZE) == 0) {
		int state = CLIENT_WAIT_WAITING;

		memcpy(nng_msg_body(copy), area, FPREP_REPLY_HEADER_SIZE);
		if (atomic_compare_exchange_strong(&s->reply_state, &state,
		                                   CLIENT_WAIT_IDLE))
			nng_aio_cancel(s->raio);
		else /* the callback runs: let it end before area goes */
			nng_aio_wait(s->raio);
		s->raio_busy = 1;
		*replyp = copy;
		return FPREP_OK;
	}
	/* nng's reply (or error) came first, or no memory for the copy:
	 * nng's reply will do. */
	nng_aio_wait(s->raio);
	return client_take_reply(s->c, s->raio, replyp);
}

/* What client_doorbell_call returns when the daemon did not take the
 * request: it goes through nng instead. */
#define CLIENT_DOORBELL_NOT_TAKEN (-1)

/* client_doorbell_shaped tells whether req may go through a doorbell
 * (protocol.h, "Doorbells"): a FRAME or ECHO with its frame and its
 * tensor in regions. */
static int client_doorbell_shaped(const fprep_request *req)
{
	return (req->kind == FPREP_KIND_FRAME ||
	        req->kind == FPREP_KIND_ECHO) &&
	       req->input_loc != FPREP_LOC_INLINE &&
	       req->output_loc != FPREP_LOC_INLINE;
}

/* client_doorbell_fits tells whether req may go through the client's
 * doorbell: it has one, and req is shaped for it. */
static int client_doorbell_fits(fprep_client *c, const fprep_request *req)
{
	return atomic_load_explicit(&c->db_area, memory_order_acquire) !=
	               NULL &&
	       client_doorbell_shaped(req);
}

/* client_doorbell_hold takes the doorbell's entry (db_busy), waiting for
 * the call that holds it: it ends with its reply, its timeout or the
 * connection's loss. */
static void client_doorbell_hold(fprep_client *c)
{
	const struct timespec pause = {0, 100000};

	while (atomic_flag_test_and_set(&c->db_busy))
		nanosleep(&pause, NULL);
}

/* client_doorbell_drop ends the client's doorbell, if any, once no call
 * uses it: the region's close sends the UNREGISTER that ends it on its
 * connection, and after that connection's loss (the daemon restarted)
 * only unmaps it, as its id may be another region's now. Under db_mtx. */
static void client_doorbell_drop(fprep_client *c)
{
	fprep_region *r = c->db_region;

	if (r == NULL)
		return;
	client_doorbell_hold(c);
	atomic_store(&c->db_area, NULL);
	c->db_region = NULL;
	atomic_flag_clear(&c->db_busy);
	fprep_region_close(r);
}

/* client_conn_changed tells whether c's connection is no longer the one
 * counted gen made and lost lost. */
static int client_conn_changed(fprep_client *c, uint64_t gen, uint64_t lost)
{
	return atomic_load(&c->conn_gen) != gen ||
	       atomic_load(&c->conn_lost) != lost;
}

/* client_doorbell_setup sets up the doorbell on the client's present
 * connection, dropping first one of an earlier connection (gone with
 * its daemon); one of this connection, in use or given up after a
 * timeout, is kept. shed: the client's free stages may make room for it
 * (fprep_region_open). Returns 0, or the error of the set-up with its
 * reason for fprep_client_last_error; not tried again on this
 * connection unless fprep_client_doorbell asks. Under db_mtx. */
static int client_doorbell_setup(fprep_client *c, int shed)
{
	uint64_t gen = atomic_load(&c->conn_gen);
	uint64_t lost = atomic_load(&c->conn_lost);
	char why[sizeof(client_last.text)];
	fprep_region *r;
	int err;

	atomic_store(&c->db_tried, gen + 1);
	if (c->db_region != NULL && atomic_load(&c->db_gen) == gen)
		return FPREP_OK;
	client_doorbell_drop(c);
	err = shed ? fprep_region_open(&r, c, CLIENT_DOORBELL_BYTES)
	           : fprep__region_open(&r, c, CLIENT_DOORBELL_BYTES);
	if (err != 0)
		return err;
	/* Not on another connection's region of the same id. */
	err = client_conn_changed(c, gen, lost)
	              ? FPREP_ETRANSPORT
	              : fprep_region_doorbell(r, 0, 1);
	if (client_conn_changed(c, gen, lost)) {
		/* The daemon went meanwhile: set up on the next one. */
		fprep_region_close(r);
		atomic_store(&c->db_tried, 0);
		return client_error(c, FPREP_ETRANSPORT,
		                    "the connection to the daemon changed "
		                    "while the doorbell was set up");
	}
	if (err != 0) {
		/* The region's UNREGISTER would clear the reason. */
		snprintf(why, sizeof(why), "%s", fprep_client_last_error(c));
		fprep_region_close(r);
		return client_error(c, err, "%s", why);
	}
	client_doorbell_hold(c);
	c->db_region = r;
	atomic_store(&c->db_gen, gen);
	atomic_store(&c->db_lost, lost);
	atomic_store(&c->db_area, fprep_region_base(r));
	atomic_flag_clear(&c->db_busy);
	return FPREP_OK;
}

/* client_doorbell_ensure sets up the doorbell, once per connection, for
 * a call that may use it: in CLIENT_DB_ON mode, and in CLIENT_DB_AUTO
 * for a staged call (staged). A refusal leaves the calls on nng,
 * silently. */
static void client_doorbell_ensure(fprep_client *c, int staged)
{
	int mode = atomic_load_explicit(&c->db_mode, memory_order_relaxed);

	if (mode == CLIENT_DB_OFF || (mode == CLIENT_DB_AUTO && !staged) ||
	    atomic_load(&c->db_tried) == atomic_load(&c->conn_gen) + 1 ||
	    c->daemons != 1)
		return;
	pthread_mutex_lock(&c->db_mtx);
	mode = atomic_load(&c->db_mode);
	if ((mode == CLIENT_DB_ON || (mode == CLIENT_DB_AUTO && staged)) &&
	    atomic_load(&c->db_tried) != atomic_load(&c->conn_gen) + 1)
		(void)client_doorbell_setup(c, 0);
	pthread_mutex_unlock(&c->db_mtx);
	client_error_clear(c);
}

/* client_doorbell_watched tells whether the daemon watches the doorbell
 * area: it polls it, or its waker sleeps on the wake word (protocol.h). */
static int client_doorbell_watched(_Atomic uint32_t *polling,
                                   _Atomic uint32_t *wake)
{
	return atomic_load(polling) != 0 ||
	       (atomic_load(wake) & FPREP_DOORBELL_WAKE_ARMED) != 0;
}

/* client_doorbell_call posts the request header hdr (request id) in entry
 * k of the doorbell area db (which the caller holds alone) when the
 * daemon watches it (polls it, or sleeps on its wake word, which is then
 * rung), and waits there for the reply until deadline: polling for up to
 * spin_us, then in futex(2) with a 1 ms bound, so that it sees the daemon
 * stop watching, and the connection close (c->conn_lost no longer lost:
 * the daemon died). Returns 0 with the reply header copied into reply
 * (FPREP_REPLY_HEADER_SIZE bytes);
 * CLIENT_DOORBELL_NOT_TAKEN when the daemon did not watch, or stopped
 * before it took the request (the entry is the client's again);
 * FPREP_ETIMEDOUT (taken, never answered: the caller leaves the area
 * alone from then on); FPREP_ETRANSPORT (the connection closed). */
static int client_doorbell_call(fprep_client *c, uint8_t *db, unsigned k,
                                const uint8_t *hdr, uint64_t id,
                                nng_time deadline, uint64_t lost,
                                uint8_t *reply)
{
	long limit_us = (long)client_left(deadline) * 1000;
	uint8_t *e = db + FPREP_DOORBELL_HEADER_SIZE +
	             (size_t)k * FPREP_DOORBELL_ENTRY_SIZE;
	_Atomic uint32_t *polling = (_Atomic uint32_t *)(void *)db;
	_Atomic uint32_t *wake =
	        (_Atomic uint32_t *)(void *)(db + FPREP_DOORBELL_WAKE_AT);
	unsigned spin_us =
	        atomic_load_explicit(&c->spin_us, memory_order_relaxed);
	_Atomic uint32_t *state = (_Atomic uint32_t *)(void *)e;
	_Atomic uint64_t *word =
	        (_Atomic uint64_t *)(void *)(e + FPREP_DOORBELL_REPLY_AT + 8);
	const struct timespec tick = {0, 1000000};
	struct timespec t0, t;
	long waited_us;
	uint64_t v;
	unsigned i;

	if (!client_doorbell_watched(polling, wake))
		return CLIENT_DOORBELL_NOT_TAKEN;
	memcpy(e + FPREP_DOORBELL_REQUEST_AT, hdr, FPREP_REQUEST_HEADER_SIZE);
	atomic_store_explicit(word, 0, memory_order_relaxed);
	atomic_store(state, FPREP_DOORBELL_POSTED);
	/* The daemon sleeps: ring, and its waker wakes the loop. */
	if (atomic_load(polling) == 0 &&
	    (atomic_fetch_or(wake, FPREP_DOORBELL_WAKE_RUNG) &
	     FPREP_DOORBELL_WAKE_ARMED) != 0)
		syscall(SYS_futex, (uint32_t *)(void *)wake, FUTEX_WAKE, 1,
		        NULL, NULL, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 1;; i++) {
		v = atomic_load_explicit(word, memory_order_acquire);
		if (v == id)
			break;
		if (i % 64 != 0)
			continue;
		/* Not taken while the daemon does not watch, or too long:
		 * take the entry back, unless the daemon has it. */
		clock_gettime(CLOCK_MONOTONIC, &t);
		waited_us = (t.tv_sec - t0.tv_sec) * 1000000 +
		            (t.tv_nsec - t0.tv_nsec) / 1000;
		if (atomic_load(state) == FPREP_DOORBELL_POSTED &&
		    (!client_doorbell_watched(polling, wake) ||
		     waited_us >= limit_us)) {
			uint32_t posted = FPREP_DOORBELL_POSTED;

			if (atomic_compare_exchange_strong(state, &posted,
			                                   FPREP_DOORBELL_FREE))
				return CLIENT_DOORBELL_NOT_TAKEN;
		}
		if (atomic_load(&c->conn_lost) != lost)
			return client_error(
			        c, FPREP_ETRANSPORT,
			        "the connection to the daemon closed "
			        "while a request waited in its "
			        "doorbell");
		if (waited_us >= limit_us) {
			/* Taken and never answered: the caller leaves the
			 * doorbell alone from now on. */
			return client_error(c, FPREP_ETIMEDOUT,
			                    "no reply in the doorbell: timed "
			                    "out after %d ms",
			                    c->timeout_ms);
		}
		if (waited_us >= (long)spin_us)
			syscall(SYS_futex, (uint32_t *)(void *)word, FUTEX_WAIT,
			        (uint32_t)v, &tick, NULL, 0);
	}
	memcpy(reply, e + FPREP_DOORBELL_REPLY_AT, FPREP_REPLY_HEADER_SIZE);
	return 0;
}

/* client_request_id gives req the protocol's version and the client's
 * next request id. */
static void client_request_id(fprep_client *c, fprep_request *req)
{
	req->version = FPREP_PROTOCOL_VERSION;
	req->request_id = atomic_fetch_add(&c->next_id, 1);
}

/* client_message_of builds a request message: head, an encoded request
 * header, plus payload_size bytes of payload. */
static int client_message_of(fprep_client *c, const uint8_t *head,
                             const void *payload, size_t payload_size,
                             nng_msg **msgp)
{
	nng_msg *msg;
	uint8_t *body;

	*msgp = NULL;
	if (nng_msg_alloc(&msg, FPREP_REQUEST_HEADER_SIZE + payload_size) != 0)
		return client_error(c, FPREP_ENOMEM,
		                    "no memory for a %zu-byte request",
		                    FPREP_REQUEST_HEADER_SIZE + payload_size);
	body = nng_msg_body(msg);
	memcpy(body, head, FPREP_REQUEST_HEADER_SIZE);
	if (payload_size > 0)
		memcpy(body + FPREP_REQUEST_HEADER_SIZE, payload, payload_size);
	*msgp = msg;
	return FPREP_OK;
}

/* client_message builds the request message: header plus payload_size
 * bytes of payload. Assigns the request id. */
static int client_message(fprep_client *c, fprep_request *req,
                          const void *payload, size_t payload_size,
                          nng_msg **msgp)
{
	uint8_t head[FPREP_REQUEST_HEADER_SIZE];

	client_request_id(c, req);
	fprep_request_encode(req, head);
	return client_message_of(c, head, payload, payload_size, msgp);
}

/* client_check_ids checks that h answers the request request_id of kind
 * kind: 0, or FPREP_EMISMATCH with why. */
static int client_check_ids(fprep_client *c, uint64_t request_id, uint16_t kind,
                            const fprep_reply_header *h)
{
	if (h->request_id == request_id && h->kind == kind)
		return 0;
	return client_error(c, FPREP_EMISMATCH,
	                    "reply for request %llu kind %u, expected "
	                    "request %llu kind %u",
	                    (unsigned long long)h->request_id, h->kind,
	                    (unsigned long long)request_id, kind);
}

/* client_note_status makes the daemon's error in h, if any, the client's
 * last error text (the call itself succeeded). */
static void client_note_status(fprep_client *c, const fprep_reply_header *h)
{
	if (h->status != FPREP_OK)
		client_error(c, FPREP_OK, "server: %s: %s",
		             fprep_err_name((int)h->status), h->message);
}

/* client_check_reply decodes reply (taking it) as the answer to the
 * request request_id of kind kind and stores it in *res. */
static int client_check_reply(fprep_client *c, uint64_t request_id,
                              uint16_t kind, nng_msg *reply, fprep_result *res)
{
	uint8_t *body = nng_msg_body(reply);
	size_t len = nng_msg_len(reply);
	int err;

	if ((err = fprep_reply_decode(body, len, &res->header))) {
		err = client_error(c, err, "unreadable reply of %zu bytes (%s)",
		                   len, fprep_err_name(err));
		goto err_reply;
	}
	if ((err = client_check_ids(c, request_id, kind, &res->header)))
		goto err_reply;
	if (kind == FPREP_KIND_INFO) {
		/* A NUL after the text, not counted in payload_size. */
		if (nng_msg_append(reply, "", 1) != 0) {
			err = client_error(c, FPREP_ENOMEM,
			                   "no memory for the info text");
			goto err_reply;
		}
		body = nng_msg_body(reply);
	}
	client_note_status(c, &res->header);
	res->payload = body + FPREP_REPLY_HEADER_SIZE;
	res->payload_size = (size_t)res->header.payload_size;
	res->priv = reply;
	return FPREP_OK;

err_reply:
	nng_msg_free(reply);
	memset(res, 0, sizeof(*res));
	return err;
}

/* A doorbell reply's payload: none (the tensor went to a region), so that
 * its result owns nothing. */
static const uint8_t client_no_payload[1];

/* client_check_entry_reply checks hdr, a reply header read from a
 * doorbell entry, as the answer to the request request_id of kind kind
 * and stores it in *res, which then owns nothing: an entry's reply has
 * no payload. */
static int client_check_entry_reply(fprep_client *c, uint64_t request_id,
                                    uint16_t kind, const uint8_t *hdr,
                                    fprep_result *res)
{
	int err;

	if ((err = fprep_reply_decode(hdr, FPREP_REPLY_HEADER_SIZE,
	                              &res->header))) {
		err = client_error(c, err,
		                   "unreadable reply in the doorbell (%s)",
		                   fprep_err_name(err));
		goto err_reply;
	}
	if ((err = client_check_ids(c, request_id, kind, &res->header)))
		goto err_reply;
	if (res->header.payload_size != 0) {
		err = client_error(
		        c, FPREP_EPROTO,
		        "a reply in the doorbell says it has %llu "
		        "bytes of payload: it can have none",
		        (unsigned long long)res->header.payload_size);
		goto err_reply;
	}
	client_note_status(c, &res->header);
	res->payload = client_no_payload;
	res->payload_size = 0;
	res->priv = NULL;
	return FPREP_OK;

err_reply:
	memset(res, 0, sizeof(*res));
	return err;
}

/* client_call_doorbell posts head, req's encoded header, in the client's
 * doorbell when req fits it, no other call holds its entry, and the
 * doorbell serves it (any request when the program set it up, a staged
 * one when the client did): returns what client_doorbell_call does, the
 * reply header in reply. */
static int client_call_doorbell(fprep_client *c, const fprep_request *req,
                                int staged, const uint8_t *head,
                                nng_time deadline, uint8_t *reply)
{
	uint8_t *db;
	int err = CLIENT_DOORBELL_NOT_TAKEN;

	if (!client_doorbell_fits(c, req) ||
	    (!staged &&
	     atomic_load_explicit(&c->db_mode, memory_order_relaxed) !=
	             CLIENT_DB_ON) ||
	    atomic_flag_test_and_set(&c->db_busy))
		return CLIENT_DOORBELL_NOT_TAKEN;
	db = atomic_load_explicit(&c->db_area, memory_order_acquire);
	/* Not after its connection's loss: its daemon is gone, and may
	 * have left the area saying it polls. */
	if (db != NULL &&
	    atomic_load(&c->db_lost) == atomic_load(&c->conn_lost))
		err = client_doorbell_call(c, db, 0, head, req->request_id,
		                           deadline, atomic_load(&c->db_lost),
		                           reply);
	if (err == FPREP_ETIMEDOUT)
		atomic_store(&c->db_area, NULL);
	atomic_flag_clear(&c->db_busy);
	return err;
}

/* client_call_as sends a request header plus payload_size bytes of
 * payload and stores the checked reply in *res: through the doorbell when
 * it fits (staged: a staged inline frame), else on a call slot of its
 * own. */
static int client_call_as(fprep_client *c, fprep_request *req,
                          const void *payload, size_t payload_size, int staged,
                          fprep_result *res)
{
	nng_time deadline = client_deadline(c);
	nng_msg *msg = NULL, *reply = NULL;
	struct client_slot *s;
	uint8_t *area = NULL, head[FPREP_REQUEST_HEADER_SIZE],
	        entry[FPREP_REPLY_HEADER_SIZE];
	int err;

	memset(res, 0, sizeof(*res));
	if (fprep__client_forked(c))
		return client_forked_error(c);
	if (client_doorbell_shaped(req))
		client_doorbell_ensure(c, staged);
	client_error_clear(c);
	if (req->shm_reply && (area = client_reply_area(c, req)) == NULL)
		return FPREP_EINVAL;
	/* The header first: through the doorbell no message is made. */
	client_request_id(c, req);
	fprep_request_encode(req, head);
	err = client_call_doorbell(c, req, staged, head, deadline, entry);
	if (err == 0)
		return client_check_entry_reply(c, req->request_id, req->kind,
		                                entry, res);
	if (err != CLIENT_DOORBELL_NOT_TAKEN)
		return err;
	if ((err = client_message_of(c, head, payload, payload_size, &msg)))
		return err;
	if ((err = client_slot_get(c, deadline, &s))) {
		nng_msg_free(msg);
		return err;
	}
	err = area != NULL ? client_roundtrip_shm(s, msg, area, req->request_id,
	                                          deadline, &reply)
	                   : client_roundtrip(s, msg, deadline, &reply);
	client_slot_put(s);
	if (err)
		return err;
	return client_check_reply(c, req->request_id, req->kind, reply, res);
}

/* client_call is client_call_as for a call that is not staged. */
static int client_call(fprep_client *c, fprep_request *req, const void *payload,
                       size_t payload_size, fprep_result *res)
{
	return client_call_as(c, req, payload, payload_size, 0, res);
}

int fprep__client_call(fprep_client *c, fprep_request *req, fprep_result *res)
{
	return client_call_as(c, req, NULL, 0, 1, res);
}

int fprep__client_call_entry(fprep_client *c, uint8_t *db, unsigned k,
                             uint64_t lost, fprep_request *req,
                             fprep_result *res)
{
	nng_time deadline = client_deadline(c);
	nng_msg *msg = NULL, *reply = NULL;
	uint8_t head[FPREP_REQUEST_HEADER_SIZE], entry[FPREP_REPLY_HEADER_SIZE];
	struct client_slot *s;
	uint8_t *area = NULL;
	int err;

	memset(res, 0, sizeof(*res));
	client_error_clear(c);
	if (fprep__client_forked(c))
		return client_forked_error(c);
	if (db == NULL || req->input_loc == FPREP_LOC_INLINE ||
	    req->output_loc == FPREP_LOC_INLINE)
		return client_call(c, req, NULL, 0, res);
	/* Through the doorbell without a message: the header is posted from
	 * here, and the reply read into entry. */
	client_request_id(c, req);
	fprep_request_encode(req, head);
	err = client_doorbell_call(c, db, k, head, req->request_id, deadline,
	                           lost, entry);
	if (err == 0)
		return client_check_entry_reply(c, req->request_id, req->kind,
		                                entry, res);
	if (err != CLIENT_DOORBELL_NOT_TAKEN)
		return err;
	/* Not watched: through nng, with the same request id. */
	if (req->shm_reply && (area = client_reply_area(c, req)) == NULL)
		return FPREP_EINVAL;
	if ((err = client_message_of(c, head, NULL, 0, &msg)))
		return err;
	if ((err = client_slot_get(c, deadline, &s))) {
		nng_msg_free(msg);
		return err;
	}
	err = area != NULL ? client_roundtrip_shm(s, msg, area, req->request_id,
	                                          deadline, &reply)
	                   : client_roundtrip(s, msg, deadline, &reply);
	client_slot_put(s);
	if (err)
		return err;
	return client_check_reply(c, req->request_id, req->kind, reply, res);
}

/* client_info_value parses the unsigned value of "key: value" in the INFO
 * text; returns 0 or -1 when the key is missing or the value bad. */
static int client_info_value(const char *text, const char *key, uint64_t max,
                             uint64_t *v)
{
	size_t klen = strlen(key);
	const char *p = text;
	unsigned long long x;
	char *end;

	for (; p != NULL; p = strchr(p, '\n'), p = p != NULL ? p + 1 : NULL) {
		if (strncmp(p, key, klen) != 0 || strncmp(p + klen, ": ", 2))
			continue;
		errno = 0;
		x = strtoull(p + klen + 2, &end, 10);
		if (end == p + klen + 2 || (*end != '\n' && *end != '\0') ||
		    errno != 0 || x > max)
			return -1;
		*v = x;
		return 0;
	}
	return -1;
}

/* client_parse_limits reads the limits from the INFO text. */
static int client_parse_limits(const char *text, fprep_limits *lim)
{
	uint64_t w, h, ow, oh;

	if (client_info_value(text, "max_width", UINT32_MAX, &w) ||
	    client_info_value(text, "max_height", UINT32_MAX, &h) ||
	    client_info_value(text, "max_frame_bytes", UINT64_MAX,
	                      &lim->max_frame_bytes) ||
	    client_info_value(text, "max_out_width", UINT32_MAX, &ow) ||
	    client_info_value(text, "max_out_height", UINT32_MAX, &oh) ||
	    client_info_value(text, "max_tensor_bytes", UINT64_MAX,
	                      &lim->max_tensor_bytes))
		return -1;
	lim->max_width = (uint32_t)w;
	lim->max_height = (uint32_t)h;
	lim->max_out_width = (uint32_t)ow;
	lim->max_out_height = (uint32_t)oh;
	/* A daemon without ROIS and BATCH tells neither: none accepted. */
	if (client_info_value(text, "max_elements", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_elements = (uint32_t)w;
	if (client_info_value(text, "max_batch_bytes", UINT64_MAX,
	                      &lim->max_batch_bytes) != 0)
		lim->max_batch_bytes = 0;
	/* Nor do older daemons tell the JPEG caps: 0, not known. */
	if (client_info_value(text, "max_jpeg_scans", UINT32_MAX, &w) != 0)
		w = 0;
	lim->max_jpeg_scans = (uint32_t)w;
	if (client_info_value(text, "max_jpeg_scan_pixels", UINT64_MAX,
	                      &lim->max_jpeg_scan_pixels) != 0)
		lim->max_jpeg_scan_pixels = 0;
	return 0;
}

int fprep_client_limits(fprep_client *client, fprep_limits *lim)
{
	fprep_result res;
	int err;

	if (fprep__client_forked(client))
		return client_forked_error(client);
	/* Asked once, by the first caller; the others wait for it. */
	if (atomic_load(&client->limits_state) == CLIENT_LIMITS_UNASKED) {
		pthread_mutex_lock(&client->limits_mtx);
		err = 0;
		if (atomic_load(&client->limits_state) ==
		    CLIENT_LIMITS_UNASKED) {
			err = fprep_client_info(client, &res);
			if (err == 0 && res.header.status != FPREP_OK)
				err = (int)res.header.status;
			else if (err == 0 &&
			         client_parse_limits(res.payload,
			                             &client->limits))
				err = client_error(client, FPREP_EPROTO,
				                   "the daemon's INFO reply "
				                   "lacks its limits");
			atomic_store(&client->limits_state,
			             err == 0 ? CLIENT_LIMITS_KNOWN
			                      : CLIENT_LIMITS_UNKNOWN);
			fprep_result_fini(&res);
		}
		pthread_mutex_unlock(&client->limits_mtx);
		if (err)
			return err;
	}
	if (atomic_load(&client->limits_state) != CLIENT_LIMITS_KNOWN)
		return client_error(client, FPREP_EPROTO,
		                    "the daemon did not tell its limits");
	*lim = client->limits;
	return FPREP_OK;
}

int fprep_client_check_request(fprep_client *client, const fprep_request *req)
{
	fprep_limits lim;

	if ((req->kind != FPREP_KIND_FRAME && req->kind != FPREP_KIND_ECHO) ||
	    req->input_loc != FPREP_LOC_INLINE)
		return FPREP_OK;
	/* A daemon that cannot tell its limits still gets the request. */
	if (fprep_client_limits(client, &lim) != FPREP_OK) {
		client_error_clear(client);
		return FPREP_OK;
	}
	if (req->input_size > lim.max_frame_bytes)
		return client_error(client, FPREP_ELIMIT,
		                    "frame is %" PRIu64 " bytes; the daemon's "
		                    "max_frame_bytes is %" PRIu64
		                    " (--max-frame-bytes)",
		                    req->input_size, lim.max_frame_bytes);
	return FPREP_OK;
}

/* client_payload_size returns in *sizep the inline payload bytes req
 * carries, checking that payload is there when needed. */
static int client_payload_size(fprep_client *c, const fprep_request *req,
                               const void *payload, size_t *sizep)
{
	*sizep = 0;
	if ((req->kind == FPREP_KIND_FRAME || req->kind == FPREP_KIND_ECHO) &&
	    req->input_loc == FPREP_LOC_INLINE) {
		if (req->input_size > SIZE_MAX - FPREP_REQUEST_HEADER_SIZE)
			return client_error(
			        c, FPREP_ELIMIT, "input_size %llu too large",
			        (unsigned long long)req->input_size);
		*sizep = (size_t)req->input_size;
		if (*sizep > 0 && payload == NULL)
			return client_error(c, FPREP_EINVAL,
			                    "inline input of %zu bytes without "
			                    "a payload",
			                    *sizep);
		if (*sizep > 0)
			return fprep_client_check_request(c, req);
	}
	return FPREP_OK;
}

/* client_request is fprep_client_request within the calling thread's
 * deadline. */
static int client_request(fprep_client *client, fprep_request *req,
                          const void *payload, fprep_result *res)
{
	size_t size;
	int err;

	memset(res, 0, sizeof(*res));
	if ((err = client_payload_size(client, req, payload, &size)))
		return err;
	/* On one ipc:// daemon, an inline frame goes through a stage. */
	if (size > 0 && !atomic_load(&client->stage_off) &&
	    client->daemons == 1 && atomic_load(&client->peer_uid) != 0) {
		err = fprep__stage_call(client, &client->stages, req, payload,
		                        res);
		if (err != FPREP__STAGE_UNUSED)
			return err;
	}
	return client_call(client, req, payload, size, res);
}

int fprep_client_request(fprep_client *client, fprep_request *req,
                         const void *payload, fprep_result *res)
{
	int outer = client_outer.serial == 0, err;

	/* The limits' INFO, a stage's REGISTER and the request itself are
	 * one call: they share its deadline. */
	if (outer) {
		client_outer.serial = client->serial;
		client_outer.deadline =
		        nng_clock() + (nng_time)client->timeout_ms;
	}
	err = client_request(client, req, payload, res);
	if (outer)
		client_outer.serial = 0;
	return err;
}

/* client_elements_check checks a ROIS or BATCH request before it is
 * built: its kind, n, the elements (as the daemon will), the payload, and
 * against the daemon's limits when it tells them; sets req->elements and
 * req->input_span and the inline payload's size in *sizep. */
static int client_elements_check(fprep_client *c, fprep_request *req,
                                 const fprep_element *elements, uint32_t n,
                                 const void *payload, size_t *sizep)
{
	char why[FPREP_MESSAGE_SIZE];
	fprep_limits lim;
	uint64_t span = 0, table;

	if (req->kind != FPREP_KIND_ROIS && req->kind != FPREP_KIND_BATCH)
		return client_error(c, FPREP_EINVAL,
		                    "kind %u: ROIS (8) or BATCH (9) expected",
		                    req->kind);
	if (n == 0 || n > FPREP_ELEMENTS_MAX || elements == NULL)
		return client_error(c, FPREP_EINVAL,
		                    "%u elements: 1..%d expected", n,
		                    FPREP_ELEMENTS_MAX);
	if (req->shm_reply)
		return client_error(c, FPREP_EINVAL,
		                    "shm_reply: ROIS and BATCH replies come "
		                    "through nng");
	req->elements = n;
	if (req->kind == FPREP_KIND_ROIS)
		span = req->input_size;
	for (uint32_t k = 0; k < n; k++)
		if (fprep__element_check(req, k, &elements[k], &span, why,
		                         sizeof(why)) != FPREP_OK)
			return client_error(c, FPREP_EINVAL, "%s", why);
	req->input_span = span;
	table = FPREP_TABLE_HEADER_SIZE + (uint64_t)n * FPREP_ELEMENT_SIZE;
	*sizep = 0;
	if (req->input_loc != FPREP_LOC_INLINE)
		return FPREP_OK;
	if (span > SIZE_MAX / 2)
		return client_error(c, FPREP_ELIMIT, "%llu bytes of frames",
		                    (unsigned long long)span);
	*sizep = (size_t)span;
	if (payload == NULL)
		return client_error(c, FPREP_EINVAL,
		                    "inline input of %zu bytes without a "
		                    "payload",
		                    *sizep);
	if (fprep_client_limits(c, &lim) != FPREP_OK) {
		client_error_clear(c); /* an old daemon refuses the kind */
		return FPREP_OK;
	}
	if (n > lim.max_elements)
		return client_error(c, FPREP_ELIMIT,
		                    "%u elements; the daemon's max_elements is "
		                    "%u (--max-elements)",
		                    n, lim.max_elements);
	if (span + table > lim.max_frame_bytes)
		return client_error(c, FPREP_ELIMIT,
		                    "%llu bytes of frames and table; the "
		                    "daemon's max_frame_bytes is %llu: use a "
		                    "region",
		                    (unsigned long long)(span + table),
		                    (unsigned long long)lim.max_frame_bytes);
	return FPREP_OK;
}

/* client_elements is fprep_client_elements within the calling thread's
 * deadline. */
static int client_elements(fprep_client *c, fprep_request *req,
                           const fprep_element *elements, uint32_t n,
                           const void *payload, fprep_result *res)
{
	nng_time deadline = client_deadline(c);
	nng_msg *msg = NULL, *reply = NULL;
	struct client_slot *s;
	size_t size = 0, at;
	uint8_t *body;
	int err;

	memset(res, 0, sizeof(*res));
	client_error_clear(c);
	if ((err = client_elements_check(c, req, elements, n, payload, &size)))
		return err;
	at = fprep_request_payload_offset(req);
	req->version = FPREP_PROTOCOL_VERSION;
	req->request_id = atomic_fetch_add(&c->next_id, 1);
	if (nng_msg_alloc(&msg, at + size) != 0)
		return client_error(c, FPREP_ENOMEM,
		                    "no memory for a %zu-byte request",
		                    at + size);
	body = nng_msg_body(msg);
	fprep_request_encode(req, body);
	fprep_elements_encode(elements, n, body + FPREP_REQUEST_HEADER_SIZE);
	if (size > 0)
		memcpy(body + at, payload, size);
	if ((err = client_slot_get(c, deadline, &s))) {
		nng_msg_free(msg);
		return err;
	}
	err = client_roundtrip(s, msg, deadline, &reply);
	client_slot_put(s);
	if (err)
		return err;
	return client_check_reply(c, req->request_id, req->kind, reply, res);
}

int fprep_client_elements(fprep_client *client, fprep_request *req,
                          const fprep_element *elements, uint32_t n,
                          const void *payload, fprep_result *res)
{
	int outer = client_outer.serial == 0, err;

	/* The limits' INFO and the request share the call's deadline. */
	if (outer) {
		client_outer.serial = client->serial;
		client_outer.deadline =
		        nng_clock() + (nng_time)client->timeout_ms;
	}
	err = client_elements(client, req, elements, n, payload, res);
	if (outer)
		client_outer.serial = 0;
	return err;
}

int fprep_result_element_xf(const fprep_result *res, uint32_t k,
                            fprep_element_xf *xf)
{
	const fprep_reply_header *h = &res->header;
	uint64_t at = h->output_loc == FPREP_LOC_INLINE ? h->tensor_size : 0;

	if ((h->kind != FPREP_KIND_ROIS && h->kind != FPREP_KIND_BATCH) ||
	    h->status != FPREP_OK || k >= h->shape[0] ||
	    at + ((uint64_t)k + 1) * FPREP_ELEMENT_XF_SIZE > res->payload_size)
		return FPREP_EINVAL;
	fprep_element_xf_decode((const uint8_t *)res->payload + at +
	                                (size_t)k * FPREP_ELEMENT_XF_SIZE,
	                        xf);
	return FPREP_OK;
}

/* The asynchronous API: each pending request has its own context and aio.
 * The aio callback (on an nng thread) turns the completed send into a
 * receive, and the completed receive into "done": it then wakes waiters
 * and calls the user's callback. fprep_pending_wait checks the reply on
 * the caller's thread. */
enum { PENDING_SEND, PENDING_RECV, PENDING_DONE };

struct fprep_pending {
	fprep_client *client;
	fprep_request req;
	nng_ctx ctx;
	nng_aio *aio;
	nng_time deadline;
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	int state;
	int rv;         /* nng result of the failed step, or 0 */
	nng_msg *reply; /* on success */
	fprep_done_fn cb;
	void *arg;
};

static void pending_cb(void *arg)
{
	fprep_pending *p = arg;
	nng_time now;
	int rv = nng_aio_result(p->aio);

	if (p->state == PENDING_SEND && rv == 0) {
		now = nng_clock();
		nng_aio_set_timeout(
		        p->aio, now >= p->deadline
		                        ? 1
		                        : (nng_duration)(p->deadline - now));
		pthread_mutex_lock(&p->mtx);
		p->state = PENDING_RECV;
		pthread_mutex_unlock(&p->mtx);
		nng_ctx_recv(p->ctx, p->aio);
		return;
	}
	if (rv != 0) {
		if (p->state == PENDING_SEND)
			nng_msg_free(nng_aio_get_msg(p->aio));
	} else {
		p->reply = nng_aio_get_msg(p->aio);
	}
	nng_aio_set_msg(p->aio, NULL);
	pthread_mutex_lock(&p->mtx);
	p->rv = rv;
	p->state = PENDING_DONE;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mtx);
	if (p->cb != NULL)
		p->cb(p, p->arg);
}

int fprep_client_submit(fprep_client *client, fprep_request *req,
                        const void *payload, fprep_done_fn cb, void *arg,
                        fprep_pending **pp)
{
	fprep_pending *p;
	nng_msg *msg;
	size_t size;
	int rv, err;

	*pp = NULL;
	if (fprep__client_forked(client))
		return client_forked_error(client);
	if (req->shm_reply) /* the daemon sends no nng reply for it */
		return client_error(client, FPREP_EINVAL,
		                    "shm_reply: a reply in shared memory is "
		                    "waited for by fprep_client_request only");
	if ((err = client_payload_size(client, req, payload, &size)))
		return err;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return client_error(client, FPREP_ENOMEM, "no memory");
	if ((rv = nng_ctx_open(&p->ctx, client->sock)) != 0) {
		err = client_error(client, client_nng_err(rv),
		                   "opening a context: %s", nng_strerror(rv));
		goto err_free;
	}
	if ((rv = nng_aio_alloc(&p->aio, pending_cb, p)) != 0) {
		err = client_error(client, client_nng_err(rv),
		                   "allocating an aio: %s", nng_strerror(rv));
		goto err_ctx;
	}
	if ((err = client_message(client, req, payload, size, &msg)))
		goto err_aio;
	pthread_mutex_init(&p->mtx, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->client = client;
	p->req = *req;
	p->cb = cb;
	p->arg = arg;
	p->state = PENDING_SEND;
	p->deadline = nng_clock() + (nng_time)client->timeout_ms;
	nng_aio_set_timeout(p->aio, client->timeout_ms);
	atomic_fetch_add(&client->refs, 1);
	nng_aio_set_msg(p->aio, msg);
	nng_ctx_send(p->ctx, p->aio);
	*pp = p;
	return FPREP_OK;

err_aio:
	nng_aio_free(p->aio);
err_ctx:
	nng_ctx_close(p->ctx);
err_free:
	free(p);
	return err;
}

int fprep_pending_done(const fprep_pending *p)
{
	fprep_pending *q = (fprep_pending *)p;
	int done;

	pthread_mutex_lock(&q->mtx);
	done = q->state == PENDING_DONE;
	pthread_mutex_unlock(&q->mtx);
	return done;
}

int fprep_pending_wait(fprep_pending *p, fprep_result *res)
{
	fprep_client *c = p->client;
	int err;

	memset(res, 0, sizeof(*res));
	/* The parent's request: no thread of the child completes it. */
	if (fprep__client_forked(c))
		return client_forked_error(c);
	pthread_mutex_lock(&p->mtx);
	while (p->state != PENDING_DONE)
		pthread_cond_wait(&p->cv, &p->mtx);
	pthread_mutex_unlock(&p->mtx);
	if (p->rv != 0)
		err = client_error(c, client_nng_err(p->rv),
		                   "request %llu: %s (nng error %d)",
		                   (unsigned long long)p->req.request_id,
		                   nng_strerror(p->rv), p->rv);
	else
		err = client_check_reply(c, p->req.request_id, p->req.kind,
		                         p->reply, res);
	nng_aio_free(p->aio);
	nng_ctx_close(p->ctx);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mtx);
	free(p);
	client_unref(c);
	return err;
}

int fprep_client_register(fprep_client *c, fprep_register_request *req,
                          fprep_result *res)
{
	nng_time deadline = client_deadline(c);
	nng_msg *msg = NULL, *reply = NULL;
	struct client_slot *s;
	int err;

	memset(res, 0, sizeof(*res));
	client_error_clear(c);
	if (fprep__client_forked(c))
		return client_forked_error(c);
	req->version = FPREP_PROTOCOL_VERSION;
	req->request_id = atomic_fetch_add(&c->next_id, 1);
	if (nng_msg_alloc(&msg, FPREP_REQUEST_HEADER_SIZE) != 0)
		return client_error(c, FPREP_ENOMEM,
		                    "no memory for a %d-byte request",
		                    FPREP_REQUEST_HEADER_SIZE);
	fprep_register_request_encode(req, nng_msg_body(msg));
	if ((err = client_slot_get(c, deadline, &s))) {
		nng_msg_free(msg);
		return err;
	}
	err = client_roundtrip(s, msg, deadline, &reply);
	client_slot_put(s);
	if (err)
		return err;
	return client_check_reply(c, req->request_id, req->kind, reply, res);
}

int fprep_client_doorbell(fprep_client *client, int on)
{
	int err = FPREP_OK;

	if (fprep__client_forked(client))
		return client_forked_error(client);
	pthread_mutex_lock(&client->db_mtx);
	atomic_store(&client->db_mode, on ? CLIENT_DB_ON : CLIENT_DB_OFF);
	if (on)
		err = client_doorbell_setup(client, 1);
	else
		client_doorbell_drop(client);
	pthread_mutex_unlock(&client->db_mtx);
	return err;
}

int fprep_client_info(fprep_client *client, fprep_result *res)
{
	fprep_request req;

	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_INFO;
	return client_call(client, &req, NULL, 0, res);
}

int fprep__client_exchange(fprep_client *c, nng_msg *msg, uint16_t kind,
                           fprep_result *res)
{
	nng_time deadline = client_deadline(c);
	uint64_t id = atomic_fetch_add(&c->next_id, 1);
	nng_msg *reply = NULL;
	struct client_slot *s;
	int err;

	memset(res, 0, sizeof(*res));
	client_error_clear(c);
	/* The request id at offset 8 of the header (protocol.h). */
	for (int i = 0; i < 8; i++)
		((uint8_t *)nng_msg_body(msg))[8 + i] =
		        (uint8_t)(id >> (8 * i));
	if ((err = client_slot_get(c, deadline, &s))) {
		nng_msg_free(msg);
		return err;
	}
	err = client_roundtrip(s, msg, deadline, &reply);
	client_slot_put(s);
	if (err)
		return err;
	return client_check_reply(c, id, kind, reply, res);
}
