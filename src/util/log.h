/*
 * log.h: one-line log records for frameprepd and its backends.
 *
 * Each record is one line on stderr. Under systemd (stderr not a terminal)
 * it starts with the syslog priority in angle brackets ("<6>"), which the
 * journal reads as the record's level; on a terminal it starts with the
 * level's name. Thread-safe: one write(2) per record.
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

/* fprep__log_set_level drops records above level (default FPREP_LOG_INFO). */
void fprep__log_set_level(int level);

/* fprep__log_parse_level maps "err", "warning", "notice", "info", "debug"
 * to a level; returns -1 for anything else. */
int fprep__log_parse_level(const char *name);

/* fprep__log writes one record at level, printf-style; a trailing newline
 * is added. Records longer than 1 KiB are truncated. */
void fprep__log(int level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

#endif /* FPREP_LOG_H */
