/*
 * config_values.h: the parsers of frameprepd's setting values, shared by
 * the command line and the configuration file (config.c). Each returns 0,
 * or -1 after printing to err a line that names the setting (where: the
 * flag, or the file and line), the value and what is accepted, except
 * fprep__config_uint and fprep__config_string, whose caller says it. Loop
 * thread, at start-up.
 */
#ifndef FPREP_SERVICE_CONFIG_VALUES_H
#define FPREP_SERVICE_CONFIG_VALUES_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* fprep__config_range: a numeric setting's accepted [min, max]. */
struct fprep__config_range {
	uint64_t min;
	uint64_t max;
};

/* fprep__config_bool reads true|yes|on|1 or false|no|off|0 into *v. */
int fprep__config_bool(const char *val, int *v, const char *where, FILE *err);

/* fprep__config_uint parses a whole decimal number in r into *v. */
int fprep__config_uint(const char *s, struct fprep__config_range r,
                       uint64_t *v);

/* fprep__config_string replaces *dst (malloc'ed or NULL) by a copy of s;
 * -1 when out of memory. */
int fprep__config_string(char **dst, const char *s);

/* fprep__config_listen adds an ipc:// or tcp:// URL to cfg's listens. */
int fprep__config_listen(fprep__config *cfg, const char *url, const char *where,
                         FILE *err);

/* fprep__config_metrics_listen takes HOST:PORT (HOST may be empty or [v6])
 * or off; the host is resolved when the endpoint opens. */
int fprep__config_metrics_listen(fprep__config *cfg, const char *val,
                                 const char *where, FILE *err);

/* fprep__config_devices takes a GPU number or a comma-separated list of
 * distinct ones, each at most max_device. */
int fprep__config_devices(fprep__config *cfg, const char *val,
                          uint64_t max_device, const char *where, FILE *err);

#endif /* FPREP_SERVICE_CONFIG_VALUES_H */
