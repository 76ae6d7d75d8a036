/*
 * log.c: one-line log records on stderr, journal-friendly (see log.h).
 *
 * The level is read without a lock: it is set once at start-up, before any
 * other thread runs.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int log_level = FPREP_LOG_INFO;

static const char *const log_names[] = {
        [FPREP_LOG_ERR] = "err",       [FPREP_LOG_WARNING] = "warning",
        [FPREP_LOG_NOTICE] = "notice", [FPREP_LOG_INFO] = "info",
        [FPREP_LOG_DEBUG] = "debug",
};

void fprep__log_set_level(int level)
{
	log_level = level;
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
	char line[1024];
	va_list ap;
	int n;

	if (level > log_level)
		return;
	if (level < FPREP_LOG_ERR)
		level = FPREP_LOG_ERR;
	if (level > FPREP_LOG_DEBUG)
		level = FPREP_LOG_DEBUG;
	if (isatty(STDERR_FILENO))
		n = snprintf(line, sizeof(line), "%s: ", log_names[level]);
	else
		n = snprintf(line, sizeof(line), "<%d>", level);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = (int)strlen(line);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
