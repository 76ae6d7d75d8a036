/*
 * info.c: what frameprepd says about itself: the INFO reply's text (one
 * "key: value" line each, the backend's own lines last), the start-up
 * log line and what systemd is told.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef FPREP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"

/* info_level_name names a log level (log.h) as --log-level takes it. */
static const char *info_level_name(int level)
{
	static const char *const names[] = {"err", "warning", "notice", "info",
	                                    "debug"};

	if (level < FPREP_LOG_ERR || level > FPREP_LOG_DEBUG)
		return "?";
	return names[level - FPREP_LOG_ERR];
}

void fprep__info_notify(const char *state)
{
#ifdef FPREP_HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

/* info_health writes the health lines: live and ready as /healthz and
 * /readyz decide (metrics.h), draining while shutdown runs (INFO is still
 * answered then; every other request that arrives gets ESHUTDOWN), and
 * /readyz's reason. Returns what snprintf returns. */
static size_t info_health(fprep__server *srv, char *buf, size_t size)
{
	fprep__backend_stats st;
	char live_why[160], why[160];
	int live, ready;

	if (srv->backend->stats != NULL)
		srv->backend->stats(srv->backend, &st);
	live = fprep__metrics_http_liveness(live_why, sizeof(live_why));
	ready = fprep__metrics_http_readiness(
	        srv->backend->stats != NULL ? &st : NULL, why, sizeof(why));
	why[strcspn(why, "\n")] = '\0';
	return (size_t)snprintf(buf, size,
	                        "live: %s\nready: %s\ndraining: %s\n"
	                        "health: %s\n",
	                        live ? "true" : "false",
	                        ready ? "true" : "false",
	                        srv->stopping ? "true" : "false", why);
}

/* fprep__info_text writes the INFO text. */
void fprep__info_text(fprep__server *srv, char *buf, size_t size)
{
	const fprep__config *cfg = srv->cfg;
	const fprep_limits *lim = &cfg->limits;
	unsigned busy = 0;
	size_t n;

	for (unsigned i = 0; i < srv->nslots; i++)
		busy += srv->slots[i].state == FPREP__SLOT_WORK ||
		        srv->slots[i].state == FPREP__SLOT_SEND;
	n = (size_t)snprintf(buf, size,
	                     "version: %s\nprotocol: %d\nbackend: %s\n"
	                     "device: %s\nlisten:",
	                     FPREP_VERSION_STRING, FPREP_PROTOCOL_VERSION,
	                     srv->backend->name, srv->device);
	for (unsigned i = 0; i < cfg->nlisten && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, " %s", cfg->listen[i]);
	if (n < size)
		n += (size_t)snprintf(
		        buf + n, size - n,
		        "\nmax_width: %" PRIu32 "\nmax_height: %" PRIu32
		        "\nmax_frame_bytes: %" PRIu64
		        "\nmax_out_width: %" PRIu32 "\nmax_out_height: %" PRIu32
		        "\nmax_tensor_bytes: %" PRIu64
		        "\nmax_elements: %" PRIu32 "\nmax_batch_bytes: %" PRIu64
		        "\nmax_jpeg_scans: %" PRIu32
		        "\nmax_jpeg_scan_pixels: %" PRIu64
		        "\nmax_inflight: %u\n"
		        "max_inflight_per_conn: %u\nmax_inflight_per_uid: %u\n"
		        "inflight_reserve: %u\nreply_stall_ms: %d\n"
		        "stall_closes: %" PRIu64 "\nmax_reply_bytes: %" PRIu64
		        "\nreply_bytes: %" PRIu64 "\n"
		        "inflight: %u\nserved: %" PRIu64 "\nfailed: %" PRIu64
		        "\nuptime_s: %" PRIu64 "\n",
		        lim->max_width, lim->max_height, lim->max_frame_bytes,
		        lim->max_out_width, lim->max_out_height,
		        lim->max_tensor_bytes, lim->max_elements,
		        lim->max_batch_bytes, lim->max_jpeg_scans,
		        lim->max_jpeg_scan_pixels, cfg->max_inflight,
		        cfg->max_inflight_per_conn, cfg->max_inflight_per_uid,
		        cfg->inflight_reserve, cfg->reply_stall_ms,
		        srv->stall_closes, cfg->max_reply_bytes,
		        srv->reply_bytes, busy, srv->served, srv->failed,
		        (fprep__now_ns() - srv->t_start_ns) / 1000000000u);
	if (n < size)
		n += (size_t)snprintf(
		        buf + n, size - n,
		        "max_packet_bytes: %" PRIu64
		        "\nmax_streams_per_conn: %" PRIu32
		        "\nmax_streams_per_uid: %" PRIu32
		        "\nmax_stream_frames: %" PRIu32
		        "\nmax_video_sessions: %" PRIu32 "\n",
		        lim->max_packet_bytes, lim->max_streams_per_conn,
		        lim->max_streams_per_uid, lim->max_stream_frames,
		        lim->max_video_sessions);
	if (n < size) {
		uint64_t shm_bytes;
		unsigned nreg = fprep__regions_count(&srv->regions, &shm_bytes);

		n += (size_t)snprintf(
		        buf + n, size - n,
		        "regions: %u\nshm_bytes: %" PRIu64
		        "\nmax_regions: %u\nmax_region_bytes: "
		        "%" PRIu64 "\nmax_shm_bytes: %" PRIu64 "\n"
		        "max_shm_bytes_per_conn: %" PRIu64 "\n"
		        "max_shm_bytes_per_uid: %" PRIu64 "\n"
		        "doorbells: %u\nmax_doorbells: %u\n"
		        "max_doorbells_per_conn: %u\nmax_doorbells_per_uid: "
		        "%u\n"
		        "doorbell_requests: %" PRIu64 "\n"
		        "doorbell_wake: %s\ndoorbell_rings: %" PRIu64 "\n"
		        "doorbell_mutes: %" PRIu64 "\n",
		        nreg, shm_bytes, srv->cfg->max_regions,
		        srv->cfg->max_region_bytes, srv->cfg->max_shm_bytes,
		        srv->cfg->shares.shm_bytes_per_conn,
		        srv->cfg->shares.shm_bytes_per_uid,
		        srv->doorbells.nbells, srv->cfg->max_doorbells,
		        srv->cfg->shares.doorbells_per_conn,
		        srv->cfg->shares.doorbells_per_uid,
		        srv->doorbells.requests,
		        srv->doorbells.waker.running ? "futex_waitv" : "none",
		        srv->doorbells.rings, srv->doorbells.mutes);
	}
	if (n < size) {
		unsigned alive, ncuda;

		ncuda = fprep__regions_count_cuda(&srv->regions, &alive);
		n += (size_t)snprintf(
		        buf + n, size - n,
		        "allow_cuda_regions: %s\n"
		        "cuda_regions: %u\ncuda_regions_alive: %u\n"
		        "max_cuda_regions: %u\nmax_cuda_regions_per_uid: %u\n",
		        srv->cfg->allow_cuda_regions ? "true" : "false", ncuda,
		        alive, srv->cfg->max_cuda_regions,
		        srv->cfg->shares.cuda_per_uid);
	}
	if (n < size)
		n += (size_t)snprintf(
		        buf + n, size - n,
		        "pid: %ld\ntrace: %s\ntransfer: %s\nh2d_rows: %s\n"
		        "spin_us: %d\nlog_level: %s\nsend_timeout_ms: %d\n"
		        "shutdown_timeout_ms: %d\n",
		        (long)getpid(), cfg->trace ? "true" : "false",
		        fprep__transfer_name(cfg->transfer),
		        cfg->h2d_all_rows ? "all" : "read", cfg->spin_us,
		        info_level_name(cfg->log_level), cfg->send_timeout_ms,
		        cfg->shutdown_timeout_ms);
	if (n < size)
		n += info_health(srv, buf + n, size - n);
	if (n < size - 1)
		srv->backend->info(srv->backend, buf + n, size - n);
}

void fprep__info_log_start(fprep__server *srv)
{
	const fprep__config *cfg = srv->cfg;
	const fprep_limits *lim = &cfg->limits;
	char urls[FPREP__MAX_LISTEN * (FPREP__URL_SIZE + 1)];
	size_t n = 0;

	fprep__metrics_limits(cfg->max_inflight, cfg->max_shm_bytes);
	urls[0] = '\0';
	for (unsigned i = 0; i < cfg->nlisten; i++)
		n += (size_t)snprintf(urls + n, sizeof(urls) - n, "%s%s",
		                      i > 0 ? " " : "", cfg->listen[i]);
	fprep__log(FPREP_LOG_NOTICE,
	           "frameprepd %s started: backend %s, device %s, listen %s, "
	           "max_inflight %u, source <= %" PRIu32 "x%" PRIu32
	           " and %" PRIu64 " bytes, tensor <= %" PRIu32 "x%" PRIu32
	           " and %" PRIu64 " bytes, send timeout %d ms, shutdown "
	           "timeout %d ms",
	           FPREP_VERSION_STRING, srv->backend->name, srv->device, urls,
	           cfg->max_inflight, lim->max_width, lim->max_height,
	           lim->max_frame_bytes, lim->max_out_width,
	           lim->max_out_height, lim->max_tensor_bytes,
	           cfg->send_timeout_ms, cfg->shutdown_timeout_ms);
}
