/*
 * main.c: frameprepd, the frameprep daemon.
 *
 * Reads the settings (config.c), opens the backend the device choice asks
 * for (GPU lanes, --lanes on each GPU chosen, over one multi backend when
 * there are several; else the CPU worker threads) and runs the
 * server loop (server.c) in the foreground until SIGINT or SIGTERM. Exit
 * status: 0 after a clean shutdown, 1 on a runtime failure (including a
 * fatal device error: the supervisor restarts the daemon), 2 for bad
 * settings.
 */
#include <signal.h>
#include <stdio.h>

#include "backend.h"
#include "config.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "shm_region.h"

#ifdef FPREP_HAVE_CUDA
#include "backend_multi.h"
#include "gpu/backend_cuda.h"
#endif

#ifdef FPREP_HAVE_CUDA
/* main_open_lanes starts cfg->lanes GPU lanes on each of the n devices:
 * the backend itself when that makes one lane, else a multi backend over
 * them (backend_multi.h). */
static int main_open_lanes(fprep__backend **bp, const fprep__config *cfg,
                           const int *devices, unsigned n)
{
	fprep__multi_lane lanes[FPREP__MAX_LANES];
	unsigned nl = 0;
	int rv = 0;

	if ((size_t)n * cfg->lanes > FPREP__MAX_LANES) {
		fprep__log(FPREP_LOG_ERR,
		           "%u devices x %u lanes: more than %d lanes", n,
		           cfg->lanes, FPREP__MAX_LANES);
		return FPREP_EINVAL;
	}
	for (unsigned d = 0; d < n && rv == 0; d++)
		for (unsigned k = 0; k < cfg->lanes && rv == 0; k++) {
			fprep__cuda_config cc = {
			        .device = devices[d],
			        .lane = nl,
			        .slots = cfg->slots,
			        .kernel_dir = cfg->kernel_dir,
			        .cache_dir = cfg->kernel_cache,
			        .cache_enabled = cfg->cache_enabled,
			        .transfer = cfg->transfer,
			        .all_rows = cfg->h2d_all_rows,
			        .trace = cfg->trace,
			        .spin_ns =
			                (uint64_t)(cfg->spin_us == FPREP__SPIN_AUTO
			                                   ? FPREP__SPIN_GPU_US
			                                   : cfg->spin_us) *
			                1000u,
			};
			fprep__multi_lane *l = &lanes[nl];

			rv = fprep__backend_cuda_open(&l->backend, &cc);
			if (rv == 0) {
				fprep__backend_cuda_identity(
				        l->backend, &l->device, l->uuid,
				        l->name, sizeof(l->name));
				nl++;
			}
		}
	if (rv != 0) {
		while (nl-- > 0)
			lanes[nl].backend->close(lanes[nl].backend, 0);
		return rv;
	}
	if (nl == 1) {
		*bp = lanes[0].backend;
		return 0;
	}
	return fprep__backend_multi_open(bp, lanes, nl);
}
#endif

static int main_gpu_count(void)
{
#ifdef FPREP_HAVE_CUDA
	return fprep__cuda_device_count();
#else
	return 0;
#endif
}

/* main_gpu_list works out the GPUs cfg names (none: the CPU) and writes
 * them as "cuda:0,1" into name. Returns 0 or FPREP_EUNSUPPORTED, logged. */
static int main_gpu_list(const fprep__config *cfg, int *devices, unsigned *n,
                         char *name, size_t size)
{
	int count = cfg->device == FPREP__DEVICE_CPU ? 0 : main_gpu_count();
	size_t len;

	*n = 0;
	if (cfg->device == FPREP__DEVICE_AUTO) {
#ifdef FPREP_HAVE_CUDA
		if (count == 0)
			fprep__log(FPREP_LOG_NOTICE,
			           "device auto: no usable CUDA device (no GPU "
			           "or no driver): using the CPU backend");
#else
		fprep__log(FPREP_LOG_NOTICE,
		           "device auto: built without CUDA: using the CPU "
		           "backend");
#endif
		if (count > 0)
			devices[(*n)++] = 0;
	} else if (cfg->device == FPREP__DEVICE_ALL) {
		if (count == 0) {
			fprep__log(FPREP_LOG_ERR,
			           "device all: no usable CUDA device");
			return FPREP_EUNSUPPORTED;
		}
		for (int d = 0; d < count && d < FPREP__MAX_DEVICES; d++)
			devices[(*n)++] = d;
	} else if (cfg->device != FPREP__DEVICE_CPU) {
		for (unsigned i = 0; i < cfg->ndevices; i++) {
			if (cfg->devices[i] >= count) {
#ifdef FPREP_HAVE_CUDA
				fprep__log(FPREP_LOG_ERR,
				           "device %d: no such CUDA device (%d "
				           "usable)",
				           cfg->devices[i], count);
#else
				fprep__log(
				        FPREP_LOG_ERR,
				        "device %d: this frameprepd was built "
				        "without CUDA (use --device cpu or "
				        "auto)",
				        cfg->devices[i]);
#endif
				return FPREP_EUNSUPPORTED;
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
 * device's name into device. Returns 0 or an enum fprep_err, logged. */
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
#ifdef FPREP_HAVE_CUDA
	if (n > 0)
		return main_open_lanes(bp, cfg, devices, n);
#endif
	rv = fprep__backend_cpu_open(bp, cfg->workers);
	if (rv != 0)
		fprep__log(FPREP_LOG_ERR, "CPU backend: %s",
		           fprep_strerror(rv));
	return rv;
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
		return rv == FPREP__CONFIG_EXIT ? 0 : 2;
	}
	fprep__log_set_level(cfg.log_level);
	/* A peer that goes away must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	/* A client that shrinks its shared memory must not kill it either. */
	if (fprep__shm_guard_install() != 0) {
		fprep__log(FPREP_LOG_ERR, "frameprepd: cannot install the "
		                          "SIGBUS handler: exiting");
		fprep__config_fini(&cfg);
		return 1;
	}
	rv = main_open_backend(&backend, &cfg, device, sizeof(device), devices,
	                       &ndevices);
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "frameprepd: no backend: exiting");
		fprep__config_fini(&cfg);
		return 1;
	}
	if (cfg.spin_us == FPREP__SPIN_AUTO)
		cfg.spin_us = ndevices > 0 ? FPREP__SPIN_GPU_US : 0;
	if (cfg.metrics_listen != NULL) {
		if (fprep__metrics_open(cfg.metrics_listen, device) != 0) {
			fprep__log(FPREP_LOG_ERR, "frameprepd: no metrics "
			                          "endpoint: exiting");
			backend->close(backend, cfg.shutdown_timeout_ms);
			fprep__config_fini(&cfg);
			return 1;
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
	fprep__metrics_close();
	fprep__config_fini(&cfg);
	return rv;
}
