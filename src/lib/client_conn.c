/*
 * client_conn.c: a client's connection to frameprepd, below its carriers.
 *
 * A client is one cooked nng REQ socket dialled synchronously to the
 * daemon (the carriers above make each request on a context of it:
 * carrier.h). With one daemon, resending is off: the daemon sees every
 * request once. With several (a comma-separated list of URLs) the one
 * socket dials them all: nng hands each request to a connection that is
 * free, and resends a request whose connection closed, or that got no
 * reply within half the timeout, to another, so a request may be
 * processed twice but is answered once. An ipc:// socket is dialled only
 * when a trusted user owns it (this user, root, the service account, or
 * the one named), checked on the file before the dial and on the peer's
 * credentials when the pipe is added. The pipe events count the
 * connections made and lost, which tell a region or a doorbell of an
 * earlier connection (the daemon restarted). nng errors are translated to
 * enum fprep_err here, once, and the text of each thread's last failure
 * is kept for fprep_client_last_error.
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "client_conn.h"

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
	char text[FPREP__CLIENT_ERROR_MAX];
} client_last;

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

int fprep__client_forked(const fprep_client *c)
{
	return c->fork_gen !=
	       atomic_load_explicit(&client_fork_gen, memory_order_relaxed);
}

/* The service account of the packaged daemon: a socket it owns may be
 * dialled like one of the caller's own. */
#define CLIENT_SERVICE_USER "frameprep"

int fprep__client_error(fprep_client *c, int err, const char *fmt, ...)
{
	va_list ap;

	client_last.serial = c->serial;
	va_start(ap, fmt);
	vsnprintf(client_last.text, sizeof(client_last.text), fmt, ap);
	va_end(ap);
	return err;
}

/* fprep__client_error_clear forgets the calling thread's last failure on c. */
void fprep__client_error_clear(fprep_client *c)
{
	client_last.serial = c->serial;
	client_last.text[0] = '\0';
}

/* fprep__client_forked_error is FPREP_EFORKED with the sentence that names the
 * fix. */
int fprep__client_forked_error(fprep_client *c)
{
	return fprep__client_error(
	        c, FPREP_EFORKED,
	        "this client was opened before the process forked "
	        "(it is the parent's): a child process must open "
	        "a client of its own");
}

int fprep__client_set_error(fprep_client *c, int err, const char *text)
{
	return fprep__client_error(c, err, "%s", text);
}

/* fprep__client_nng_err translates an nng error. */
int fprep__client_nng_err(int rv)
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
static int client_trust_init(struct fprep__client_trust *t, const char *name)
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
static int client_trusted_owner(const struct fprep__client_trust *t, uid_t uid)
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
                            const struct fprep__client_trust *trust)
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
static int client_check_url(const char *url,
                            const struct fprep__client_trust *trust)
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

/* fprep__client_cond_wait waits on cv (mtx held) until it is signalled or
 * deadline (nng's clock) comes; returns 0 when deadline had come before
 * the wait, else 1. */
int fprep__client_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mtx,
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
	while (d->done < d->n &&
	       fprep__client_cond_wait(&d->cv, &d->mtx, deadline))
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

unsigned fprep__client_make_room(fprep_client *c)
{
	return c->make_room != NULL ? c->make_room(c) : 0;
}

int fprep__client_check_shm(fprep_client *c)
{
	if (c->daemons < 2)
		return 0;
	return fprep__client_error(
	        c, FPREP_EUNSUPPORTED,
	        "shared memory and CUDA regions need a client of "
	        "one daemon (this one dials %u): a region is "
	        "registered with one daemon, and requests are "
	        "spread over all",
	        c->daemons);
}

/* client_destroy frees c's memory (its sockets and slots are gone). */
static void client_destroy(fprep_client *c)
{
	pthread_mutex_destroy(&c->limits_mtx);
	pthread_cond_destroy(&c->slot_cv);
	pthread_mutex_destroy(&c->slot_mtx);
	pthread_mutex_destroy(&c->shm_mtx);
	pthread_mutex_destroy(&c->db_mtx);
	free(c->shm);
	free(c);
}

int fprep__client_open(fprep_client **clientp, const char *url, int timeout_ms,
                       const char *trust_owner)
{
	char defurl[512], list[CLIENT_MAX_DAEMONS * 512];
	const char *urls[CLIENT_MAX_DAEMONS];
	int down[CLIENT_MAX_DAEMONS];
	struct fprep__client_trust trust;
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
	if ((rv = nng_req0_open(&c->sock)) != 0) {
		err = fprep__client_nng_err(rv);
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
		err = fprep__client_nng_err(rv);
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

/* fprep__client_unref frees c once it is closed and no pending request still
 * needs it (a pending waited for after the close reports into it). */
void fprep__client_unref(fprep_client *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1)
		client_destroy(c);
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
