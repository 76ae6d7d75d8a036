/*
 * backend_cuda.c: one GPU lane of frameprepd (see backend_cuda.h): its
 * open, close, submit, INFO and metrics; the top of the lane's files,
 * which calls the rest (cuda_core_internal.h lists them from the top down).
 *
 * The design is simple: submit() appends the job to a pending list under a
 * mutex and wakes the lane thread; it never blocks on the GPU. The lane
 * thread takes the oldest pending job as soon as a staging slot is free
 * (JPEG frames among themselves by turns of their clients, cuda_lane.c),
 * copies the payload into the slot's pinned input (skipped when the input
 * is already pinned), and enqueues three steps on three non-blocking
 * streams:
 *
 *   H2D stream:     memcpy pinned -> device input          record ev_h2d
 *   compute stream: wait ev_h2d; letterbox kernel           record ev_kern
 *   D2H stream:     wait ev_kern; memcpy -> pinned output   record ev_done
 *
 * so frame k+1's H2D runs while frame k's kernel and frame k-1's D2H do.
 * The slot then joins the in-flight FIFO. The completion thread waits on
 * the oldest slot's ev_done, copies the pinned output into the job, fills
 * the timings, frees the slot and calls done. A frame alone in the lane
 * (no other in flight, none pending) is not handed over: the lane thread
 * waits for its ev_done itself and completes it (fprep__cuda_wait_lane_finish),
 * so a request at concurrency 1 crosses one backend thread, not two; a new job
 * hands it to the completion thread at once.
 *
 * The lane's parts, a file each: the lane thread (cuda_lane.c), the
 * staging slots and the work enqueued on them, frames, ROIs and batch
 * elements (cuda_slot.c), completion, waits and pacing (cuda_wait.c), the
 * JPEG decoders (cuda_decoder.c), CUDA regions and IPC (cuda_region.c),
 * and what all of them use (cuda_core.c).
 * A video stream's jobs never reach the lane thread: submit hands them to
 * the stream's NVDEC session, which runs them on its own thread
 * (cuda_video.c), and close stops those threads with the lane.
 *
 * Every CUDA call goes through FPREP__CUDA. A failed request is answered
 * with FPREP_ECUDA naming the call and error; a sticky error (the context is
 * unusable) marks this and every later job fatal.
 */
#include "gpu/backend_cuda.h"
#include "gpu/cuda_core_internal.h"

/* The kernels by rounding (enum fprep_rounding: float, exact), source
 * family (interleaved pixels, NV12, I420, YUYV) and dtype - 1. */
static const char *const cuda_kernel_names[CUDA_ROUNDINGS][CUDA_FAMILIES][3] = {
        {{"fprep_letterbox_f32", "fprep_letterbox_f16", "fprep_letterbox_u8"},
         {"fprep_letterbox_nv12_f32", "fprep_letterbox_nv12_f16",
          "fprep_letterbox_nv12_u8"},
         {"fprep_letterbox_i420_f32", "fprep_letterbox_i420_f16",
          "fprep_letterbox_i420_u8"},
         {"fprep_letterbox_yuyv_f32", "fprep_letterbox_yuyv_f16",
          "fprep_letterbox_yuyv_u8"}},
        {{"fprep_letterbox_exact_f32", "fprep_letterbox_exact_f16",
          "fprep_letterbox_exact_u8"},
         {"fprep_letterbox_nv12_exact_f32", "fprep_letterbox_nv12_exact_f16",
          "fprep_letterbox_nv12_exact_u8"},
         {"fprep_letterbox_i420_exact_f32", "fprep_letterbox_i420_exact_f16",
          "fprep_letterbox_i420_exact_u8"},
         {"fprep_letterbox_yuyv_exact_f32", "fprep_letterbox_yuyv_exact_f16",
          "fprep_letterbox_yuyv_exact_u8"}},
};
_Static_assert(FPREP_ROUNDING_OPENCV == CUDA_ROUNDINGS - 1, "roundings");

static int cuda_submit(fprep__backend *b, fprep__job *job)
{
	cuda_backend *cb = (cuda_backend *)b;

	if (job->video != NULL) /* a stream's: its session's thread */
		return cb->stopping ? FPREP_ESHUTDOWN
		                    : fprep__cuda_video_submit(job);
	if (job->req.kind != FPREP_KIND_FRAME &&
	    job->req.kind != FPREP_KIND_ECHO &&
	    job->req.kind != FPREP_KIND_ROIS &&
	    job->req.kind != FPREP_KIND_BATCH)
		return FPREP_EINVAL;
	pthread_mutex_lock(&cb->mu);
	if (cb->stopping) {
		pthread_mutex_unlock(&cb->mu);
		return FPREP_ESHUTDOWN;
	}
	/* A lane thread with jobs pending is awake, or waits for a slot,
	 * which a completion's kick gives it: only the first job wakes it. */
	if (fprep__queue_empty(&cb->pending))
		cuda_core_kick(&cb->cv_lane, &cb->lane_kicks);
	fprep__queue_push(&cb->pending, &job->link);
	pthread_mutex_unlock(&cb->mu);
	return 0;
}

/* cuda_region_op queues a region operation for the lane thread, which
 * runs it before its next job. */
static int cuda_region_op(fprep__backend *b, fprep__memreg *r)
{
	cuda_backend *cb = (cuda_backend *)b;

	if (r == NULL || r->done == NULL)
		return FPREP_EINVAL;
	pthread_mutex_lock(&cb->mu);
	if (cb->stopping) {
		pthread_mutex_unlock(&cb->mu);
		return FPREP_ESHUTDOWN;
	}
	fprep__queue_push(&cb->admin, &r->link);
	cuda_core_kick(&cb->cv_lane, &cb->lane_kicks);
	pthread_mutex_unlock(&cb->mu);
	return 0;
}

static void cuda_info(fprep__backend *b, char *buf, size_t size)
{
	cuda_backend *cb = (cuda_backend *)b;
	unsigned hits = 0, misses = 0;
	size_t n = strnlen(buf, size);
	char pace[256];

	if (n >= size)
		return;
	/* Paced waits (the lanes' threads): INFO "pacing". */
	fprep__cuda_wait_pace_text(&cb->pace, pace, sizeof pace);
	snprintf(buf + n, size - n, "pacing: %s\n", pace);
	if ((n = strnlen(buf, size)) >= size)
		return;
	fprep__kcache_stats(cb->cache, &hits, &misses);
	const char *dir = fprep__kcache_dir(cb->cache);
	size_t mem_free = 0, mem_total = 0;
	char uuid[48], jt[512], jl[512], jm[512], video[256];

	fprep__cuda_decoder_text(&cb->jstats, jt, sizeof jt);
	fprep__cuda_decoder_text(&cb->jlone, jl, sizeof jl);
	fprep__cuda_decoder_max_text(&cb->jmax, jm, sizeof jm);
	/* The device's memory in use by every process: what a leaked CUDA
	 * region (an IPC mapping never closed) would keep. */
	if (cudaMemGetInfo(&mem_free, &mem_total) != cudaSuccess)
		(void)cudaGetLastError();
	fprep__uuid_text(cb->uuid, uuid, sizeof(uuid));
	int nvdec = fprep__cuda_video_load(video, sizeof video) == FPREP_OK;
	snprintf(buf + n, size - n,
	         "device_name: %s\n"
	         "compute_capability: %d.%d\n"
	         "kernel_arch: sm_%d\n"
	         "device_memory_mib: %zu\n"
	         "copy_engines: %d\n"
	         "slots: %u\n"
	         "integrated: %s\n"
	         "host_copy_threads: %u\n"
	         "kernel_cache: %s (%s, %u hits, %u misses)\n"
	         "device_uuid: %s\n"
	         "device_memory_used_bytes: %zu\n"
	         "jpeg_decoder: %s\n"
	         "jpeg_frames: %lu by the engine, %lu by libjpeg-turbo\n"
	         "jpeg_timing: %s\n"
	         "jpeg_timing_lone: %s\n"
	         "jpeg_timing_max: %s\n"
	         "video_decoder: %s%s%s\n",
	         cb->device_name, cb->cc / 10, cb->cc % 10, cb->arch,
	         cb->memory >> 20, cb->copy_engines, cb->nslots,
	         cb->integrated ? "true" : "false", cb->copy_threads,
	         dir[0] ? dir : "off", cb->cache_hit ? "hit" : "miss", hits,
	         misses, uuid, mem_total - mem_free, cb->jpeg_desc,
	         atomic_load_explicit(&cb->jpeg_engine, memory_order_relaxed),
	         atomic_load_explicit(&cb->jpeg_cpu, memory_order_relaxed), jt,
	         jl, jm, nvdec ? "" : "none (", video, nvdec ? "" : ")");
	/* The JPEG frames waiting for a staging slot, then for a decoder,
	 * by turns. */
	pthread_mutex_lock(&cb->mu);
	fprep__jpeg_turns_text(&cb->decode_q, "jpeg", buf, size);
	fprep__jpeg_turns_text(&cb->slot_q, "jpeg_slot", buf, size);
	pthread_mutex_unlock(&cb->mu);
}

/* cuda_stats reports the kernel cache and the device's memory; on the
 * metrics thread. cudaMemGetInfo counts every process's allocations. */
static void cuda_stats(fprep__backend *b, fprep__backend_stats *st)
{
	cuda_backend *cb = (cuda_backend *)b;
	size_t free_b = 0, total_b = 0;

	fprep__kcache_stats(cb->cache, &st->cache_hits, &st->cache_misses);
	st->compiles = fprep__nvrtc_compile_count();
	if (cudaSetDevice(cb->device) == cudaSuccess &&
	    cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
		st->memory_total = total_b;
		st->memory_used = total_b - free_b;
	}
}

static void cuda_free(cuda_backend *cb)
{
	fprep__cuda_decoder_stop(cb);
	if (cb->nvjpeg != NULL) {
		(void)FPREP__CUDA(NULL, cudaSetDevice(cb->device));
		fprep__nvjpeg_close(cb->nvjpeg);
	}
	if (cb->slots != NULL) {
		for (unsigned i = 0; i < cb->nslots; i++)
			fprep__cuda_slot_fini(&cb->slots[i]);
		free(cb->slots);
	}
	cudaStream_t *ss[] = {&cb->s_h2d, &cb->s_comp, &cb->s_d2h};
	for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++)
		if (*ss[i] != NULL)
			(void)FPREP__CUDA(NULL, cudaStreamDestroy(*ss[i]));
	if (cb->ev_base != NULL)
		(void)FPREP__CUDA(NULL, cudaEventDestroy(cb->ev_base));
	if (cb->ev_anchor != NULL)
		(void)FPREP__CUDA(NULL, cudaEventDestroy(cb->ev_anchor));
	if (cb->lib != NULL)
		(void)FPREP__CUDA(NULL, cudaLibraryUnload(cb->lib));
	if (cb->roi_lib != NULL)
		(void)FPREP__CUDA(NULL, cudaLibraryUnload(cb->roi_lib));
	fprep__kcache_close(cb->cache);
	fprep__copy_pool_close(cb->copier);
	fprep__jpeg_fini(&cb->jpeg);
	pthread_cond_destroy(&cb->cv_lane);
	pthread_cond_destroy(&cb->cv_done);
	pthread_cond_destroy(&cb->cv_decode);
	pthread_cond_destroy(&cb->cv_help);
	fprep__jpeg_turns_fini(&cb->decode_q);
	fprep__jpeg_turns_fini(&cb->slot_q);
	pthread_mutex_destroy(&cb->mu);
	free(cb);
}

static void cuda_close(fprep__backend *b, int timeout_ms)
{
	cuda_backend *cb = (cuda_backend *)b;

	if (cb->threads) {
		pthread_mutex_lock(&cb->mu);
		cb->stopping = 1;
		cb->deadline_ns =
		        cuda_core_now_ns() +
		        (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
		atomic_fetch_add(&cb->lane_kicks, 1);
		pthread_cond_broadcast(&cb->cv_lane);
		pthread_mutex_unlock(&cb->mu);
		fprep__cuda_video_stop(cb, cb->deadline_ns);
		pthread_join(cb->lane, NULL);
		pthread_join(cb->completion, NULL);
		if (cb->spin_ns > 0) {
			char pace[256];

			fprep__cuda_wait_pace_text(&cb->pace, pace,
			                           sizeof pace);
			fprep__log(FPREP_LOG_INFO, "GPU %d lane pacing: %s",
			           cb->device, pace);
		}
		if (atomic_load(&cb->jstats.frames) > 0) {
			char jt[512];

			fprep__cuda_decoder_text(&cb->jstats, jt, sizeof jt);
			fprep__log(FPREP_LOG_INFO, "GPU %d JPEG timing: %s",
			           cb->device, jt);
			fprep__cuda_decoder_text(&cb->jlone, jt, sizeof jt);
			fprep__log(FPREP_LOG_INFO,
			           "GPU %d JPEG timing, frames alone: %s",
			           cb->device, jt);
		}
	}
	cuda_free(cb);
}

void fprep__backend_cuda_set_probe(fprep__backend *b, fprep__cuda_probe_fn fn,
                                   void *arg)
{
	cuda_backend *cb = (cuda_backend *)b;
	cb->probe = fn;
	cb->probe_arg = arg;
}

/* cuda_read_source reads dir/name into a malloc'ed string. */
static char *cuda_read_source(const char *dir, const char *name)
{
	char path[4096];
	char *text = NULL;
	long n;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (f == NULL) {
		fprep__log(FPREP_LOG_ERR, "cannot open kernel source %s: %s",
		           path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		goto out;
	text = malloc((size_t)n + 1);
	if (text == NULL)
		goto out;
	if (fread(text, 1, (size_t)n, f) != (size_t)n) {
		free(text);
		text = NULL;
		goto out;
	}
	text[n] = '\0';
out:
	if (text == NULL)
		fprep__log(FPREP_LOG_ERR, "cannot read kernel source %s", path);
	fclose(f);
	return text;
}

/* cuda_free_headers frees a table made by cuda_read_headers. */
static void cuda_free_headers(fprep__kernel_source *t)
{
	for (size_t i = 0; t != NULL && t[i].name != NULL; i++)
		free((char *)t[i].text);
	free(t);
}

/* cuda_read_headers reads the files named like the embedded headers from
 * dir into a table like fprep__kernel_headers (every text malloc'ed; free
 * it with cuda_free_headers). Returns NULL when one cannot be read. */
static fprep__kernel_source *cuda_read_headers(const char *dir)
{
	fprep__kernel_source *t;
	size_t n = 0;

	while (fprep__kernel_headers[n].name != NULL)
		n++;
	if ((t = calloc(n + 1, sizeof *t)) == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		t[i].name = fprep__kernel_headers[i].name;
		t[i].text = cuda_read_source(dir, t[i].name);
		if (t[i].text == NULL) {
			t[i].name = NULL; /* the table ends here for the free */
			cuda_free_headers(t);
			return NULL;
		}
	}
	return t;
}

/* cuda_load_library builds (or fetches from the cache) the CUBIN of the
 * kernel source name (embedded, or read from cfg->kernel_dir) and loads it
 * into *libp; a cached CUBIN the driver refuses is recompiled once. *hit
 * tells whether it came from the cache. */
static int cuda_load_library(cuda_backend *cb, const fprep__cuda_config *cfg,
                             const char *name, cudaLibrary_t *libp, int *hit)
{
	const fprep__kernel_source *headers = fprep__kernel_headers;
	fprep__kernel_source *owned_headers = NULL;
	const char *text = NULL;
	char *owned = NULL;
	char msg[FPREP_MESSAGE_SIZE];
	fprep__gpu_status st = {0};
	void *cubin = NULL;
	size_t size = 0;
	int err = FPREP_EIO;

	if (cfg->kernel_dir != NULL) {
		text = owned = cuda_read_source(cfg->kernel_dir, name);
		headers = owned_headers = cuda_read_headers(cfg->kernel_dir);
	} else {
		for (const fprep__kernel_source *k = fprep__kernel_sources;
		     k->name != NULL; k++)
			if (strcmp(k->name, name) == 0)
				text = k->text;
	}
	if (text == NULL || headers == NULL)
		goto out;
	for (int force = 0; force < 2; force++) {
		err = fprep__kernel_build(cb->cache, name, text, headers,
		                          cb->arch, force, &cubin, &size, hit,
		                          msg, sizeof msg);
		if (err != 0) {
			fprep__log(FPREP_LOG_ERR, "%s", msg);
			goto out;
		}
		err = FPREP_ECUDA;
		if (!FPREP__CUDA(&st,
		                 cudaLibraryLoadData(libp, cubin, NULL, NULL, 0,
		                                     NULL, NULL, 0)))
			break;
		free(cubin);
		cubin = NULL;
		*libp = NULL;
		if (!*hit)
			goto out;
		fprep__log(
		        FPREP_LOG_WARNING,
		        "cached kernel %s refused by the driver: recompiling",
		        name);
	}
	err = *libp != NULL ? 0 : err;
out:
	free(cubin);
	free(owned);
	cuda_free_headers(owned_headers);
	return err;
}

/* cuda_load_kernels loads the letterbox kernels (letterbox.cu) and the
 * ROIS and BATCH kernels (roi.cu). */
static int cuda_load_kernels(cuda_backend *cb, const fprep__cuda_config *cfg)
{
	static const char *const roi_names[3] = {
	        "fprep_roi_f32", "fprep_roi_f16", "fprep_roi_u8"};
	fprep__gpu_status st = {0};
	int err, roi_hit = 0;

	err = cuda_load_library(cb, cfg, CUDA_KERNEL_SOURCE, &cb->lib,
	                        &cb->cache_hit);
	if (err == 0)
		err = cuda_load_library(cb, cfg, CUDA_ROI_SOURCE, &cb->roi_lib,
		                        &roi_hit);
	if (err != 0)
		return err;
	for (int r = 0; r < CUDA_ROUNDINGS; r++)
		for (int f = 0; f < CUDA_FAMILIES; f++) {
			cudaKernel_t *ks = cb->kernel[r][f];
			const char *const *names = cuda_kernel_names[r][f];

			for (int i = 0; i < 3; i++)
				if (FPREP__CUDA(&st, cudaLibraryGetKernel(
				                             &ks[i], cb->lib,
				                             names[i])))
					return FPREP_ECUDA;
		}
	for (int i = 0; i < 3; i++)
		if (FPREP__CUDA(&st, cudaLibraryGetKernel(&cb->roi_kernel[i],
		                                          cb->roi_lib,
		                                          roi_names[i])))
			return FPREP_ECUDA;
	return 0;
}

int fprep__backend_cuda_open(fprep__backend **bp, const fprep__cuda_config *cfg)
{
	cuda_backend *cb = NULL;
	fprep__gpu_status st = {0};
	struct cudaDeviceProp prop;
	pthread_condattr_t ca;
	int ndev = fprep__cuda_device_count();
	int err = FPREP_ECUDA;

	*bp = NULL;
	if (cfg->device < 0 || cfg->device >= ndev) {
		fprep__log(FPREP_LOG_ERR,
		           "CUDA device %d not present (%d found)", cfg->device,
		           ndev);
		return FPREP_EUNSUPPORTED;
	}
	cb = calloc(1, sizeof *cb);
	if (cb == NULL)
		return FPREP_ENOMEM;
	fprep__jpeg_init(&cb->jpeg);
	cb->base.name = "cuda";
	cb->base.submit = cuda_submit;
	cb->base.info = cuda_info;
	cb->base.close = cuda_close;
	cb->base.region_op = cuda_region_op;
	cb->base.stats = cuda_stats;
	cb->base.video_open = fprep__cuda_video_open;
	cb->device = cfg->device;
	cb->spin_ns = cfg->spin_ns;
	cb->nslots = cfg->slots < 2 ? 2 : cfg->slots;
	cb->base.capacity = cb->nslots;
	cb->transfer = cfg->transfer;
	cb->all_rows = cfg->all_rows;
	cb->trace = cfg->trace;
	fprep__queue_init(&cb->pending);
	fprep__queue_init(&cb->waiting);
	fprep__queue_init(&cb->flying);
	fprep__queue_init(&cb->admin);
	fprep__queue_init(&cb->decoded);
	pthread_mutex_init(&cb->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cb->cv_decode, &ca);
	pthread_cond_init(&cb->cv_help, &ca);
	pthread_cond_init(&cb->cv_lane, &ca);
	pthread_cond_init(&cb->cv_done, &ca);
	pthread_condattr_destroy(&ca);

	err = fprep__jpeg_turns_init(&cb->decode_q, &cb->mu, 0, 0);
	if (err == 0)
		err = fprep__jpeg_turns_init(&cb->slot_q, &cb->mu, 0, 0);
	if (err != 0)
		goto fail;
	err = FPREP_ECUDA;
	if (FPREP__CUDA(&st, cudaSetDevice(cb->device)) ||
	    FPREP__CUDA(&st, cudaGetDeviceProperties(&prop, cb->device)))
		goto fail;
	snprintf(cb->device_name, sizeof cb->device_name, "%s", prop.name);
	memcpy(cb->uuid, prop.uuid.bytes, sizeof(cb->uuid));
	cb->cc = prop.major * 10 + prop.minor;
	cb->memory = prop.totalGlobalMem;
	cb->copy_engines = prop.asyncEngineCount;
	cb->integrated = prop.integrated;
	cb->arch = fprep__nvrtc_arch(cb->cc);
	if (cb->arch == 0) {
		fprep__log(FPREP_LOG_ERR,
		           "NVRTC cannot compile for compute capability %d.%d",
		           cb->cc / 10, cb->cc % 10);
		err = FPREP_ENVRTC;
		goto fail;
	}
	err = fprep__kcache_open(&cb->cache, cfg->cache_dir,
	                         cfg->cache_enabled);
	if (err != 0)
		goto fail;
	err = cuda_load_kernels(cb, cfg);
	if (err != 0)
		goto fail;
	err = FPREP_ECUDA;
	if (FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &cb->s_h2d, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &cb->s_comp, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(&st, cudaStreamCreateWithFlags(
	                             &cb->s_d2h, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(&st, cudaEventCreateWithFlags(&cb->ev_base,
	                                              cudaEventDefault)) ||
	    FPREP__CUDA(&st, cudaEventRecord(cb->ev_base, cb->s_h2d)) ||
	    FPREP__CUDA(&st, cudaEventSynchronize(cb->ev_base)) ||
	    FPREP__CUDA(&st, cudaEventCreateWithFlags(&cb->ev_anchor,
	                                              cudaEventDefault)))
		goto fail;
	fprep__cuda_wait_anchor(cb);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cb->copy_threads =
	        ncpu >= 8 ? (unsigned)(ncpu / 4 < 4 ? ncpu / 4 : 4) : 0;
	if (fprep__copy_pool_open(&cb->copier, cb->copy_threads) != 0) {
		err = FPREP_ENOMEM;
		goto fail;
	}
	/* Slots kept for JPEG frames (fprep__cuda_decoder_plan), past the raw
	 * ones. */
	char jwhy[160] = "";
	unsigned jthreads = 0;
	cb->raw_slots = cb->nslots;
	cb->nslots += fprep__cuda_decoder_plan(cb, cfg->jpeg_engine, ncpu,
	                                       &jthreads, jwhy, sizeof jwhy);
	cb->slots = calloc(cb->nslots, sizeof *cb->slots);
	if (cb->slots == NULL) {
		err = FPREP_ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < cb->nslots; i++)
		if (fprep__cuda_slot_init(&cb->slots[i],
		                          cb->transfer != FPREP__CUDA_STAGED,
		                          i < cb->raw_slots, &st)) {
			err = st.code == cudaErrorMemoryAllocation
			              ? FPREP_ENOMEM
			              : FPREP_ECUDA;
			goto fail;
		}
	fprep__cuda_decoder_setup(cb, cfg->lane, jthreads, jwhy, sizeof jwhy);
	if (pthread_create(&cb->lane, NULL, fprep__cuda_lane_main, cb) != 0) {
		err = FPREP_ENOMEM;
		goto fail;
	}
	if (pthread_create(&cb->completion, NULL,
	                   fprep__cuda_wait_completion_main, cb) != 0) {
		pthread_mutex_lock(&cb->mu);
		cb->stopping = 1;
		atomic_fetch_add(&cb->lane_kicks, 1);
		pthread_cond_broadcast(&cb->cv_lane);
		pthread_mutex_unlock(&cb->mu);
		pthread_join(cb->lane, NULL);
		err = FPREP_ENOMEM;
		goto fail;
	}
	cb->threads = 1;
	fprep__log(FPREP_LOG_INFO,
	           "GPU lane %u on device %d (%s, sm_%d, %d copy engines), %u "
	           "staging slots",
	           cfg->lane, cb->device, cb->device_name, cb->cc,
	           cb->copy_engines, cb->nslots);
	*bp = &cb->base;
	return 0;
fail:
	fprep__log(FPREP_LOG_ERR, "GPU backend on device %d not started: %s",
	           cfg->device, fprep_strerror(err));
	cuda_free(cb);
	return err;
}

void fprep__backend_cuda_identity(fprep__backend *b, int *device,
                                  uint8_t uuid[FPREP_CUDA_UUID_SIZE],
                                  char *name, size_t size)
{
	cuda_backend *cb = (cuda_backend *)b;

	*device = cb->device;
	memcpy(uuid, cb->uuid, sizeof(cb->uuid));
	snprintf(name, size, "%s", cb->device_name);
}
