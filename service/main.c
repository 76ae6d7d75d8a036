/*
 * main.c: frameprepd, the frameprep daemon.
 *
 * Reads the settings (config.c), opens the backend the device choice asks
 * for (the GPU when there is one, else the CPU worker threads) and runs the
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
#include "gpu/backend_cuda.h"
#endif

/* main_open_gpu starts the GPU backend on device. */
static int main_open_gpu(fprep__backend **bp, const fprep__config *cfg,
                         int device)
{
#ifdef FPREP_HAVE_CUDA
	fprep__cuda_config cc = {
	        .device = device,
	        .slots = cfg->slots,
	        .kernel_dir = cfg->kernel_dir,
	        .cache_dir = cfg->kernel_cache,
	        .cache_enabled = cfg->cache_enabled,
	        .transfer = cfg->transfer,
	        .trace = cfg->trace,
	};

	return fprep__backend_cuda_open(bp, &cc);
#else
	(void)bp;
	(void)cfg;
	(void)device;
	return FPREP_EUNSUPPORTED;
#endif
}

static int main_gpu_count(void)
{
#ifdef FPREP_HAVE_CUDA
	return fprep__cuda_device_count();
#else
	return 0;
#endif
}

/* main_open_backend opens the backend cfg->device names and writes the
 * device's name into device. Returns 0 or an enum fprep_err, logged. */
static int main_open_backend(fprep__backend **bp, const fprep__config *cfg,
                             char *device, size_t size)
{
	int count, rv;

	if (cfg->device == FPREP__DEVICE_AUTO) {
		count = main_gpu_count();
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
		if (count > 0) {
			snprintf(device, size, "cuda:0");
			return main_open_gpu(bp, cfg, 0);
		}
	} else if (cfg->device >= 0) {
		count = main_gpu_count();
		if (cfg->device >= count) {
#ifdef FPREP_HAVE_CUDA
			fprep__log(FPREP_LOG_ERR,
			           "device %d: no such CUDA device (%d usable)",
			           cfg->device, count);
#else
			fprep__log(
			        FPREP_LOG_ERR,
			        "device %d: this frameprepd was built without "
			        "CUDA (use --device cpu or auto)",
			        cfg->device);
#endif
			return FPREP_EUNSUPPORTED;
		}
		snprintf(device, size, "cuda:%d", cfg->device);
		return main_open_gpu(bp, cfg, cfg->device);
	}
	snprintf(device, size, "cpu");
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
	char device[32];
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
	rv = main_open_backend(&backend, &cfg, device, sizeof(device));
	if (rv != 0) {
		fprep__log(FPREP_LOG_ERR, "frameprepd: no backend: exiting");
		fprep__config_fini(&cfg);
		return 1;
	}
	if (cfg.metrics_listen != NULL) {
		if (fprep__metrics_open(cfg.metrics_listen, device) != 0) {
			fprep__log(FPREP_LOG_ERR, "frameprepd: no metrics "
			                          "endpoint: exiting");
			backend->close(backend, cfg.shutdown_timeout_ms);
			fprep__config_fini(&cfg);
			return 1;
		}
		fprep__metrics_set_backend(backend);
	}
	rv = fprep__server_run(&cfg, backend, device);
	fprep__metrics_close();
	fprep__config_fini(&cfg);
	return rv;
}
