/*
 * log.c: one-line log records on stderr, journal-friendly, rate-limited
 * per call site (see log.h).
 *
 * The rate is read without a lock: it is set at start-up, before any
 * other thread runs. The level is an atomic (relaxed): SIGHUP may change
 * it while other threads log. Whether stderr is the journal
 * is found once, at the first record. The rate limit keeps a small table
 * of call sites (format strings) under a mutex; a site that does not fit
 * in it is not limited. Records are written under that mutex, so a
 * suppressed count is never written before the records it follows.
 */
#include "log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE  1024
#define LOG_SITES 64

static atomic_int log_level = FPREP_LOG_INFO;
static unsigned log_burst = FPREP__LOG_BURST;
static uint64_t log_interval_ns = FPREP__LOG_INTERVAL_MS * 1000000ull;

static const char *const log_names[] = {
        [FPREP_LOG_ERR] = "err",       [FPREP_LOG_WARNING] = "warning",
        [FPREP_LOG_NOTICE] = "notice", [FPREP_LOG_INFO] = "info",
        [FPREP_LOG_DEBUG] = "debug",
};

/* log_site: one call site's window. */
struct log_site {
	const char *fmt; /* NULL: free */
	int level;       /* of the last suppressed record */
	uint64_t window_ns;
	unsigned written;    /* in this window */
	uint64_t suppressed; /* in this window */
	char last[LOG_LINE]; /* the last suppressed record's text */
};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_journal; /* stderr is the journal's stream */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_site log_sites[LOG_SITES]; /* under log_mu */
static unsigned log_pending;                 /* sites with suppressed > 0 */

/* log_init finds out whether stderr is the journal: systemd sets
 * JOURNAL_STREAM to "DEVICE:INODE" of the stream it connected. */
static void log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	log_journal = js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	              fstat(STDERR_FILENO, &st) == 0 &&
	              (unsigned long long)st.st_dev == dev &&
	              (unsigned long long)st.st_ino == ino;
	atexit(fprep__log_flush);
}

static uint64_t log_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* log_write writes one record: the prefix, text and a newline. */
static void log_write(int level, const char *text)
{
	char line[LOG_LINE + 64];
	struct timespec ts;
	struct tm tm;
	int n;

	if (log_journal) {
		n = snprintf(line, sizeof(line), "<%d>", level);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += snprintf(line + n, sizeof(line) - (size_t)n,
		              ".%03ldZ %s: ", ts.tv_nsec / 1000000,
		              log_names[level]);
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n - 1, "%s", text);
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

/* log_summary writes site's suppressed count, if any, and clears it; now
 * bounds the window's length (a count flushed early). */
static void log_summary(struct log_site *site, uint64_t now)
{
	uint64_t span = now - site->window_ns;
	char text[LOG_LINE];

	if (site->suppressed == 0)
		return;
	if (span > log_interval_ns)
		span = log_interval_ns;
	snprintf(text, sizeof(text),
	         "%.900s (the last of %" PRIu64 " lines like it suppressed in "
	         "%.1f s)",
	         site->last, site->suppressed, span / 1e9);
	log_write(site->level, text);
	site->suppressed = 0;
	log_pending--;
}

/* log_expire writes the counts of the windows that have ended. */
static void log_expire(uint64_t now)
{
	for (unsigned i = 0; i < LOG_SITES && log_pending > 0; i++)
		if (log_sites[i].suppressed > 0 &&
		    now - log_sites[i].window_ns >= log_interval_ns)
			log_summary(&log_sites[i], now);
}

/* log_site_of finds fmt's site or takes one (a free one, or one whose
 * window has ended with nothing suppressed); NULL when all are busy. */
static struct log_site *log_site_of(const char *fmt, uint64_t now)
{
	struct log_site *spare = NULL;

	for (unsigned i = 0; i < LOG_SITES; i++) {
		struct log_site *s = &log_sites[i];

		if (s->fmt == fmt)
			return s;
		if (spare == NULL &&
		    (s->fmt == NULL || (s->suppressed == 0 &&
		                        now - s->window_ns >= log_interval_ns)))
			spare = s;
	}
	if (spare != NULL) {
		spare->fmt = fmt;
		spare->window_ns = now;
		spare->written = 0;
		spare->suppressed = 0;
	}
	return spare;
}

void fprep__log_set_level(int level)
{
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

void fprep__log_set_rate(unsigned burst, unsigned interval_ms)
{
	log_burst = burst;
	log_interval_ns = (uint64_t)interval_ms * 1000000u;
}

int fprep__log_parse_level(const char *name)
{
	for (int i = FPREP_LOG_ERR; i <= FPREP_LOG_DEBUG; i++)
		if (strcmp(name, log_names[i]) == 0)
			return i;
	return -1;
}

void fprep__log(int level, const char *fmt, ...)
{
	char text[LOG_LINE];
	struct log_site *site;
	uint64_t now;
	va_list ap;

	if (level > atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	if (level < FPREP_LOG_ERR)
		level = FPREP_LOG_ERR;
	if (level > FPREP_LOG_DEBUG)
		level = FPREP_LOG_DEBUG;
	pthread_once(&log_once, log_init);
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_mu);
	now = log_now_ns();
	log_expire(now);
	site = level < FPREP_LOG_DEBUG && log_burst > 0 ? log_site_of(fmt, now)
	                                                : NULL;
	if (site != NULL && now - site->window_ns >= log_interval_ns) {
		site->window_ns = now;
		site->written = 0;
	}
	if (site == NULL || site->written < log_burst) {
		if (site != NULL)
			site->written++;
		log_write(level, text);
	} else {
		if (site->suppressed++ == 0)
			log_pending++;
		site->level = level;
		memcpy(site->last, text, sizeof(text));
	}
	pthread_mutex_unlock(&log_mu);
}

void fprep__log_flush(void)
{
	uint64_t now;

	pthread_mutex_lock(&log_mu);
	now = log_now_ns();
	for (unsigned i = 0; i < LOG_SITES && log_pending > 0; i++)
		log_summary(&log_sites[i], now);
	pthread_mutex_unlock(&log_mu);
}
