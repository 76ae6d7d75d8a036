/*
 * log.h: one-line log records for frameprepd and its backends.
 *
 * Each record is one line on stderr. When stderr is the journal (systemd's
 * JOURNAL_STREAM names it) the line starts with the syslog priority in
 * angle brackets ("<6>"), which the journal reads as the record's level,
 * and the journal adds the time. Anywhere else (a terminal, a file, a
 * pipe) it starts with an ISO 8601 UTC time and the level's name
 * ("2026-11-26T05:19:39.123Z notice: ..."). Thread-safe: one write(2) per
 * record.
 *
 * Rate limit: the records of one call site (one format string) at levels
 * err to info are written at most FPREP__LOG_BURST times in each
 * FPREP__LOG_INTERVAL_MS window; the rest are counted, and once the window
 * has passed one record says how many were suppressed and shows the last
 * of them. Debug records are never limited (the operator asked for all).
 */
#ifndef FPREP_LOG_H
#define FPREP_LOG_H

/* Levels are syslog priorities. */
enum fprep__log_level {
	FPREP_LOG_ERR = 3,
	FPREP_LOG_WARNING = 4,
	FPREP_LOG_NOTICE = 5,
	FPREP_LOG_INFO = 6,
	FPREP_LOG_DEBUG = 7,
};

/* FPREP__LOG_BURST and FPREP__LOG_INTERVAL_MS: the default rate limit, per
 * call site. */
#define FPREP__LOG_BURST       10
#define FPREP__LOG_INTERVAL_MS 5000

/* fprep__log_set_level drops records above level (default FPREP_LOG_INFO). */
void fprep__log_set_level(int level);

/* fprep__log_set_rate sets the rate limit: at most burst records of one
 * call site per interval_ms (burst 0: no limit). Call before other threads
 * log (start-up, tests). */
void fprep__log_set_rate(unsigned burst, unsigned interval_ms);

/* fprep__log_parse_level maps "err", "warning", "notice", "info", "debug"
 * to a level; returns -1 for anything else. */
int fprep__log_parse_level(const char *name);

/* fprep__log writes one record at level, printf-style; a trailing newline
 * is added. Records longer than 1 KiB are truncated. fmt must be a string
 * that lives as long as the process (a literal): the rate limit keys on
 * its address. Any thread. */
void fprep__log(int level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* fprep__log_flush writes the counts of records still suppressed, at once
 * (at exit, so that none is lost). Any thread. */
void fprep__log_flush(void);

#endif /* FPREP_LOG_H */
