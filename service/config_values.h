/*
 * config_values.h: the readers of frameprepd's setting values that are
 * more than a number or a word: URLs, GPU lists, directories. config.c's
 * table (fprep__config_settings) names them as the set and show of its
 * OTHER rows. Each set takes val NULL to mean "the default", and returns
 * 0, or -1 after printing to err a line that names the setting (where: the
 * flag, or the file and key), the value and what is accepted. Loop
 * thread, at start-up.
 */
#ifndef FPREP_SERVICE_CONFIG_VALUES_H
#define FPREP_SERVICE_CONFIG_VALUES_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* fprep__config_values_uint parses a whole decimal number in [min, max] into
 * *v; -1 otherwise (nothing printed: the caller says what is accepted). */
int fprep__config_values_uint(const char *s, uint64_t min, uint64_t max,
                              uint64_t *v);

/* fprep__config_values_string replaces *dst (malloc'ed or NULL) by a copy of s,
 * or by NULL when s is NULL; -1 when out of memory. */
int fprep__config_values_string(char **dst, const char *s);

/* fprep__config_values_set_listen adds an ipc:// URL or a tcp://HOST:PORT URL
 * (HOST may be empty, * or [v6]; PORT in 1..65535) to cfg's listens; NULL
 * clears them (the default: fprep_default_url, filled in after parsing). */
int fprep__config_values_set_listen(fprep__config *cfg,
                                    const struct fprep__config_setting *s,
                                    const char *val, const char *where,
                                    FILE *err);
void fprep__config_values_show_listen(const fprep__config *cfg, char *buf,
                                      size_t size);

/* fprep__config_values_set_device takes auto, cpu, all, a GPU number or a
 * comma-separated list of distinct ones, each at most s->max; NULL: auto. */
int fprep__config_values_set_device(fprep__config *cfg,
                                    const struct fprep__config_setting *s,
                                    const char *val, const char *where,
                                    FILE *err);
void fprep__config_values_show_device(const fprep__config *cfg, char *buf,
                                      size_t size);

/* fprep__config_values_set_kernels takes a directory of kernel sources; NULL:
 * the sources built in. */
int fprep__config_values_set_kernels(fprep__config *cfg,
                                     const struct fprep__config_setting *s,
                                     const char *val, const char *where,
                                     FILE *err);
void fprep__config_values_show_kernels(const fprep__config *cfg, char *buf,
                                       size_t size);

/* fprep__config_values_set_kernel_cache takes a directory or off; NULL: the
 * cache on, in its default directory. */
int fprep__config_values_set_kernel_cache(fprep__config *cfg,
                                          const struct fprep__config_setting *s,
                                          const char *val, const char *where,
                                          FILE *err);
void fprep__config_values_show_kernel_cache(const fprep__config *cfg, char *buf,
                                            size_t size);

/* fprep__config_values_set_metrics_listen takes HOST:PORT (HOST may be empty or
 * [v6]; the host is resolved when the endpoint opens) or off; NULL: off. */
int fprep__config_values_set_metrics_listen(
        fprep__config *cfg, const struct fprep__config_setting *s,
        const char *val, const char *where, FILE *err);
void fprep__config_values_show_metrics_listen(const fprep__config *cfg,
                                              char *buf, size_t size);

#endif /* FPREP_SERVICE_CONFIG_VALUES_H */
