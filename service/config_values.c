/*
 * config_values.c: the parsers of frameprepd's setting values (see
 * config_values.h); config.c's table says which setting uses which.
 */
#include "config_values.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const config_transfer_names[] = {
        [FPREP__TRANSFER_STAGED] = "staged",
        [FPREP__TRANSFER_MAPPED] = "mapped",
        [FPREP__TRANSFER_AUTO] = "auto",
};

const char *fprep__transfer_name(int transfer)
{
	return transfer >= 0 && transfer <= FPREP__TRANSFER_AUTO
	               ? config_transfer_names[transfer]
	               : "?";
}

/* config_bool reads true|yes|on|1 or false|no|off|0 into *v. */
int fprep__config_bool(const char *val, int *v, const char *where, FILE *err)
{
	if (strcmp(val, "true") == 0 || strcmp(val, "yes") == 0 ||
	    strcmp(val, "on") == 0 || strcmp(val, "1") == 0) {
		*v = 1;
		return 0;
	}
	if (strcmp(val, "false") == 0 || strcmp(val, "no") == 0 ||
	    strcmp(val, "off") == 0 || strcmp(val, "0") == 0) {
		*v = 0;
		return 0;
	}
	fprintf(err, "frameprepd: %s: '%s' is not true or false\n", where, val);
	return -1;
}

/* config_uint parses a whole decimal number in range; -1 otherwise. */
int fprep__config_uint(const char *s, struct fprep__config_range r, uint64_t *v)
{
	unsigned long long x;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || x < r.min || x > r.max)
		return -1;
	*v = x;
	return 0;
}

int fprep__config_string(char **dst, const char *s)
{
	char *copy = strdup(s);

	if (copy == NULL)
		return -1;
	free(*dst);
	*dst = copy;
	return 0;
}

int fprep__config_listen(fprep__config *cfg, const char *url, const char *where,
                         FILE *err)
{
	if (strncmp(url, "ipc://", 6) != 0 && strncmp(url, "tcp://", 6) != 0) {
		fprintf(err,
		        "frameprepd: %s: '%s' is not an ipc:// or tcp:// "
		        "URL\n",
		        where, url);
		return -1;
	}
	if (strlen(url) >= FPREP__URL_SIZE || url[6] == '\0') {
		fprintf(err,
		        "frameprepd: %s: '%s' is empty or longer than %d "
		        "bytes\n",
		        where, url, FPREP__URL_SIZE - 1);
		return -1;
	}
	if (cfg->nlisten == FPREP__MAX_LISTEN) {
		fprintf(err, "frameprepd: %s: more than %d listen URLs\n",
		        where, FPREP__MAX_LISTEN);
		return -1;
	}
	strcpy(cfg->listen[cfg->nlisten++], url);
	return 0;
}

/* config_metrics_listen takes HOST:PORT (HOST may be empty or [v6]) or
 * off; the host is resolved when the endpoint opens. */
int fprep__config_metrics_listen(fprep__config *cfg, const char *val,
                                 const char *where, FILE *err)
{
	const char *colon = strrchr(val, ':');
	uint64_t port;

	if (strcmp(val, "off") == 0) {
		free(cfg->metrics_listen);
		cfg->metrics_listen = NULL;
		return 0;
	}
	if (colon == NULL ||
	    fprep__config_uint(colon + 1,
	                       (struct fprep__config_range){0, 65535},
	                       &port) != 0) {
		fprintf(err,
		        "frameprepd: %s: '%s' is not HOST:PORT (port "
		        "0..65535) or off\n",
		        where, val);
		return -1;
	}
	return fprep__config_string(&cfg->metrics_listen, val);
}

/* config_devices takes a GPU number or a comma-separated list of
 * distinct ones. */
int fprep__config_devices(fprep__config *cfg, const char *val,
                          uint64_t max_device, const char *where, FILE *err)
{
	struct fprep__config_range r = {0, max_device};
	int devices[FPREP__MAX_DEVICES];
	unsigned n = 0;
	char item[16];
	uint64_t v;

	for (const char *p = val;; p++) {
		size_t len = strcspn(p, ",");

		if (len == 0 || len >= sizeof(item) || n == FPREP__MAX_DEVICES)
			goto bad;
		memcpy(item, p, len);
		item[len] = '\0';
		if (fprep__config_uint(item, r, &v) != 0)
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
	        "in 0..%" PRIu64 " separated by commas (at most %d)\n",
	        where, val, r.max, FPREP__MAX_DEVICES);
	return -1;
}
