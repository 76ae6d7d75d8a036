/*
 * config.c: frameprepd's settings.
 *
 * One table names every setting once: its flag (--max-width), its INI key
 * (max-width, in the file's top level or a [frameprepd] section), its help
 * line and its parser. Defaults come first, then the file named by
 * --config, then the other flags, so a flag always wins over the file. A
 * --listen on the command line replaces every listen of the file. Every
 * value is range-checked; an error names the setting, the value and the
 * accepted range.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config_values.h"
#include "frameprep/frameprep.h"
#include "log.h"

enum config_key {
	KEY_LISTEN,
	KEY_DEVICE,
	KEY_LANES,
	KEY_WORKERS,
	KEY_MAX_INFLIGHT,
	KEY_MAX_INFLIGHT_PER_CONN,
	KEY_MAX_REPLY_BYTES,
	KEY_MAX_WIDTH,
	KEY_MAX_HEIGHT,
	KEY_MAX_FRAME_BYTES,
	KEY_MAX_OUT_WIDTH,
	KEY_MAX_OUT_HEIGHT,
	KEY_MAX_TENSOR_BYTES,
	KEY_SEND_TIMEOUT_MS,
	KEY_SHUTDOWN_TIMEOUT_MS,
	KEY_LISTENER_CHECK_MS,
	KEY_SLOTS,
	KEY_KERNELS,
	KEY_KERNEL_CACHE,
	KEY_LOG_LEVEL,
	KEY_SOCKET_MODE,
	KEY_MAX_REGIONS,
	KEY_MAX_DOORBELLS,
	KEY_MAX_REGION_BYTES,
	KEY_MAX_SHM_BYTES,
	KEY_ALLOW_CUDA_REGIONS,
	KEY_MAX_CUDA_REGIONS,
	KEY_METRICS_LISTEN,
	KEY_TRACE,
	KEY_TRANSFER,
	KEY_H2D_ROWS,
	KEY_SPIN_US,
	KEY_COUNT,
	/* Command-line only. */
	KEY_CONFIG = 'c',
	KEY_HELP = 'h',
	KEY_VERSION = 'V',
};

struct config_option {
	const char *name;
	const char *arg;  /* argument's name in the help */
	const char *help; /* help line; the default is added from the config */
	struct fprep__config_range range;
};

#define MS_MAX 3600000u /* one hour */

static const struct config_option config_options[KEY_COUNT] = {
        [KEY_LISTEN] = {"listen",
                        "URL",
                        "listen on URL (ipc:// or tcp://), repeatable",
                        {0, 0}},
        [KEY_DEVICE] = {"device",
                        "auto|cpu|all|N[,M...]",
                        "auto: GPU 0 if present, else CPU; cpu; all: "
                        "every GPU; GPU N, or the GPUs listed",
                        {0, 1023}},
        [KEY_LANES] = {"lanes",
                       "K",
                       "GPU lanes (streams, staging slots, threads) per "
                       "device",
                       {1, 16}},
        [KEY_WORKERS] = {"workers",
                         "N",
                         "CPU backend worker threads (0: one per core)",
                         {0, 1024}},
        [KEY_MAX_INFLIGHT] = {"max-inflight",
                              "N",
                              "requests in flight at once",
                              {1, 4096}},
        [KEY_MAX_INFLIGHT_PER_CONN] = {"max-inflight-per-conn",
                                       "N",
                                       "requests in flight per connection "
                                       "(EBUSY past it)",
                                       {1, 4096}},
        [KEY_MAX_REPLY_BYTES] = {"max-reply-bytes",
                                 "BYTES",
                                 "tensor bytes of the replies in flight",
                                 {1, UINT64_C(1) << 40}},
        [KEY_MAX_WIDTH] = {"max-width",
                           "PX",
                           "largest source width",
                           {1, 65535}},
        [KEY_MAX_HEIGHT] = {"max-height",
                            "PX",
                            "largest source height",
                            {1, 65535}},
        /* nng receives messages of up to 4 GiB - 1, header included. */
        [KEY_MAX_FRAME_BYTES] = {"max-frame-bytes",
                                 "BYTES",
                                 "largest source frame",
                                 {1, UINT32_MAX - FPREP_REQUEST_HEADER_SIZE}},
        [KEY_MAX_OUT_WIDTH] = {"max-out-width",
                               "PX",
                               "largest tensor width",
                               {1, 65535}},
        [KEY_MAX_OUT_HEIGHT] = {"max-out-height",
                                "PX",
                                "largest tensor height",
                                {1, 65535}},
        [KEY_MAX_TENSOR_BYTES] = {"max-tensor-bytes",
                                  "BYTES",
                                  "largest tensor",
                                  {1, UINT64_C(1) << 34}},
        [KEY_SEND_TIMEOUT_MS] = {"send-timeout-ms",
                                 "MS",
                                 "bound on sending one reply",
                                 {1, MS_MAX}},
        [KEY_SHUTDOWN_TIMEOUT_MS] = {"shutdown-timeout-ms",
                                     "MS",
                                     "bound on finishing work at shutdown",
                                     {1, MS_MAX}},
        [KEY_LISTENER_CHECK_MS] = {"listener-check-ms",
                                   "MS",
                                   "check every MS that each ipc:// "
                                   "listener accepts, restart it if not "
                                   "(0: off)",
                                   {0, MS_MAX}},
        [KEY_SLOTS] = {"slots",
                       "N",
                       "frames staged on the GPU at once, per stream",
                       {2, 64}},
        [KEY_MAX_REGIONS] = {"max-regions",
                             "N",
                             "shared-memory regions per connection",
                             {0, 1024}},
        [KEY_MAX_DOORBELLS] = {"max-doorbells",
                               "N",
                               "doorbell areas watched for requests (all "
                               "connections; 0: doorbells off)",
                               {0, 1024}},
        [KEY_MAX_REGION_BYTES] = {"max-region-bytes",
                                  "BYTES",
                                  "largest shared-memory region",
                                  {1, UINT64_C(1) << 40}},
        [KEY_MAX_SHM_BYTES] = {"max-shm-bytes",
                               "BYTES",
                               "shared memory mapped (and pinned) in all",
                               {1, UINT64_C(1) << 40}},
        [KEY_ALLOW_CUDA_REGIONS] = {"allow-cuda-regions",
                                    "true|false",
                                    "let clients register device memory "
                                    "(CUDA IPC handles)",
                                    {0, 0}},
        [KEY_MAX_CUDA_REGIONS] = {"max-cuda-regions",
                                  "N",
                                  "CUDA regions per connection",
                                  {0, 1024}},
        [KEY_KERNELS] = {"kernels",
                         "DIR",
                         "read kernel sources from DIR",
                         {0, 0}},
        [KEY_KERNEL_CACHE] = {"kernel-cache",
                              "DIR|off",
                              "compiled-kernel cache directory, or off",
                              {0, 0}},
        [KEY_SOCKET_MODE] = {"socket-mode",
                             "MODE",
                             "ipc:// socket file mode, octal: 600, 660 "
                             "(a group) or 666",
                             {0, 0}},
        [KEY_METRICS_LISTEN] = {"metrics-listen",
                                "HOST:PORT|off",
                                "serve Prometheus metrics on "
                                "http://HOST:PORT/metrics",
                                {0, 65535}},
        [KEY_TRACE] = {"trace",
                       "[=true|false]",
                       "write each request's stage times into its reply's "
                       "message",
                       {0, 0}},
        [KEY_TRANSFER] = {"transfer",
                          "staged|mapped|auto",
                          "GPU: copy registered pinned frames and tensors, "
                          "or let the kernel read and write them mapped",
                          {0, 0}},
        [KEY_H2D_ROWS] = {"h2d-rows",
                          "read|all",
                          "GPU, staged: copy only the frame rows the resize "
                          "reads, or every row",
                          {0, 0}},
        [KEY_SPIN_US] = {"spin-us",
                         "auto|US",
                         "how long an idle loop or GPU thread polls for "
                         "work before it sleeps (latency against CPU); "
                         "auto: 1000 with a GPU, 0 on the CPU backend",
                         {0, 100000}},
        [KEY_LOG_LEVEL] = {"log-level",
                           "LEVEL",
                           "err, warning, notice, info or debug",
                           {0, 0}},
};

static const char *const config_level_names[] = {
        [FPREP_LOG_ERR] = "err",       [FPREP_LOG_WARNING] = "warning",
        [FPREP_LOG_NOTICE] = "notice", [FPREP_LOG_INFO] = "info",
        [FPREP_LOG_DEBUG] = "debug",
};

void fprep__config_init(fprep__config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->device = FPREP__DEVICE_AUTO;
	cfg->workers = 0;
	cfg->lanes = 1;
	cfg->max_inflight = 64;
	cfg->max_inflight_per_conn = 16;
	cfg->max_reply_bytes = UINT64_C(1) << 30;
	cfg->limits.max_width = 8192;
	cfg->limits.max_height = 8192;
	cfg->limits.max_frame_bytes = UINT64_C(64) << 20;
	cfg->limits.max_out_width = 2048;
	cfg->limits.max_out_height = 2048;
	cfg->limits.max_tensor_bytes = UINT64_C(48) << 20;
	cfg->send_timeout_ms = 10000;
	cfg->shutdown_timeout_ms = 10000;
	cfg->listener_check_ms = 500;
	cfg->slots = 4;
	cfg->cache_enabled = 1;
	cfg->log_level = FPREP_LOG_INFO;
	cfg->socket_mode = 0600;
	cfg->max_regions = 16;
	cfg->max_doorbells = 64;
	cfg->max_region_bytes = UINT64_C(1) << 30;
	cfg->max_shm_bytes = UINT64_C(4) << 30;
	cfg->allow_cuda_regions = 1;
	cfg->max_cuda_regions = 16;
	cfg->spin_us = FPREP__SPIN_AUTO;
}

void fprep__config_fini(fprep__config *cfg)
{
	free(cfg->config_file);
	free(cfg->kernel_dir);
	free(cfg->kernel_cache);
	free(cfg->metrics_listen);
	cfg->config_file = NULL;
	cfg->metrics_listen = NULL;
	cfg->kernel_dir = NULL;
	cfg->kernel_cache = NULL;
}

/* config_set applies one setting; where names its origin in errors. */
static int config_set(fprep__config *cfg, enum config_key key, const char *val,
                      const char *where, FILE *err)
{
	const struct config_option *o = &config_options[key];
	uint64_t v = 0;
	int level;

	switch (key) {
	case KEY_LISTEN:
		return fprep__config_listen(cfg, val, where, err);
	case KEY_DEVICE:
		if (strcmp(val, "auto") == 0) {
			cfg->device = FPREP__DEVICE_AUTO;
			cfg->ndevices = 0;
			return 0;
		}
		if (strcmp(val, "cpu") == 0) {
			cfg->device = FPREP__DEVICE_CPU;
			cfg->ndevices = 0;
			return 0;
		}
		if (strcmp(val, "all") == 0) {
			cfg->device = FPREP__DEVICE_ALL;
			cfg->ndevices = 0;
			return 0;
		}
		return fprep__config_devices(
		        cfg, val, config_options[KEY_DEVICE].range.max, where,
		        err);
	case KEY_KERNELS:
		if (val[0] == '\0') {
			fprintf(err, "frameprepd: %s: empty directory\n",
			        where);
			return -1;
		}
		return fprep__config_string(&cfg->kernel_dir, val);
	case KEY_KERNEL_CACHE:
		if (val[0] == '\0') {
			fprintf(err, "frameprepd: %s: empty directory\n",
			        where);
			return -1;
		}
		cfg->cache_enabled = strcmp(val, "off") != 0;
		if (!cfg->cache_enabled) {
			free(cfg->kernel_cache);
			cfg->kernel_cache = NULL;
			return 0;
		}
		return fprep__config_string(&cfg->kernel_cache, val);
	case KEY_SOCKET_MODE:
		if (strcmp(val, "600") != 0 && strcmp(val, "0600") != 0 &&
		    strcmp(val, "660") != 0 && strcmp(val, "0660") != 0 &&
		    strcmp(val, "666") != 0 && strcmp(val, "0666") != 0) {
			fprintf(err,
			        "frameprepd: %s: '%s' is not 600, 660 or 666\n",
			        where, val);
			return -1;
		}
		cfg->socket_mode = (int)strtol(val, NULL, 8);
		return 0;
	case KEY_METRICS_LISTEN:
		return fprep__config_metrics_listen(cfg, val, where, err);
	case KEY_LOG_LEVEL:
		level = fprep__log_parse_level(val);
		if (level < 0) {
			fprintf(err,
			        "frameprepd: %s: '%s' is not err, warning, "
			        "notice, info or debug\n",
			        where, val);
			return -1;
		}
		cfg->log_level = level;
		return 0;
	case KEY_ALLOW_CUDA_REGIONS:
		return fprep__config_bool(val, &cfg->allow_cuda_regions, where,
		                          err);
	case KEY_TRACE:
		return fprep__config_bool(val, &cfg->trace, where, err);
	case KEY_TRANSFER:
		for (int t = 0; t <= FPREP__TRANSFER_AUTO; t++)
			if (strcmp(val, fprep__transfer_name(t)) == 0) {
				cfg->transfer = t;
				return 0;
			}
		fprintf(err,
		        "frameprepd: %s: '%s' is not staged, mapped or auto\n",
		        where, val);
		return -1;
	case KEY_H2D_ROWS:
		if (strcmp(val, "read") == 0 || strcmp(val, "all") == 0) {
			cfg->h2d_all_rows = strcmp(val, "all") == 0;
			return 0;
		}
		fprintf(err, "frameprepd: %s: '%s' is not read or all\n", where,
		        val);
		return -1;
	case KEY_SPIN_US:
		if (strcmp(val, "auto") == 0) {
			cfg->spin_us = FPREP__SPIN_AUTO;
			return 0;
		}
		break;
	default:
		break;
	}
	if (fprep__config_uint(val, o->range, &v) != 0) {
		fprintf(err,
		        "frameprepd: %s: '%s' is not an integer in "
		        "%" PRIu64 "..%" PRIu64 "\n",
		        where, val, o->range.min, o->range.max);
		return -1;
	}
	switch (key) {
	case KEY_WORKERS:
		cfg->workers = (unsigned)v;
		break;
	case KEY_LANES:
		cfg->lanes = (unsigned)v;
		break;
	case KEY_MAX_INFLIGHT:
		cfg->max_inflight = (unsigned)v;
		break;
	case KEY_SPIN_US:
		cfg->spin_us = (int)v;
		break;
	case KEY_MAX_INFLIGHT_PER_CONN:
		cfg->max_inflight_per_conn = (unsigned)v;
		break;
	case KEY_MAX_REPLY_BYTES:
		cfg->max_reply_bytes = v;
		break;
	case KEY_MAX_WIDTH:
		cfg->limits.max_width = (uint32_t)v;
		break;
	case KEY_MAX_HEIGHT:
		cfg->limits.max_height = (uint32_t)v;
		break;
	case KEY_MAX_FRAME_BYTES:
		cfg->limits.max_frame_bytes = v;
		break;
	case KEY_MAX_OUT_WIDTH:
		cfg->limits.max_out_width = (uint32_t)v;
		break;
	case KEY_MAX_OUT_HEIGHT:
		cfg->limits.max_out_height = (uint32_t)v;
		break;
	case KEY_MAX_TENSOR_BYTES:
		cfg->limits.max_tensor_bytes = v;
		break;
	case KEY_SEND_TIMEOUT_MS:
		cfg->send_timeout_ms = (int)v;
		break;
	case KEY_SHUTDOWN_TIMEOUT_MS:
		cfg->shutdown_timeout_ms = (int)v;
		break;
	case KEY_LISTENER_CHECK_MS:
		cfg->listener_check_ms = (int)v;
		break;
	case KEY_SLOTS:
		cfg->slots = (unsigned)v;
		break;
	case KEY_MAX_REGIONS:
		cfg->max_regions = (unsigned)v;
		break;
	case KEY_MAX_DOORBELLS:
		cfg->max_doorbells = (unsigned)v;
		break;
	case KEY_MAX_REGION_BYTES:
		cfg->max_region_bytes = v;
		break;
	case KEY_MAX_SHM_BYTES:
		cfg->max_shm_bytes = v;
		break;
	case KEY_MAX_CUDA_REGIONS:
		cfg->max_cuda_regions = (unsigned)v;
		break;
	default:
		break;
	}
	return 0;
}

/* config_default writes the current value of key (the default, when called
 * on a fresh config) for the help text. */
static void config_default(const fprep__config *cfg, enum config_key key,
                           char *buf, size_t size)
{
	switch (key) {
	case KEY_LISTEN:
		if (fprep_default_url(buf, size) != 0)
			snprintf(buf, size, "ipc:///tmp/frameprep-UID.sock");
		break;
	case KEY_DEVICE:
		snprintf(buf, size, "auto");
		break;
	case KEY_LANES:
		snprintf(buf, size, "%u", cfg->lanes);
		break;
	case KEY_WORKERS:
		snprintf(buf, size, "%u", cfg->workers);
		break;
	case KEY_MAX_INFLIGHT:
		snprintf(buf, size, "%u", cfg->max_inflight);
		break;
	case KEY_MAX_INFLIGHT_PER_CONN:
		snprintf(buf, size, "%u", cfg->max_inflight_per_conn);
		break;
	case KEY_MAX_REPLY_BYTES:
		snprintf(buf, size, "%" PRIu64, cfg->max_reply_bytes);
		break;
	case KEY_MAX_WIDTH:
		snprintf(buf, size, "%" PRIu32, cfg->limits.max_width);
		break;
	case KEY_MAX_HEIGHT:
		snprintf(buf, size, "%" PRIu32, cfg->limits.max_height);
		break;
	case KEY_MAX_FRAME_BYTES:
		snprintf(buf, size, "%" PRIu64, cfg->limits.max_frame_bytes);
		break;
	case KEY_MAX_OUT_WIDTH:
		snprintf(buf, size, "%" PRIu32, cfg->limits.max_out_width);
		break;
	case KEY_MAX_OUT_HEIGHT:
		snprintf(buf, size, "%" PRIu32, cfg->limits.max_out_height);
		break;
	case KEY_MAX_TENSOR_BYTES:
		snprintf(buf, size, "%" PRIu64, cfg->limits.max_tensor_bytes);
		break;
	case KEY_SEND_TIMEOUT_MS:
		snprintf(buf, size, "%d", cfg->send_timeout_ms);
		break;
	case KEY_SHUTDOWN_TIMEOUT_MS:
		snprintf(buf, size, "%d", cfg->shutdown_timeout_ms);
		break;
	case KEY_LISTENER_CHECK_MS:
		snprintf(buf, size, "%d", cfg->listener_check_ms);
		break;
	case KEY_SLOTS:
		snprintf(buf, size, "%u", cfg->slots);
		break;
	case KEY_MAX_REGIONS:
		snprintf(buf, size, "%u", cfg->max_regions);
		break;
	case KEY_MAX_DOORBELLS:
		snprintf(buf, size, "%u", cfg->max_doorbells);
		break;
	case KEY_MAX_REGION_BYTES:
		snprintf(buf, size, "%" PRIu64, cfg->max_region_bytes);
		break;
	case KEY_MAX_SHM_BYTES:
		snprintf(buf, size, "%" PRIu64, cfg->max_shm_bytes);
		break;
	case KEY_ALLOW_CUDA_REGIONS:
		snprintf(buf, size, "%s",
		         cfg->allow_cuda_regions ? "true" : "false");
		break;
	case KEY_MAX_CUDA_REGIONS:
		snprintf(buf, size, "%u", cfg->max_cuda_regions);
		break;
	case KEY_KERNELS:
		snprintf(buf, size, "the sources built in");
		break;
	case KEY_KERNEL_CACHE:
		snprintf(buf, size, "$XDG_CACHE_HOME/frameprep");
		break;
	case KEY_SOCKET_MODE:
		snprintf(buf, size, "%03o", (unsigned)cfg->socket_mode);
		break;
	case KEY_METRICS_LISTEN:
		snprintf(buf, size, "%s",
		         cfg->metrics_listen ? cfg->metrics_listen : "off");
		break;
	case KEY_TRACE:
		snprintf(buf, size, "%s", cfg->trace ? "true" : "false");
		break;
	case KEY_TRANSFER:
		snprintf(buf, size, "%s", fprep__transfer_name(cfg->transfer));
		break;
	case KEY_H2D_ROWS:
		snprintf(buf, size, "%s", cfg->h2d_all_rows ? "all" : "read");
		break;
	case KEY_SPIN_US:
		if (cfg->spin_us == FPREP__SPIN_AUTO)
			snprintf(buf, size, "auto");
		else
			snprintf(buf, size, "%d", cfg->spin_us);
		break;
	case KEY_LOG_LEVEL:
		snprintf(buf, size, "%s", config_level_names[cfg->log_level]);
		break;
	default:
		buf[0] = '\0';
		break;
	}
}

static void config_usage(const fprep__config *cfg, FILE *out)
{
	char flag[64], def[FPREP__URL_SIZE];

	fprintf(out, "Usage: frameprepd [OPTION]...\n"
	             "Serve preprocessing requests (frame -> tensor) on "
	             "ipc:// and tcp:// sockets.\n\n");
	for (int k = 0; k < KEY_COUNT; k++) {
		const struct config_option *o = &config_options[k];

		snprintf(flag, sizeof(flag), "--%s %s", o->name, o->arg);
		config_default(cfg, k, def, sizeof(def));
		fprintf(out, "  %-30s %s (default: %s)\n", flag, o->help, def);
	}
	fprintf(out, "  %-30s %s\n  %-30s %s\n  %-30s %s\n\n", "--config FILE",
	        "read settings from an INI file first", "-h, --help",
	        "print this help and exit", "--version",
	        "print the version and exit");
	fprintf(out,
	        "The INI file takes the same keys as the flags, without "
	        "the dashes in front\n(max-width = 4096), at its top level "
	        "or in a [frameprepd] section;\nflags override it. Exit "
	        "status: 0 clean shutdown, 1 runtime failure,\n2 bad "
	        "settings.\n");
}

struct config_file_ctx {
	fprep__config *cfg;
	const char *path;
	FILE *err;
	int failed;
};

static int config_ini_handler(void *user, const char *section, const char *name,
                              const char *value)
{
	struct config_file_ctx *fc = user;
	char where[FPREP__URL_SIZE];

	snprintf(where, sizeof(where), "%s: %s", fc->path, name);
	if (section[0] != '\0' && strcmp(section, "frameprepd") != 0) {
		fprintf(fc->err,
		        "frameprepd: %s: unknown section [%s] (use "
		        "[frameprepd] or none)\n",
		        fc->path, section);
		fc->failed = 1;
		return 1;
	}
	for (int k = 0; k < KEY_COUNT; k++) {
		if (strcmp(name, config_options[k].name) != 0)
			continue;
		if (config_set(fc->cfg, k, value, where, fc->err) != 0)
			fc->failed = 1;
		return 1;
	}
	fprintf(fc->err, "frameprepd: %s: unknown key\n", where);
	fc->failed = 1;
	return 1;
}

static int config_load_file(fprep__config *cfg, const char *path, FILE *err)
{
	struct config_file_ctx fc = {cfg, path, err, 0};
	int rv = ini_parse(path, config_ini_handler, &fc);

	if (rv < 0) {
		fprintf(err, "frameprepd: --config: cannot open '%s': %s\n",
		        path, strerror(errno));
		return -1;
	}
	if (rv > 0 && !fc.failed) {
		fprintf(err, "frameprepd: %s:%d: not an INI line\n", path, rv);
		return -1;
	}
	return fc.failed ? -1 : 0;
}

int fprep__config_parse(fprep__config *cfg, int argc, char **argv, FILE *out,
                        FILE *err)
{
	struct option longopts[KEY_COUNT + 4];
	int opt, flag_listens = 0;
	char where[64];

	for (int k = 0; k < KEY_COUNT; k++)
		longopts[k] = (struct option){
		        config_options[k].name,
		        k == KEY_TRACE ? optional_argument : required_argument,
		        NULL, k + 256};
	longopts[KEY_COUNT] =
	        (struct option){"config", required_argument, NULL, KEY_CONFIG};
	longopts[KEY_COUNT + 1] =
	        (struct option){"help", no_argument, NULL, KEY_HELP};
	longopts[KEY_COUNT + 2] =
	        (struct option){"version", no_argument, NULL, KEY_VERSION};
	longopts[KEY_COUNT + 3] = (struct option){NULL, 0, NULL, 0};

	/* First pass: --help, --version, --config and unknown flags. */
	opterr = 0;
	optind = 0;
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case KEY_HELP:
			config_usage(cfg, out);
			return FPREP__CONFIG_EXIT;
		case KEY_VERSION:
			fprintf(out, "frameprepd %s (protocol %d)\n",
			        FPREP_VERSION_STRING, FPREP_PROTOCOL_VERSION);
			return FPREP__CONFIG_EXIT;
		case KEY_CONFIG:
			if (fprep__config_string(&cfg->config_file, optarg) !=
			    0)
				return FPREP__CONFIG_ERROR;
			break;
		case ':':
			fprintf(err,
			        "frameprepd: %s needs a value (see --help)\n",
			        argv[optind - 1]);
			return FPREP__CONFIG_ERROR;
		case '?':
			fprintf(err,
			        "frameprepd: unknown option '%s' (see "
			        "--help)\n",
			        argv[optind - 1]);
			return FPREP__CONFIG_ERROR;
		default:
			break;
		}
	}
	if (optind < argc) {
		fprintf(err,
		        "frameprepd: unexpected argument '%s' (see --help)\n",
		        argv[optind]);
		return FPREP__CONFIG_ERROR;
	}
	if (cfg->config_file != NULL &&
	    config_load_file(cfg, cfg->config_file, err) != 0)
		return FPREP__CONFIG_ERROR;

	/* Second pass: the flags, over the file's values. */
	optind = 0;
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (opt < 256)
			continue;
		if (opt - 256 == KEY_LISTEN && !flag_listens) {
			flag_listens = 1;
			cfg->nlisten = 0;
		}
		snprintf(where, sizeof(where), "--%s",
		         config_options[opt - 256].name);
		if (config_set(cfg, opt - 256, optarg ? optarg : "true", where,
		               err) != 0)
			return FPREP__CONFIG_ERROR;
	}
	if (cfg->nlisten == 0) {
		if (fprep_default_url(cfg->listen[0], FPREP__URL_SIZE) != 0) {
			fprintf(err, "frameprepd: the default listen URL is "
			             "too long: give --listen\n");
			return FPREP__CONFIG_ERROR;
		}
		cfg->nlisten = 1;
	}
	return 0;
}
