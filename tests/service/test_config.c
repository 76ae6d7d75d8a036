/*
 * test_config.c: frameprepd's settings (service/config.c): the defaults,
 * flags over the INI file, every key of the example file
 * deploy/frameprepd.conf, refusals that name the setting, and every row
 * of the settings table walked: in --help and the example file, its
 * default, its bounds or words through the command line and the file;
 * the reload SIGHUP asks for (fprep__config_reload).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "config.h"
#include "frameprep/frameprep.h"
#include "log.h"

#define CONFIG_EXAMPLE FPREP_SOURCE_DIR "/deploy/frameprepd.conf"

static char config_out[8192];
static char config_err[8192];

/* config_run parses args (a NULL-terminated list after "frameprepd") into
 * *cfg, freshly initialised; what is printed lands in config_out and
 * config_err. Returns fprep__config_parse's result. */
static int config_run(fprep__config *cfg, const char *const *args)
{
	char *argv[64];
	int argc = 0, rv;
	FILE *out, *err;

	argv[argc++] = (char *)"frameprepd";
	while (*args != NULL) {
		assert_true(argc < 63);
		argv[argc++] = (char *)*args++;
	}
	argv[argc] = NULL;
	out = fmemopen(config_out, sizeof(config_out), "w");
	err = fmemopen(config_err, sizeof(config_err), "w");
	assert_non_null(out);
	assert_non_null(err);
	fprep__config_init(cfg);
	rv = fprep__config_parse(cfg, argc, argv, out, err);
	fclose(out);
	fclose(err);
	return rv;
}

/* config_file writes text to a new temporary file; its path goes in path
 * (64 bytes). */
static void config_file(char *path, const char *text)
{
	FILE *f;
	int fd;

	snprintf(path, 64, "/tmp/fprep-test-config-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* config_same_numbers checks the numeric settings of a and b are equal. */
static void config_same_numbers(const fprep__config *a, const fprep__config *b)
{
	assert_int_equal(a->device, b->device);
	assert_int_equal(a->workers, b->workers);
	assert_int_equal(a->max_inflight, b->max_inflight);
	assert_memory_equal(&a->limits, &b->limits, sizeof(a->limits));
	assert_int_equal(a->send_timeout_ms, b->send_timeout_ms);
	assert_int_equal(a->shutdown_timeout_ms, b->shutdown_timeout_ms);
	assert_int_equal(a->slots, b->slots);
	assert_int_equal(a->log_level, b->log_level);
	assert_int_equal(a->max_regions, b->max_regions);
	assert_int_equal(a->max_doorbells, b->max_doorbells);
	assert_true(a->max_region_bytes == b->max_region_bytes);
	assert_true(a->max_shm_bytes == b->max_shm_bytes);
	assert_int_equal(a->trace, b->trace);
	assert_int_equal(a->transfer, b->transfer);
}

static void defaults(void **state)
{
	static const char *const none[] = {NULL};
	fprep__config cfg;

	(void)state;
	assert_int_equal(setenv("XDG_RUNTIME_DIR", "/run/user/test", 1), 0);
	assert_int_equal(config_run(&cfg, none), 0);
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(cfg.listen[0],
	                    "ipc:///run/user/test/frameprep.sock");
	assert_null(cfg.config_file);
	assert_int_equal(cfg.device, FPREP__DEVICE_AUTO);
	assert_int_equal(cfg.workers, 0);
	assert_int_equal(cfg.max_inflight, 64);
	assert_int_equal(cfg.limits.max_width, 8192);
	assert_int_equal(cfg.limits.max_height, 8192);
	assert_true(cfg.limits.max_frame_bytes == UINT64_C(67108864));
	assert_int_equal(cfg.limits.max_out_width, 2048);
	assert_int_equal(cfg.limits.max_out_height, 2048);
	assert_true(cfg.limits.max_tensor_bytes == UINT64_C(50331648));
	assert_int_equal(cfg.send_timeout_ms, 10000);
	assert_int_equal(cfg.shutdown_timeout_ms, 10000);
	assert_int_equal(cfg.slots, 4);
	assert_null(cfg.kernel_dir);
	assert_null(cfg.kernel_cache);
	assert_int_equal(cfg.cache_enabled, 1);
	assert_int_equal(cfg.log_level, FPREP_LOG_INFO);
	assert_int_equal(cfg.socket_mode, 0600);
	assert_int_equal(cfg.max_regions, 16);
	assert_int_equal(cfg.max_doorbells, 64);
	assert_true(cfg.max_region_bytes == UINT64_C(1073741824));
	assert_true(cfg.max_shm_bytes == UINT64_C(4294967296));
	assert_null(cfg.metrics_listen);
	assert_string_equal(config_err, "");
	fprep__config_fini(&cfg);
}

/* --trace alone turns the trace on, --trace=false off; --transfer takes
 * three words; both are file keys too. */
static void trace_transfer(void **state)
{
	const char *bare[] = {"--trace", "--transfer", "mapped", NULL};
	const char *off[] = {"--trace=false", NULL};
	const char *bad[] = {"--transfer", "fast", NULL};
	const char *none[] = {NULL};
	const char *file[] = {"--config", NULL, NULL};
	fprep__config cfg;
	char path[64];

	(void)state;
	assert_int_equal(config_run(&cfg, none), 0);
	assert_int_equal(cfg.trace, 0);
	assert_int_equal(cfg.transfer, FPREP__TRANSFER_STAGED);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, bare), 0);
	assert_int_equal(cfg.trace, 1);
	assert_int_equal(cfg.transfer, FPREP__TRANSFER_MAPPED);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, off), 0);
	assert_int_equal(cfg.trace, 0);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, bad), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "not staged, mapped or auto"));
	fprep__config_fini(&cfg);
	config_file(path, "trace = on\ntransfer = auto\n");
	file[1] = path;
	assert_int_equal(config_run(&cfg, file), 0);
	assert_int_equal(cfg.trace, 1);
	assert_int_equal(cfg.transfer, FPREP__TRANSFER_AUTO);
	assert_string_equal(fprep__transfer_name(cfg.transfer), "auto");
	fprep__config_fini(&cfg);
	unlink(path);
}

/* --spin-us takes auto or 0..100000 microseconds, as a flag or a key. */
static void spin_us(void **state)
{
	const char *none[] = {NULL};
	const char *zero[] = {"--spin-us", "0", NULL};
	const char *some[] = {"--spin-us", "250", NULL};
	const char *aut[] = {"--spin-us", "auto", NULL};
	const char *big[] = {"--spin-us", "100001", NULL};
	const char *word[] = {"--spin-us", "fast", NULL};
	fprep__config cfg;

	(void)state;
	assert_int_equal(config_run(&cfg, none), 0);
	assert_int_equal(cfg.spin_us, FPREP__SPIN_AUTO);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, zero), 0);
	assert_int_equal(cfg.spin_us, 0);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, some), 0);
	assert_int_equal(cfg.spin_us, 250);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, aut), 0);
	assert_int_equal(cfg.spin_us, FPREP__SPIN_AUTO);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, big), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "spin-us"));
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, word), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "fast"));
	fprep__config_fini(&cfg);
}

/* --h2d-rows takes read (the default) or all, as a flag or a key. */
static void h2d_rows(void **state)
{
	const char *none[] = {NULL};
	const char *all[] = {"--h2d-rows", "all", NULL};
	const char *read[] = {"--h2d-rows", "read", NULL};
	const char *word[] = {"--h2d-rows", "some", NULL};
	const char *file[] = {"--config", NULL, NULL};
	char path[64];
	fprep__config cfg;

	(void)state;
	assert_int_equal(config_run(&cfg, none), 0);
	assert_int_equal(cfg.h2d_all_rows, 0);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, all), 0);
	assert_int_equal(cfg.h2d_all_rows, 1);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, read), 0);
	assert_int_equal(cfg.h2d_all_rows, 0);
	fprep__config_fini(&cfg);
	assert_int_equal(config_run(&cfg, word), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "'some' is not read or all"));
	fprep__config_fini(&cfg);
	config_file(path, "h2d-rows = all\n");
	file[1] = path;
	assert_int_equal(config_run(&cfg, file), 0);
	assert_int_equal(cfg.h2d_all_rows, 1);
	fprep__config_fini(&cfg);
	unlink(path);
}

/* The example file as shipped, and with every commented-out key line
 * enabled: each key is accepted, and the defaults it documents are the
 * built-in ones. */
static void example_file(void **state)
{
	const char *args[] = {"--config", CONFIG_EXAMPLE, NULL};
	fprep__config cfg, def;
	char path[64], line[1024];
	FILE *in, *out;
	unsigned enabled = 0;

	(void)state;
	assert_int_equal(config_run(&cfg, args), 0);
	assert_string_equal(config_err, "");
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(cfg.listen[0],
	                    "ipc:///run/frameprep/frameprep.sock");
	assert_int_equal(cfg.socket_mode, 0660);
	assert_string_equal(cfg.kernel_cache, "/var/cache/frameprep");
	fprep__config_init(&def);
	config_same_numbers(&cfg, &def);
	fprep__config_fini(&cfg);

	/* "#key = value" lines become "key = value". */
	in = fopen(CONFIG_EXAMPLE, "r");
	assert_non_null(in);
	snprintf(path, sizeof(path), "/tmp/fprep-test-config-XXXXXX");
	out = fdopen(mkstemp(path), "w");
	assert_non_null(out);
	while (fgets(line, sizeof(line), in) != NULL) {
		size_t k = strspn(line + 1, "abcdefghijklmnopqrstuvwxyz-");

		if (line[0] == '#' && k > 0 &&
		    strncmp(line + 1 + k, " = ", 3) == 0) {
			fputs(line + 1, out);
			enabled++;
		} else {
			fputs(line, out);
		}
	}
	fclose(in);
	assert_int_equal(fclose(out), 0);
	assert_true(enabled >= 15);
	args[1] = path;
	assert_int_equal(config_run(&cfg, args), 0);
	assert_string_equal(config_err, "");
	assert_int_equal(cfg.nlisten, 2);
	assert_string_equal(cfg.listen[1], "tcp://127.0.0.1:5555");
	assert_non_null(cfg.kernel_dir);
	config_same_numbers(&cfg, &def);
	fprep__config_fini(&cfg);
	unlink(path);
}

static void flags_over_file(void **state)
{
	const char *args[16] = {
	        "--max-width", "2000",     "--config",
	        NULL,          "--listen", "tcp://127.0.0.1:7000",
	        "--device",    "cpu",      "--kernel-cache",
	        "off",         NULL};
	fprep__config cfg;
	char path[64];

	(void)state;
	config_file(path, "max-width = 1000\n"
	                  "max-height = 900\n"
	                  "listen = ipc:///tmp/a.sock\n"
	                  "listen = ipc:///tmp/b.sock\n"
	                  "device = 1\n"
	                  "kernel-cache = /tmp/cache\n"
	                  "[frameprepd]\n"
	                  "log-level = debug\n"
	                  "socket-mode = 0666\n"
	                  "metrics-listen = [::1]:9464\n");
	args[3] = path;
	assert_int_equal(config_run(&cfg, args), 0);
	assert_string_equal(cfg.metrics_listen, "[::1]:9464");
	assert_string_equal(config_err, "");
	assert_string_equal(cfg.config_file, path);
	assert_int_equal(cfg.limits.max_width, 2000);
	assert_int_equal(cfg.limits.max_height, 900);
	/* One --listen replaces every listen of the file. */
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(cfg.listen[0], "tcp://127.0.0.1:7000");
	assert_int_equal(cfg.device, FPREP__DEVICE_CPU);
	assert_int_equal(cfg.cache_enabled, 0);
	assert_null(cfg.kernel_cache);
	assert_int_equal(cfg.log_level, FPREP_LOG_DEBUG);
	assert_int_equal(cfg.socket_mode, 0666);
	fprep__config_fini(&cfg);

	/* Without flags the file's listens stay, in order. */
	args[0] = "--config";
	args[1] = path;
	args[2] = NULL;
	assert_int_equal(config_run(&cfg, args), 0);
	assert_int_equal(cfg.nlisten, 2);
	assert_string_equal(cfg.listen[0], "ipc:///tmp/a.sock");
	assert_string_equal(cfg.listen[1], "ipc:///tmp/b.sock");
	assert_int_equal(cfg.device, 1);
	assert_string_equal(cfg.kernel_cache, "/tmp/cache");
	fprep__config_fini(&cfg);
	unlink(path);
}

/* --device takes all, one GPU or a list; --lanes a count per GPU. */
static void device_lists(void **state)
{
	const char *all[] = {"--device", "all", "--lanes", "3", NULL};
	const char *one[] = {"--device", "2", NULL};
	const char *list[] = {"--device", "3,0,7", NULL};
	fprep__config cfg;
	char path[64];

	(void)state;
	assert_int_equal(config_run(&cfg, all), 0);
	assert_int_equal(cfg.device, FPREP__DEVICE_ALL);
	assert_int_equal(cfg.ndevices, 0);
	assert_int_equal(cfg.lanes, 3);
	fprep__config_fini(&cfg);

	assert_int_equal(config_run(&cfg, one), 0);
	assert_int_equal(cfg.device, 2);
	assert_int_equal(cfg.ndevices, 1);
	assert_int_equal(cfg.devices[0], 2);
	assert_int_equal(cfg.lanes, 1);
	fprep__config_fini(&cfg);

	assert_int_equal(config_run(&cfg, list), 0);
	assert_int_equal(cfg.device, FPREP__DEVICE_LIST);
	assert_int_equal(cfg.ndevices, 3);
	assert_int_equal(cfg.devices[0], 3);
	assert_int_equal(cfg.devices[1], 0);
	assert_int_equal(cfg.devices[2], 7);
	fprep__config_fini(&cfg);

	/* The file's keys, and a flag over them. */
	config_file(path, "device = 0,1\nlanes = 2\n");
	{
		const char *args[] = {"--config", path, NULL, NULL, NULL};

		assert_int_equal(config_run(&cfg, args), 0);
		assert_int_equal(cfg.device, FPREP__DEVICE_LIST);
		assert_int_equal(cfg.ndevices, 2);
		assert_int_equal(cfg.lanes, 2);
		fprep__config_fini(&cfg);
		args[2] = "--device";
		args[3] = "cpu";
		assert_int_equal(config_run(&cfg, args), 0);
		assert_int_equal(cfg.device, FPREP__DEVICE_CPU);
		assert_int_equal(cfg.ndevices, 0);
		assert_int_equal(cfg.lanes, 2);
		fprep__config_fini(&cfg);
	}
	unlink(path);
}

/* Every refused value, as a flag and as a file key: result 2 (exit status
 * 2) and a message naming the setting and the value. */
static void bad_values(void **state)
{
	static const char *const bad[][2] = {
	        {"max-width", "0"},
	        {"max-width", "65536"},
	        {"max-width", "12abc"},
	        {"max-width", "-1"},
	        {"max-width", "+5"},
	        {"max-height", "1e3"},
	        {"max-frame-bytes", "99999999999999999999999"},
	        {"max-out-width", "0"},
	        {"max-out-height", "70000"},
	        {"max-tensor-bytes", "17179869185"},
	        {"workers", "1025"},
	        {"max-inflight", "0"},
	        {"max-inflight", "4097"},
	        {"send-timeout-ms", "0"},
	        {"shutdown-timeout-ms", "3600001"},
	        {"slots", "1"},
	        {"slots", "65"},
	        {"max-regions", "1025"},
	        {"max-doorbells", "1025"},
	        {"max-region-bytes", "0"},
	        {"max-shm-bytes", "1099511627777"},
	        {"device", "gpu"},
	        {"device", "1024"},
	        {"device", "-1"},
	        {"device", "0,0"},
	        {"device", "0,"},
	        {"device", ",1"},
	        {"device", "1,x"},
	        {"device", "0,1024"},
	        {"lanes", "0"},
	        {"lanes", "17"},
	        {"socket-mode", "777"},
	        {"socket-mode", "644"},
	        {"log-level", "loud"},
	        {"listen", "http://x"},
	        {"listen", "ipc://"},
	        {"metrics-listen", "9464"},
	        {"metrics-listen", "127.0.0.1:http"},
	        {"metrics-listen", "[::1]:65536"},
	};
	fprep__config cfg;
	char flag[64], text[256], path[64];

	(void)state;
	assert_int_equal(FPREP__CONFIG_ERROR, 2);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = {flag, bad[i][1], NULL, NULL};

		snprintf(flag, sizeof(flag), "--%s", bad[i][0]);
		assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
		if (strstr(config_err, flag) == NULL ||
		    strstr(config_err, bad[i][1]) == NULL)
			fail_msg("%s %s: %s", flag, bad[i][1], config_err);
		fprep__config_fini(&cfg);

		snprintf(text, sizeof(text), "%s = %s\n", bad[i][0], bad[i][1]);
		config_file(path, text);
		args[0] = "--config";
		args[1] = path;
		assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
		snprintf(text, sizeof(text), "%s: %s", path, bad[i][0]);
		if (strstr(config_err, text) == NULL ||
		    strstr(config_err, bad[i][1]) == NULL)
			fail_msg("file %s = %s: %s", bad[i][0], bad[i][1],
			         config_err);
		fprep__config_fini(&cfg);
		unlink(path);
	}
}

/* The edges of the ranges are accepted. */
static void range_edges(void **state)
{
	static const char *const args[] = {"--max-width",
	                                   "65535",
	                                   "--max-height",
	                                   "1",
	                                   "--max-inflight",
	                                   "4096",
	                                   "--slots",
	                                   "2",
	                                   "--max-regions",
	                                   "0",
	                                   "--max-doorbells",
	                                   "1024",
	                                   "--device",
	                                   "1023",
	                                   "--send-timeout-ms",
	                                   "3600000",
	                                   "--max-shm-bytes",
	                                   "1099511627776",
	                                   NULL};
	fprep__config cfg;

	(void)state;
	assert_int_equal(config_run(&cfg, args), 0);
	assert_int_equal(cfg.limits.max_width, 65535);
	assert_int_equal(cfg.limits.max_height, 1);
	assert_int_equal(cfg.max_inflight, 4096);
	assert_int_equal(cfg.slots, 2);
	assert_int_equal(cfg.max_regions, 0);
	assert_int_equal(cfg.max_doorbells, 1024);
	assert_int_equal(cfg.device, 1023);
	assert_int_equal(cfg.send_timeout_ms, 3600000);
	assert_true(cfg.max_shm_bytes == UINT64_C(1) << 40);
	fprep__config_fini(&cfg);
}

/* Bad files and command lines: each result 2 with a message naming what
 * is wrong. */
static void bad_files_and_flags(void **state)
{
	static const char *const files[][2] = {
	        {"no-such-key = 1\n", "no-such-key"},
	        {"[other]\nmax-width = 5\n", "[other]"},
	        {"this is not ini\n", ":1: not an INI line"},
	        {"kernels =\n", "kernels"},
	};
	const char *args[4] = {"--config", NULL, NULL};
	char path[64], urls[20 * 40];
	const char *many[64];
	fprep__config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		config_file(path, files[i][0]);
		args[1] = path;
		assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
		if (strstr(config_err, files[i][1]) == NULL)
			fail_msg("%s: %s", files[i][0], config_err);
		fprep__config_fini(&cfg);
		unlink(path);
	}
	args[1] = "/nonexistent/frameprepd.conf";
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "/nonexistent/frameprepd.conf"));
	fprep__config_fini(&cfg);

	args[0] = "--bogus";
	args[1] = NULL;
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "--bogus"));
	args[0] = "--max-width";
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "--max-width needs a value"));
	args[0] = "stray";
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "'stray'"));
	args[0] = "--kernels";
	args[1] = "";
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "--kernels"));

	/* More listen URLs than the daemon holds. */
	for (int i = 0; i <= FPREP__MAX_LISTEN; i++) {
		char *u = urls + i * 40;

		snprintf(u, 40, "tcp://127.0.0.1:%d", 7000 + i);
		many[2 * i] = "--listen";
		many[2 * i + 1] = u;
	}
	many[2 * (FPREP__MAX_LISTEN + 1)] = NULL;
	assert_int_equal(config_run(&cfg, many), FPREP__CONFIG_ERROR);
	assert_non_null(strstr(config_err, "--listen"));
	many[2 * FPREP__MAX_LISTEN] = NULL;
	assert_int_equal(config_run(&cfg, many), 0);
	assert_int_equal(cfg.nlisten, FPREP__MAX_LISTEN);
}

/* --help names every setting with its default; --version; both ask the
 * caller to exit 0. */
static void help_version(void **state)
{
	static const char *const keys[] = {"--listen",
	                                   "--device",
	                                   "--workers",
	                                   "--max-inflight",
	                                   "--max-width",
	                                   "--max-height",
	                                   "--max-frame-bytes",
	                                   "--max-out-width",
	                                   "--max-out-height",
	                                   "--max-tensor-bytes",
	                                   "--send-timeout-ms",
	                                   "--shutdown-timeout-ms",
	                                   "--slots",
	                                   "--kernels",
	                                   "--kernel-cache",
	                                   "--log-level",
	                                   "--socket-mode",
	                                   "--max-regions",
	                                   "--max-region-bytes",
	                                   "--max-shm-bytes",
	                                   "--config"};
	const char *args[] = {"--help", NULL};
	fprep__config cfg;

	(void)state;
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_EXIT);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strstr(config_out, keys[i]) == NULL)
			fail_msg("--help lacks %s", keys[i]);
	assert_non_null(strstr(config_out, "(default: 67108864)"));
	args[0] = "--version";
	assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_EXIT);
	assert_non_null(strstr(config_out, FPREP_VERSION_STRING));
	fprep__config_fini(&cfg);
}

/* A value each OTHER setting takes, as show prints it back, and one it
 * refuses with a word of the message: a new OTHER row needs a line here
 * (settings_table fails without one). */
static const struct {
	const char *name, *good, *shown, *bad, *says;
} config_other_values[] = {
        {"listen", "tcp://127.0.0.1:5555", "tcp://127.0.0.1:5555",
         "tcp://127.0.0.1", "1..65535"},
        {"device", "1023", "1023", "1024", "0..1023"},
        {"kernels", "/tmp/kernels", "/tmp/kernels", "", "empty directory"},
        {"kernel-cache", "off", "off", "", "empty directory"},
        {"metrics-listen", "127.0.0.1:9464", "127.0.0.1:9464",
         "127.0.0.1:65536", "0..65535"},
};

/* config_canonical returns the word --help shows for value v of s (the
 * first word, not an alias, with that value), or NULL. */
static const char *config_canonical(const struct fprep__config_setting *s,
                                    int64_t v)
{
	for (const struct fprep__config_word *w = s->words;
	     w != NULL && w->word != NULL; w++)
		if (w->value == v)
			return w->word;
	return NULL;
}

/* config_flag writes the command line that gives s the value val into
 * args (whose first element is buf): "--name val", or "--name=val" for a
 * flag whose value is optional. */
static void config_flag(const struct fprep__config_setting *s, const char *val,
                        char *buf, size_t size, const char **args)
{
	if (s->bare) {
		snprintf(buf, size, "--%s=%s", s->name, val);
		args[1] = NULL;
	} else {
		snprintf(buf, size, "--%s", s->name);
	}
}

/* config_accepts checks that val sets s, as a flag and as a file key, to
 * a value that show prints as shown (and, for a NUMBER or WORD, that
 * reads back as v). */
static void config_accepts(const struct fprep__config_setting *s,
                           const char *val, const char *shown, int64_t v)
{
	char flag[160], text[256], path[64], buf[FPREP__URL_SIZE];
	const char *args[] = {flag, val, NULL};
	const char *file[] = {"--config", path, NULL};
	fprep__config cfg;

	config_flag(s, val, flag, sizeof(flag), args);
	snprintf(text, sizeof(text), "%s = %s\n", s->name, val);
	config_file(path, text);
	for (int from_file = 0; from_file < 2; from_file++) {
		if (config_run(&cfg, from_file ? file : args) != 0)
			fail_msg("%s %s (%s): %s", flag, val,
			         from_file ? "file" : "flag", config_err);
		fprep__config_show(&cfg, s, buf, sizeof(buf));
		if (strcmp(buf, shown) != 0)
			fail_msg("%s %s shows as %s, not %s", flag, val, buf,
			         shown);
		if (s->type != FPREP__CONFIG_OTHER)
			assert_true(fprep__config_get(&cfg, s) == v);
		fprep__config_fini(&cfg);
	}
	unlink(path);
}

/* config_refuses checks that val is refused for s, as a flag and as a file
 * key: result 2 and a message naming the setting, the value and says
 * (the bound, or what is accepted). */
static void config_refuses(const struct fprep__config_setting *s,
                           const char *val, const char *says)
{
	char arg[160], flag[160], text[256], path[64];
	const char *args[] = {arg, val, NULL};
	const char *file[] = {"--config", path, NULL};
	fprep__config cfg;

	config_flag(s, val, arg, sizeof(arg), args);
	snprintf(flag, sizeof(flag), "--%s", s->name);
	snprintf(text, sizeof(text), "%s = %s\n", s->name, val);
	config_file(path, text);
	for (int from_file = 0; from_file < 2; from_file++) {
		if (from_file)
			snprintf(flag, sizeof(flag), "%s: %s", path, s->name);
		if (config_run(&cfg, from_file ? file : args) !=
		            FPREP__CONFIG_ERROR ||
		    strstr(config_err, flag) == NULL ||
		    strstr(config_err, val) == NULL ||
		    strstr(config_err, says) == NULL)
			fail_msg("%s '%s' (%s): want an error naming %s, %s "
			         "and %s: %s",
			         s->name, val, from_file ? "file" : "flag",
			         flag, val, says, config_err);
		fprep__config_fini(&cfg);
		snprintf(flag, sizeof(flag), "--%s", s->name);
	}
	unlink(path);
}

/* config_in_example checks that deploy/frameprepd.conf documents the key
 * (a "key = " line, commented out or not). */
static void config_in_example(const char *name)
{
	char line[1024];
	size_t len = strlen(name);
	int found = 0;
	FILE *in = fopen(CONFIG_EXAMPLE, "r");

	assert_non_null(in);
	while (!found && fgets(line, sizeof(line), in) != NULL) {
		const char *p = line + (line[0] == '#');

		found = strncmp(p, name, len) == 0 &&
		        strncmp(p + len, " = ", 3) == 0;
	}
	fclose(in);
	if (!found)
		fail_msg("%s: no '%s = ' line in %s", name, name,
		         CONFIG_EXAMPLE);
}

/* Every row of the settings table: its flag is in --help with the default
 * that a fresh config shows, and in the example file; its default is
 * within its bounds (or one of its words) and fits its field; its bounds
 * and words are accepted as a flag and as a file key; a value past each
 * bound, or outside the words, is refused with a message naming the key,
 * the value and the bound or the words. */
static void settings_table(void **state)
{
	const char *help[] = {"--help", NULL};
	char help_text[sizeof(config_out)], def[FPREP__URL_SIZE];
	char want[FPREP__URL_SIZE + 64];
	char num[32], bound[64];
	fprep__config cfg, fresh;

	(void)state;
	assert_true(fprep__config_nsettings >= 32);
	assert_int_equal(config_run(&cfg, help), FPREP__CONFIG_EXIT);
	memcpy(help_text, config_out, sizeof(help_text));
	fprep__config_init(&fresh);
	for (size_t k = 0; k < fprep__config_nsettings; k++) {
		const struct fprep__config_setting *s =
		        &fprep__config_settings[k];
		const char *line, *end;

		for (size_t j = 0; j < k; j++)
			assert_string_not_equal(s->name,
			                        fprep__config_settings[j].name);
		config_in_example(s->name);

		/* --help: "  --name ARG ... (default: shown)". */
		snprintf(want, sizeof(want), "  --%s %s ", s->name, s->arg);
		line = strstr(help_text, want);
		if (line == NULL)
			fail_msg("--help lacks '%s'", want);
		end = strchr(line, '\n');
		fprep__config_show(&fresh, s, def, sizeof(def));
		snprintf(want, sizeof(want), "(default: %s)\n", def);
		if (end == NULL ||
		    strncmp(end + 1 - strlen(want), want, strlen(want)) != 0)
			fail_msg("--%s: --help does not end with %s", s->name,
			         want);

		if (s->type == FPREP__CONFIG_OTHER) {
			size_t i = 0;

			while (i < sizeof(config_other_values) /
			                       sizeof(config_other_values[0]) &&
			       strcmp(config_other_values[i].name, s->name) !=
			               0)
				i++;
			if (i == sizeof(config_other_values) /
			                 sizeof(config_other_values[0]))
				fail_msg("--%s: no test values", s->name);
			config_accepts(s, config_other_values[i].good,
			               config_other_values[i].shown, 0);
			config_refuses(s, config_other_values[i].bad,
			               config_other_values[i].says);
			continue;
		}

		/* The default: the field holds it, in bounds or a word. */
		assert_true(fprep__config_get(&fresh, s) == s->def);
		if (s->type == FPREP__CONFIG_WORD ||
		    config_canonical(s, s->def) != NULL)
			assert_non_null(config_canonical(s, s->def));
		else if (s->def < 0 || (uint64_t)s->def < s->min ||
		         (uint64_t)s->def > s->max)
			fail_msg("--%s: default %lld out of bounds", s->name,
			         (long long)s->def);

		/* Every word, aliases too. */
		for (const struct fprep__config_word *w = s->words;
		     w != NULL && w->word != NULL; w++)
			config_accepts(s, w->word,
			               config_canonical(s, w->value), w->value);
		if (s->bare) {
			const char *bare[] = {want, NULL};

			snprintf(want, sizeof(want), "--%s", s->name);
			assert_int_equal(config_run(&cfg, bare), 0);
			assert_true(fprep__config_get(&cfg, s) == 1);
			fprep__config_fini(&cfg);
		}
		if (s->type == FPREP__CONFIG_WORD) {
			for (const struct fprep__config_word *w = s->words;
			     w->word != NULL; w++)
				if (!w->alias)
					config_refuses(s, "no-such-word",
					               w->word);
			continue;
		}

		/* A NUMBER: the bounds fit the field, both are accepted,
		 * and one past each is refused naming them. */
		assert_true(s->min <= s->max);
		assert_true(s->max <= (s->field == FPREP__CONFIG_INT ? INT32_MAX
		                       : s->field == FPREP__CONFIG_UNSIGNED
		                               ? UINT32_MAX
		                               : INT64_MAX));
		snprintf(bound, sizeof(bound), "%llu..%llu",
		         (unsigned long long)s->min,
		         (unsigned long long)s->max);
		snprintf(num, sizeof(num), "%llu", (unsigned long long)s->min);
		config_accepts(s, num, num, (int64_t)s->min);
		snprintf(num, sizeof(num), "%llu", (unsigned long long)s->max);
		config_accepts(s, num, num, (int64_t)s->max);
		snprintf(num, sizeof(num), "%llu",
		         (unsigned long long)s->max + 1);
		config_refuses(s, num, bound);
		if (s->min > 0) {
			snprintf(num, sizeof(num), "%llu",
			         (unsigned long long)s->min - 1);
			config_refuses(s, num, bound);
		}
		config_refuses(s, "12x", bound);
	}
	fprep__config_fini(&fresh);
}

/* A tcp:// listen names its port: without one (or with port 0) nng would
 * listen on a port that nobody is told. */
static void listen_ports(void **state)
{
	static const char *const bad[] = {
	        "tcp://127.0.0.1", "tcp://127.0.0.1:",  "tcp://127.0.0.1:0",
	        "tcp://[::1]",     "tcp://[::1]:65536", "tcp://host:http",
	};
	static const char *const good[] = {"tcp://127.0.0.1:1",
	                                   "tcp://[::1]:65535", "tcp://:5555",
	                                   "tcp://*:5555"};
	const char *args[] = {"--listen", NULL, NULL};
	fprep__config cfg;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		args[1] = bad[i];
		assert_int_equal(config_run(&cfg, args), FPREP__CONFIG_ERROR);
		if (strstr(config_err, "tcp://HOST:PORT") == NULL ||
		    strstr(config_err, bad[i]) == NULL)
			fail_msg("%s: %s", bad[i], config_err);
		fprep__config_fini(&cfg);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		args[1] = good[i];
		assert_int_equal(config_run(&cfg, args), 0);
		assert_string_equal(cfg.listen[0], good[i]);
		fprep__config_fini(&cfg);
	}
}

/* config_rewrite replaces the file at path with text. */
static void config_rewrite(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static char changed[512], kept[256], err[512];

/* reload_with rewrites the file at path with text (unless NULL) and runs
 * fprep__config_reload on cfg into changed, kept and err. */
static int reload_with(fprep__config *cfg, const char *path, const char *text)
{
	if (text != NULL)
		config_rewrite(path, text);
	return fprep__config_reload(cfg, changed, sizeof(changed), kept,
	                            sizeof(kept), err, sizeof(err));
}

/* fprep__config_reload: the file read again through the same parser; the
 * live settings change, the others are named and kept, flags still win,
 * a broken file changes nothing, no --config: nothing to reload. */
static void reload(void **state)
{
	static char path[64];
	static char *argv[] = {"frameprepd",   "--config", path,
	                       "--max-height", "900",      NULL};
	fprep__config cfg, none;
	int live = 0;

	(void)state;
	config_file(path, "max-width = 4000\nmax-height = 100\n"
	                  "lanes = 2\nspin-us = auto\n");
	fprep__config_init(&cfg);
	assert_int_equal(fprep__config_parse(&cfg, 5, argv, stdout, stderr), 0);
	cfg.spin_auto_us = 0;
	cfg.spin_us = 0;
	assert_int_equal(cfg.limits.max_width, 4000);
	assert_int_equal(cfg.limits.max_height, 900);

	/* Nothing changed: nothing said. */
	assert_int_equal(reload_with(&cfg, path, NULL), 0);
	assert_string_equal(changed, "");
	assert_string_equal(kept, "");

	assert_int_equal(
	        reload_with(&cfg, path,
	                    "[frameprepd]\nmax-width = 300\n"
	                    "max-height = 100\nlanes = 3\nslots = 8\n"
	                    "log-level = debug\nsend-timeout-ms = 250\n"
	                    "spin-us = 40\n"),
	        0);
	assert_string_equal(changed,
	                    "max-width 4000 -> 300, send-timeout-ms 10000 -> "
	                    "250, log-level info -> debug, spin-us 0 -> 40");
	assert_string_equal(kept, "lanes, slots");

	/* max-inflight-per-conn: raised at once, a lower value kept. */
	assert_int_equal(
	        reload_with(&cfg, path,
	                    "max-width = 300\nlanes = 3\nslots = 8\n"
	                    "log-level = debug\nsend-timeout-ms = 250\n"
	                    "spin-us = 40\nmax-inflight-per-conn = 32\n"),
	        0);
	assert_string_equal(changed, "max-inflight-per-conn 16 -> 32");
	assert_int_equal(cfg.max_inflight_per_conn, 32);
	assert_int_equal(
	        reload_with(&cfg, path,
	                    "max-width = 300\nlanes = 3\nslots = 8\n"
	                    "log-level = debug\nsend-timeout-ms = 250\n"
	                    "spin-us = 40\nmax-inflight-per-conn = 4\n"),
	        0);
	assert_string_equal(changed, "");
	assert_string_equal(kept, "lanes, max-inflight-per-conn (lowered), "
	                          "slots");
	assert_int_equal(cfg.max_inflight_per_conn, 32);
	assert_int_equal(cfg.limits.max_width, 300);
	assert_int_equal(cfg.limits.max_height, 900); /* the flag's */
	assert_int_equal(cfg.send_timeout_ms, 250);
	assert_int_equal(cfg.log_level, FPREP_LOG_DEBUG);
	assert_int_equal(cfg.spin_us, 40);
	assert_int_equal(cfg.lanes, 2);
	assert_int_equal(cfg.slots, 4);

	/* A broken file: refused whole, with the parser's words. */
	assert_int_equal(reload_with(&cfg, path,
	                             "max-width = 200\nmax-tensor-bytes = -1\n"
	                             "nonsense = 1\n"),
	                 FPREP__RELOAD_REFUSED);
	assert_non_null(strstr(err, "max-tensor-bytes: '-1' is not an "
	                            "integer in 1..17179869184; "));
	assert_non_null(strstr(err, "nonsense: unknown key"));
	assert_null(strstr(err, "frameprepd: "));
	assert_int_equal(cfg.limits.max_width, 300);
	assert_string_equal(changed, "");

	/* A key gone from the file goes back to its default; auto is what
	 * it meant at start. */
	assert_int_equal(reload_with(&cfg, path, "lanes = 2\nspin-us = auto\n"),
	                 0);
	assert_int_equal(cfg.limits.max_width, 8192);
	assert_int_equal(cfg.spin_us, 0);
	assert_int_equal(cfg.log_level, FPREP_LOG_INFO);
	unlink(path);

	/* The file gone: refused, naming it. */
	assert_int_equal(reload_with(&cfg, path, NULL), FPREP__RELOAD_REFUSED);
	assert_non_null(strstr(err, "cannot open"));
	fprep__config_fini(&cfg);

	/* Started without --config: nothing to reload. */
	fprep__config_init(&none);
	assert_int_equal(fprep__config_parse(&none, 1, argv, stdout, stderr),
	                 0);
	assert_int_equal(reload_with(&none, path, NULL), FPREP__RELOAD_NO_FILE);
	fprep__config_fini(&none);

	/* Only NUMBER and WORD rows can be live (reload copies their
	 * field), and --help names each live one. */
	for (size_t k = 0; k < fprep__config_nsettings; k++) {
		const struct fprep__config_setting *s =
		        &fprep__config_settings[k];

		if (!s->live)
			continue;
		live++;
		assert_true(s->type != FPREP__CONFIG_OTHER);
	}
	assert_int_equal(live, 28);
}

CMOCKA_MAIN({
        cmocka_unit_test(defaults),
        cmocka_unit_test(example_file),
        cmocka_unit_test(flags_over_file),
        cmocka_unit_test(device_lists),
        cmocka_unit_test(bad_values),
        cmocka_unit_test(range_edges),
        cmocka_unit_test(bad_files_and_flags),
        cmocka_unit_test(help_version),
        cmocka_unit_test(trace_transfer),
        cmocka_unit_test(spin_us),
        cmocka_unit_test(h2d_rows),
        cmocka_unit_test(settings_table),
        cmocka_unit_test(listen_ports),
        cmocka_unit_test(reload),
})
