/*
 * config_values.c: the readers of the setting values that are more than a
 * number or a word (see config_values.h); config.c's table says which
 * setting uses which.
 */
#include "config_values.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frameprep/frameprep.h"

int fprep__config_values_uint(const char *s, uint64_t min, uint64_t max,
                              uint64_t *v)
{
	unsigned long long x;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || x < min || x > max)
		return -1;
	*v = x;
	return 0;
}

int fprep__config_values_string(char **dst, const char *s)
{
	char *copy = NULL;

	if (s != NULL && (copy = strdup(s)) == NULL)
		return -1;
	free(*dst);
	*dst = copy;
	return 0;
}

/* config_tcp_port checks that the HOST:PORT of a tcp:// URL names a port
 * in 1..65535: a listener on port 0 (or on none, which nng takes for 0)
 * would take a port that nobody is told. */
static int config_tcp_port(const char *hostport)
{
	const char *bracket = strrchr(hostport, ']');
	const char *colon = strrchr(bracket != NULL ? bracket : hostport, ':');
	uint64_t port;

	if (colon == NULL ||
	    fprep__config_values_uint(colon + 1, 1, 65535, &port) != 0)
		return -1;
	return 0;
}

int fprep__config_values_set_listen(fprep__config *cfg,
                                    const struct fprep__config_setting *s,
                                    const char *val, const char *where,
                                    FILE *err)
{
	(void)s;
	if (val == NULL) {
		cfg->nlisten = 0;
		return 0;
	}
	if (strncmp(val, "ipc://", 6) != 0 && strncmp(val, "tcp://", 6) != 0) {
		fprintf(err,
		        "frameprepd: %s: '%s' is not an ipc:// or tcp:// "
		        "URL\n",
		        where, val);
		return -1;
	}
	if (strlen(val) >= FPREP__URL_SIZE || val[6] == '\0') {
		fprintf(err,
		        "frameprepd: %s: '%s' is empty or longer than %d "
		        "bytes\n",
		        where, val, FPREP__URL_SIZE - 1);
		return -1;
	}
	if (strncmp(val, "tcp://", 6) == 0 && config_tcp_port(val + 6) != 0) {
		fprintf(err,
		        "frameprepd: %s: '%s' has no port in 1..65535: give "
		        "tcp://HOST:PORT\n",
		        where, val);
		return -1;
	}
	if (cfg->nlisten == FPREP__MAX_LISTEN) {
		fprintf(err, "frameprepd: %s: more than %d listen URLs\n",
		        where, FPREP__MAX_LISTEN);
		return -1;
	}
	strcpy(cfg->listen[cfg->nlisten++], val);
	return 0;
}

void fprep__config_values_show_listen(const fprep__config *cfg, char *buf,
                                      size_t size)
{
	size_t len = 0;

	if (cfg->nlisten == 0) {
		if (fprep_default_url(buf, size) != 0)
			snprintf(buf, size, "ipc:///tmp/frameprep-UID.sock");
		return;
	}
	buf[0] = '\0';
	for (unsigned i = 0; i < cfg->nlisten && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s",
		                        i > 0 ? " " : "", cfg->listen[i]);
}

int fprep__config_values_set_device(fprep__config *cfg,
                                    const struct fprep__config_setting *s,
                                    const char *val, const char *where,
                                    FILE *err)
{
	static const struct {
		const char *word;
		int device;
	} words[] = {{"auto", FPREP__DEVICE_AUTO},
	             {"cpu", FPREP__DEVICE_CPU},
	             {"all", FPREP__DEVICE_ALL}};
	int devices[FPREP__MAX_DEVICES];
	unsigned n = 0;
	char item[16];
	uint64_t v;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (val == NULL || strcmp(val, words[i].word) == 0) {
			cfg->device = words[i].device;
			cfg->ndevices = 0;
			return 0;
		}
	for (const char *p = val;; p++) {
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= sizeof(item) || n == FPREP__MAX_DEVICES)
			goto bad;
		memcpy(item, p, len);
		item[len] = '\0';
		if (fprep__config_values_uint(item, s->min, s->max, &v) != 0)
			goto bad;
		for (unsigned i = 0; i < n; i++)
			if (devices[i] == (int)v) {
				fprintf(err,
				        "frameprepd: %s: GPU %d is listed "
				        "twice in '%s'\n",
				        where, devices[i], val);
				return -1;
			}
		devices[n++] = (int)v;
		p += len;
		if (*p == '\0')
			break;
	}
	memcpy(cfg->devices, devices, n * sizeof(devices[0]));
	cfg->ndevices = n;
	cfg->device = n == 1 ? devices[0] : FPREP__DEVICE_LIST;
	return 0;
bad:
	fprintf(err,
	        "frameprepd: %s: '%s' is not auto, cpu, all or GPU numbers "
	        "in %" PRIu64 "..%" PRIu64
	        " separated by commas (at most %d)\n",
	        where, val, s->min, s->max, FPREP__MAX_DEVICES);
	return -1;
}

void fprep__config_values_show_device(const fprep__config *cfg, char *buf,
                                      size_t size)
{
	size_t len = 0;

	switch (cfg->device) {
	case FPREP__DEVICE_AUTO:
		snprintf(buf, size, "auto");
		return;
	case FPREP__DEVICE_CPU:
		snprintf(buf, size, "cpu");
		return;
	case FPREP__DEVICE_ALL:
		snprintf(buf, size, "all");
		return;
	default:
		break;
	}
	buf[0] = '\0';
	for (unsigned i = 0; i < cfg->ndevices && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%d",
		                        i > 0 ? "," : "", cfg->devices[i]);
}

/* config_directory refuses an empty directory name. */
static int config_directory(const char *val, const char *where, FILE *err)
{
	if (val[0] != '\0')
		return 0;
	fprintf(err, "frameprepd: %s: empty directory\n", where);
	return -1;
}

int fprep__config_values_set_kernels(fprep__config *cfg,
                                     const struct fprep__config_setting *s,
                                     const char *val, const char *where,
                                     FILE *err)
{
	(void)s;
	if (val != NULL && config_directory(val, where, err) != 0)
		return -1;
	return fprep__config_values_string(&cfg->kernel_dir, val);
}

void fprep__config_values_show_kernels(const fprep__config *cfg, char *buf,
                                       size_t size)
{
	snprintf(buf, size, "%s",
	         cfg->kernel_dir != NULL ? cfg->kernel_dir
	                                 : "the sources built in");
}

int fprep__config_values_set_kernel_cache(fprep__config *cfg,
                                          const struct fprep__config_setting *s,
                                          const char *val, const char *where,
                                          FILE *err)
{
	(void)s;
	if (val != NULL && config_directory(val, where, err) != 0)
		return -1;
	cfg->cache_enabled = val == NULL || strcmp(val, "off") != 0;
	return fprep__config_values_string(&cfg->kernel_cache,
	                                   cfg->cache_enabled ? val : NULL);
}

void fprep__config_values_show_kernel_cache(const fprep__config *cfg, char *buf,
                                            size_t size)
{
	snprintf(buf, size, "%s",
	         !cfg->cache_enabled         ? "off"
	         : cfg->kernel_cache != NULL ? cfg->kernel_cache
	                                     : "$XDG_CACHE_HOME/frameprep");
}

int fprep__config_values_set_metrics_listen(
        fprep__config *cfg, const struct fprep__config_setting *s,
        const char *val, const char *where, FILE *err)
{
	const char *colon;
	uint64_t port;

	(void)s;
	if (val == NULL || strcmp(val, "off") == 0)
		return fprep__config_values_string(&cfg->metrics_listen, NULL);
	colon = strrchr(val, ':');
	if (colon == NULL ||
	    fprep__config_values_uint(colon + 1, 0, 65535, &port) != 0) {
		fprintf(err,
		        "frameprepd: %s: '%s' is not HOST:PORT (port "
		        "0..65535) or off\n",
		        where, val);
		return -1;
	}
	return fprep__config_values_string(&cfg->metrics_listen, val);
}

void fprep__config_values_show_metrics_listen(const fprep__config *cfg,
                                              char *buf, size_t size)
{
	snprintf(buf, size, "%s",
	         cfg->metrics_listen != NULL ? cfg->metrics_listen : "off");
}
