/*
 * main.c: frameprepd, the frameprep daemon.
 *
 * Reads the settings (config.c), opens the backend the device choice asks
 * for (GPU lanes, --lanes on each GPU chosen, through gpu_lanes.h, which a
 * CPU-only build implements with a stub; else the CPU worker threads) and
 * runs the server loop (server.c) in the foreground until SIGINT or
 * SIGTERM. SIGHUP, taken on the loop thread (shutdown.c), reads the
 * --config file again and applies its live settings (config.c). Exit
 * status: 0 after a clean shutdown, 1 on a runtime failure (including a
 * fatal device error: the supervisor restarts the daemon), 2 for settings
 * that a restart cannot mend (bad values, a GPU named that this build or
 * this machine does not have).
 */
#include <signal.h>
#include <stdio.h>

#include "backend.h"
#include "config.h"
#include "config_values.h"
#include "gpu_lanes.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "shm_region.h"

/* Exit statuses (see --help). */
#define MAIN_EXIT_FAILURE  1 /* the supervisor restarts the daemon */
#define MAIN_EXIT_SETTINGS 2 /* a restart cannot help */

/* main_gpu_list works out the GPUs cfg names (none: the CPU) and writes
 * them as "cuda:0,1" into name. Returns 0, or MAIN_EXIT_SETTINGS after
 * logging why when a GPU is named that this daemon cannot use: built
 * without CUDA, or no such device on this machine. Restarting would only
 * repeat the refusal every few seconds; the operator changes --device
 * (or, where a driver loads late, orders the unit after it). */
static int main_gpu_list(const fprep__config *cfg, int *devices, unsigned *n,
                         char *name, size_t size)
{
	int count = cfg->device == FPREP__DEVICE_CPU ? 0 : fprep__gpu_count();
	size_t len;

	*n = 0;
	if (cfg->device == FPREP__DEVICE_AUTO) {
		if (count == FPREP__GPU_NOT_BUILT)
			fprep__log(FPREP_LOG_NOTICE,
			           "device auto: built without CUDA: using the "
			           "CPU backend");
		else if (count == 0)
			fprep__log(FPREP_LOG_NOTICE,
			           "device auto: no usable CUDA device (no GPU "
			           "or no driver): using the CPU backend");
		if (count > 0)
			devices[(*n)++] = 0;
	} else if (count == FPREP__GPU_NOT_BUILT) {
		fprep__config_values_show_device(cfg, name, size);
		fprep__log(FPREP_LOG_ERR,
		           "device %s: this frameprepd was built without CUDA "
		           "(use --device cpu or auto)",
		           name);
		return MAIN_EXIT_SETTINGS;
	} else if (cfg->device == FPREP__DEVICE_ALL) {
		if (count == 0) {
			fprep__log(FPREP_LOG_ERR,
			           "device all: no usable CUDA device (no GPU "
			           "or no driver)");
			return MAIN_EXIT_SETTINGS;
		}
		for (int d = 0; d < count && d < FPREP__MAX_DEVICES; d++)
			devices[(*n)++] = d;
	} else if (cfg->device != FPREP__DEVICE_CPU) {
		for (unsigned i = 0; i < cfg->ndevices; i++) {
			if (cfg->devices[i] >= count) {
				fprep__log(FPREP_LOG_ERR,
				           "device %d: no such CUDA device (%d "
				           "usable)",
				           cfg->devices[i], count);
				return MAIN_EXIT_SETTINGS;
			}
			devices[(*n)++] = cfg->devices[i];
		}
	}
	len = (size_t)snprintf(name, size, *n > 0 ? "cuda:" : "cpu");
	for (unsigned i = 0; i < *n && len < size; i++)
		len += (size_t)snprintf(name + len, size - len, "%s%d",
		                        i > 0 ? "," : "", devices[i]);
	return 0;
}

/* main_open_backend opens the backend cfg->device names and writes the
 * device's name into device. Returns 0, or an exit status after logging
 * why (main_gpu_list). */
static int main_open_backend(fprep__backend **bp, const fprep__config *cfg,
                             char *device, size_t size, int *devices,
                             unsigned *n_out)
{
	unsigned n;
	int rv;

	rv = main_gpu_list(cfg, devices, &n, device, size);
	*n_out = n;
	if (rv != 0)
		return rv;
	rv = n > 0 ? fprep__gpu_open_lanes(bp, cfg, devices, n)
	           : fprep__backend_cpu_open(bp, cfg->workers);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "%s backend: %s", device,
		           fprep_strerror(rv));
		return MAIN_EXIT_FAILURE;
	}
	return 0;
}

int main(int argc, char **argv)
{
	fprep__config cfg;
	fprep__backend *backend = NULL;
	char device[256];
	int devices[FPREP__MAX_DEVICES], lane_devices[FPREP__MAX_LANES];
	unsigned ndevices = 0, nlanes = 0;
	int rv;

	fprep__config_init(&cfg);
	rv = fprep__config_parse(&cfg, argc, argv, stdout, stderr);
	if (rv != 0) {
		fprep__config_fini(&cfg);
		return rv == FPREP__CONFIG_EXIT ? 0 : MAIN_EXIT_SETTINGS;
	}
	fprep__log_set_level(cfg.log_level);
	/* A peer that goes away must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	/* Nor a SIGHUP before the loop takes it (a reload asked during
	 * start-up, a terminal's hang-up): libuv's handler replaces this. */
	signal(SIGHUP, SIG_IGN);
	/* A client that shrinks its shared memory must not kill it either. */
	if (fprep__shm_guard_install() != 0) {
		fprep__log(FPREP_LOG_ERR, "frameprepd: cannot install the "
		                          "SIGBUS handler: exiting");
		fprep__config_fini(&cfg);
		return MAIN_EXIT_FAILURE;
	}
	rv = main_open_backend(&backend, &cfg, device, sizeof(device), devices,
	                       &ndevices);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "frameprepd: no backend: exiting");
		fprep__config_fini(&cfg);
		return rv;
	}
	cfg.spin_auto_us = ndevices > 0 ? FPREP__SPIN_GPU_US : 0;
	if (cfg.spin_us == FPREP__SPIN_AUTO)
		cfg.spin_us = cfg.spin_auto_us;
	if (cfg.metrics_listen != NULL) {
		if (fprep__metrics_http_open(cfg.metrics_listen, device) != 0) {
			fprep__log(FPREP_LOG_ERR, "frameprepd: no metrics "
			                          "endpoint: exiting");
			backend->close(backend, cfg.shutdown_timeout_ms);
			fprep__config_fini(&cfg);
			return MAIN_EXIT_FAILURE;
		}
		for (unsigned d = 0; d < ndevices; d++)
			for (unsigned k = 0;
			     k < cfg.lanes && nlanes < FPREP__MAX_LANES; k++)
				lane_devices[nlanes++] = devices[d];
		if (nlanes > 0)
			fprep__metrics_set_lanes(lane_devices, nlanes);
		fprep__metrics_set_backend(backend);
	}
	rv = fprep__server_run(&cfg, backend, device);
	fprep__metrics_http_close();
	fprep__config_fini(&cfg);
	return rv;
}
