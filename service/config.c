/*
 * config.c: frameprepd's settings.
 *
 * The design is simple: one table, fprep__config_settings[] below, says
 * everything about every setting once, as redis's static_configs[] does:
 * its name (the flag --max-width and the INI key max-width), its value and
 * line in --help, how its value is read (a NUMBER within bounds, one of
 * some WORDs, or an OTHER reader of its own, in config_values.c), the
 * field it fills and its default. Nothing else names a setting:
 * fprep__config_init writes every default, config_set reads every value
 * from the command line or the file, and --help prints every row with its
 * default. Defaults come first, then the file named by --config (keys at
 * its top level or in a [frameprepd] section), then the other flags, so a
 * flag always wins over the file; a --listen on the command line replaces
 * every listen of the file. SIGHUP (fprep__config_reload) runs the same
 * parse again, on the same command line, into a fresh config, and copies
 * the LIVE rows' values into the running one. A refusal names the setting (the
 * flag, or the file and key), the value and what is accepted, bounds included.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_values.h"
#include "frameprep/frameprep.h"
#include "log.h"

/* Command-line only flags, besides the settings (getopt values 256 + row). */
enum config_flag {
	FLAG_CONFIG = 'c',
	FLAG_HELP = 'h',
	FLAG_VERSION = 'V',
	FLAG_SETTING = 256,
};

/* The words of the WORDS settings, and spin-us's: {word, value, alias}
 * (an alias is accepted, but --help and errors name the first word). */
static const struct fprep__config_word config_switch_words[] = {
        {"true", 1, 0}, {"false", 0, 0}, {"yes", 1, 1},
        {"on", 1, 1},   {"1", 1, 1},     {"no", 0, 1},
        {"off", 0, 1},  {"0", 0, 1},     {NULL, 0, 0},
};

static const struct fprep__config_word config_level_words[] = {
        {"err", FPREP_LOG_ERR, 0},       {"warning", FPREP_LOG_WARNING, 0},
        {"notice", FPREP_LOG_NOTICE, 0}, {"info", FPREP_LOG_INFO, 0},
        {"debug", FPREP_LOG_DEBUG, 0},   {NULL, 0, 0},
};

static const struct fprep__config_word config_mode_words[] = {
        {"600", 0600, 0},  {"660", 0660, 0},  {"666", 0666, 0},
        {"0600", 0600, 1}, {"0660", 0660, 1}, {"0666", 0666, 1},
        {NULL, 0, 0},
};

static const struct fprep__config_word config_transfer_words[] = {
        {"staged", FPREP__TRANSFER_STAGED, 0},
        {"mapped", FPREP__TRANSFER_MAPPED, 0},
        {"auto", FPREP__TRANSFER_AUTO, 0},
        {NULL, 0, 0},
};

static const struct fprep__config_word config_rows_words[] = {
        {"read", 0, 0},
        {"all", 1, 0},
        {NULL, 0, 0},
};

/* "auto" for the per-uid shares (fprep__config_resolve). */
static const struct fprep__config_word config_auto_u64_words[] = {
        {"auto", -1, 0},
        {NULL, 0, 0},
};

static const struct fprep__config_word config_auto_uint_words[] = {
        {"auto", FPREP__CONFIG_AUTO_UINT, 0},
        {NULL, 0, 0},
};

static const struct fprep__config_word config_spin_words[] = {
        {"auto", FPREP__SPIN_AUTO, 0},
        {NULL, 0, 0},
};

/* FIELD(f): the offset and C type of fprep__config's field f; a field of
 * another type does not compile. */
/* clang-format off */
#define FIELD(f)                                                               \
	.offset = offsetof(fprep__config, f),                                  \
	.field = _Generic(((fprep__config *)0)->f,                             \
	                  int: FPREP__CONFIG_INT,                              \
	                  unsigned: FPREP__CONFIG_UNSIGNED,                    \
	                  uint64_t: FPREP__CONFIG_U64)
/* clang-format on */

/* The rows: NUMBER in [lo, hi] (NUMBER_OR: or one of words), WORDS,
 * SWITCH (true or false; bare: the flag alone means true), OTHER (read by
 * fprep__config_values_set_<fn>, shown by fprep__config_values_show_<fn>, with
 * bounds for --device's GPU ids). */
#define NUMBER_OR(name_, live_, arg_, f, lo, hi, words_, def_, help_)          \
	{                                                                      \
		.name = name_, .live = live_, .arg = arg_, .help = help_,      \
		.type = FPREP__CONFIG_NUMBER, FIELD(f), .min = lo, .max = hi,  \
		.def = def_, .words = words_                                   \
	}
#define NUMBER(name_, live_, arg_, f, lo, hi, def_, help_)                     \
	NUMBER_OR(name_, live_, arg_, f, lo, hi, NULL, def_, help_)
#define WORDS(name_, live_, arg_, f, words_, def_, help_)                      \
	{                                                                      \
		.name = name_, .live = live_, .arg = arg_, .help = help_,      \
		.type = FPREP__CONFIG_WORD, FIELD(f), .def = def_,             \
		.words = words_                                                \
	}
#define SWITCH(name_, live_, arg_, f, def_, bare_, help_)                      \
	{                                                                      \
		.name = name_, .live = live_, .arg = arg_, .help = help_,      \
		.type = FPREP__CONFIG_WORD, FIELD(f), .def = def_,             \
		.words = config_switch_words, .bare = bare_                    \
	}
#define OTHER(name_, live_, arg_, fn, lo, hi, help_)                           \
	{                                                                      \
		.name = name_, .live = live_, .arg = arg_, .help = help_,      \
		.type = FPREP__CONFIG_OTHER, .min = lo, .max = hi,             \
		.set = fprep__config_values_set_##fn,                          \
		.show = fprep__config_values_show_##fn                         \
	}

#define MS_MAX  3600000u /* one hour */
#define KIB     UINT64_C(1024)
#define MIB     (KIB * KIB)
#define GIB     (MIB * KIB)
#define TIB     (GIB * KIB)
#define NO_BARE 0
#define BARE    1
#define RESTART 0 /* kept on SIGHUP: see LIVE */
/* LIVE: SIGHUP applies the file's new value at once (fprep__config_reload).
 * Only a field that no thread but the loop reads while the daemon runs
 * may be LIVE, or one that the loop copies for each request before
 * another thread sees it (the limits and the send timeout, into the
 * slot: slot.c). Kept, and why: listen, socket-mode, metrics-listen,
 * max-inflight, max-doorbells, workers, device, lanes, slots, kernels,
 * kernel-cache, transfer, h2d-rows (sockets, threads and memory made at
 * start); max-frame-bytes (nng's receive limit on the socket, read by
 * nng's threads); max-regions, max-region-bytes, max-shm-bytes,
 * allow-cuda-regions, max-cuda-regions (copied into the region table at
 * start); trace (the GPU lanes take it at start). The shares of those
 * budgets (max-*-per-conn, max-*-per-uid) are LIVE: the loop reads them
 * from the config when it checks a registration, and a lower one refuses
 * only new ones. */
#define LIVE 1
/* LIVE_RAISE: LIVE when the new value is higher, kept when lower:
 * max-inflight-per-conn, read on the loop only, but lowered under a busy
 * connection it would close it (more requests held than twice the bound:
 * conns.c). */
#define LIVE_RAISE 2

/* Every setting, in --help's order. A row reads: name (flag and key),
 * LIVE or RESTART (whether SIGHUP changes it), its value in --help, the field,
 * then for a NUMBER its bounds and default, for WORDS its words and default,
 * for a SWITCH its default, and last the help line. */
const struct fprep__config_setting fprep__config_settings[] = {
        OTHER("listen", RESTART, "URL", listen, 0, 0,
              "listen on URL (ipc://PATH or tcp://HOST:PORT), repeatable"),
        OTHER("device", RESTART, "auto|cpu|all|N[,M...]", device, 0, 1023,
              "auto: GPU 0 if present, else CPU; cpu; all: every GPU; GPU "
              "N, or the GPUs listed"),
        NUMBER("lanes", RESTART, "K", lanes, 1, 16, 1,
               "GPU lanes (streams, staging slots, threads) per device"),
        NUMBER("workers", RESTART, "N", workers, 0, 1024, 0,
               "CPU backend worker threads (0: one per core)"),
        NUMBER("max-inflight", RESTART, "N", max_inflight, 1, 4096, 64,
               "requests in flight at once"),
        NUMBER("max-inflight-per-conn", LIVE_RAISE, "N", max_inflight_per_conn,
               1, 4096, 16,
               "requests in flight per connection (EBUSY past it)"),
        NUMBER_OR("max-inflight-per-uid", LIVE, "auto|N", max_inflight_per_uid,
                  0, 4096, config_auto_uint_words, FPREP__CONFIG_AUTO_UINT,
                  "requests one user (peer uid, all its connections) may "
                  "hold (EBUSY past it; 0: no bound); auto: half of "
                  "max-inflight where socket-mode is 660 or 666, else 0"),
        NUMBER("inflight-reserve", LIVE, "N", inflight_reserve, 0, 4096, 8,
               "request slots kept for connections that hold none (at "
               "most a quarter of max-inflight): others get EBUSY"),
        NUMBER("reply-stall-ms", LIVE, "MS", reply_stall_ms, 1, MS_MAX, 25,
               "while slots are short, close a connection whose reply has "
               "waited this long without it reading any"),
        NUMBER("max-reply-bytes", LIVE, "BYTES", max_reply_bytes, 1, TIB, GIB,
               "tensor bytes of the replies in flight"),
        NUMBER("max-width", LIVE, "PX", limits.max_width, 1, 65535, 8192,
               "largest source width"),
        NUMBER("max-height", LIVE, "PX", limits.max_height, 1, 65535, 8192,
               "largest source height"),
        /* nng receives messages of up to 4 GiB - 1, header included. */
        NUMBER("max-frame-bytes", RESTART, "BYTES", limits.max_frame_bytes, 1,
               UINT32_MAX - FPREP_REQUEST_HEADER_SIZE, 64 * MIB,
               "largest source frame"),
        NUMBER("max-out-width", LIVE, "PX", limits.max_out_width, 1, 65535,
               2048, "largest tensor width"),
        NUMBER("max-out-height", LIVE, "PX", limits.max_out_height, 1, 65535,
               2048, "largest tensor height"),
        NUMBER("max-tensor-bytes", LIVE, "BYTES", limits.max_tensor_bytes, 1,
               16 * GIB, 48 * MIB, "largest tensor"),
        NUMBER("max-elements", LIVE, "N", limits.max_elements, 1,
               FPREP_ELEMENTS_MAX, 256,
               "ROIs or frames of one ROIS or BATCH request"),
        NUMBER("max-batch-bytes", LIVE, "BYTES", limits.max_batch_bytes, 1,
               16 * GIB, 512 * MIB,
               "tensor bytes of one ROIS or BATCH request (and a batch's "
               "frames in a region)"),
        NUMBER("max-jpeg-scans", LIVE, "N", limits.max_jpeg_scans, 1, 500, 32,
               "scans of one JPEG source (a progressive file holds about "
               "10); a file of more is refused"),
        NUMBER("max-jpeg-scan-pixels", LIVE, "PX", limits.max_jpeg_scan_pixels,
               1, 1ull << 40, 1ull << 28,
               "a JPEG source's scans x pixels, the work of its decode; a "
               "file of more is refused"),
        NUMBER("max-packet-bytes", LIVE, "BYTES", limits.max_packet_bytes, 1,
               256 * MIB, 16 * MIB,
               "largest video packet (and a stream's parameter sets)"),
        NUMBER("max-streams-per-conn", LIVE, "N", limits.max_streams_per_conn,
               0, 1024, 16, "video streams one connection holds open"),
        NUMBER("max-streams-per-uid", LIVE, "N", limits.max_streams_per_uid, 0,
               4096, 64,
               "video streams the connections of one peer uid hold open"),
        NUMBER("max-stream-frames", LIVE, "N", limits.max_stream_frames, 1, 64,
               32,
               "decoded frames one video stream holds (reorder queue and "
               "one reply's tensors)"),
        NUMBER("max-video-sessions", LIVE, "N", limits.max_video_sessions, 1,
               1024, 32,
               "video decode sessions (streams) open at once on one GPU "
               "(NVDEC)"),
        NUMBER("send-timeout-ms", LIVE, "MS", send_timeout_ms, 1, MS_MAX, 10000,
               "bound on sending one reply"),
        NUMBER("shutdown-timeout-ms", LIVE, "MS", shutdown_timeout_ms, 1,
               MS_MAX, 10000, "bound on finishing work at shutdown"),
        NUMBER("slots", RESTART, "N", slots, 2, 64, 4,
               "frames staged on the GPU at once, per stream"),
        OTHER("kernels", RESTART, "DIR", kernels, 0, 0,
              "read kernel sources from DIR"),
        OTHER("kernel-cache", RESTART, "DIR|off", kernel_cache, 0, 0,
              "compiled-kernel cache directory, or off"),
        WORDS("log-level", LIVE, "LEVEL", log_level, config_level_words,
              FPREP_LOG_INFO, "err, warning, notice, info or debug"),
        WORDS("socket-mode", RESTART, "MODE", socket_mode, config_mode_words,
              0600,
              "ipc:// socket file mode, octal: 600, 660 (a group) or 666"),
        NUMBER("max-regions", RESTART, "N", max_regions, 0, 1024, 16,
               "shared-memory regions per connection"),
        NUMBER("max-doorbells", RESTART, "N", max_doorbells, 0, 1024, 64,
               "doorbell areas watched for requests (all connections; 0: "
               "doorbells off)"),
        NUMBER("max-region-bytes", RESTART, "BYTES", max_region_bytes, 1, TIB,
               GIB, "largest shared-memory region"),
        NUMBER("max-shm-bytes", RESTART, "BYTES", max_shm_bytes, 1, TIB,
               4 * GIB, "shared memory mapped (and pinned) in all"),
        SWITCH("allow-cuda-regions", RESTART, "true|false", allow_cuda_regions,
               1, NO_BARE,
               "let clients register device memory (CUDA IPC handles)"),
        SWITCH("jpeg-engine", RESTART, "true|false", jpeg_engine, 0, NO_BARE,
               "decode JPEG sources on the GPU's JPEG engine (nvJPEG); "
               "only where every client is trusted: the engine decodes "
               "a corrupt file into what can carry bytes of earlier ones"),
        NUMBER("max-cuda-regions", RESTART, "N", max_cuda_regions, 0, 1024, 16,
               "CUDA regions per connection"),
        NUMBER("max-shm-bytes-per-conn", LIVE, "BYTES",
               shares.shm_bytes_per_conn, 0, TIB, 0,
               "one connection's share of max-shm-bytes (0: all of it)"),
        NUMBER_OR("max-shm-bytes-per-uid", LIVE, "auto|BYTES",
                  shares.shm_bytes_per_uid, 0, TIB, config_auto_u64_words, -1,
                  "one user's share of max-shm-bytes, all its connections "
                  "together (0: all of it); auto: half where socket-mode "
                  "is 660 or 666, else 0"),
        NUMBER("max-doorbells-per-conn", LIVE, "N", shares.doorbells_per_conn,
               0, 1024, 0,
               "one connection's share of max-doorbells (0: all of them)"),
        NUMBER_OR("max-doorbells-per-uid", LIVE, "auto|N",
                  shares.doorbells_per_uid, 0, 1024, config_auto_uint_words,
                  FPREP__CONFIG_AUTO_UINT,
                  "one user's share of max-doorbells (0: all of them); "
                  "auto: half where socket-mode is 660 or 666, else 0"),
        NUMBER("max-cuda-regions-per-uid", LIVE, "N", shares.cuda_per_uid, 0,
               1024, 0,
               "CUDA regions of one user, all its connections together "
               "(0: no bound)"),
        OTHER("metrics-listen", RESTART, "HOST:PORT|off", metrics_listen, 0, 0,
              "serve Prometheus metrics on http://HOST:PORT/metrics"),
        SWITCH("trace", RESTART, "[=true|false]", trace, 0, BARE,
               "write each request's stage times into its reply's message"),
        WORDS("transfer", RESTART, "staged|mapped|auto", transfer,
              config_transfer_words, FPREP__TRANSFER_STAGED,
              "GPU: copy registered pinned frames and tensors, or let the "
              "kernel read and write them mapped"),
        WORDS("h2d-rows", RESTART, "read|all", h2d_all_rows, config_rows_words,
              0,
              "GPU, staged: copy only the frame rows the resize reads, or "
              "every row"),
        NUMBER_OR("spin-us", LIVE, "auto|US", spin_us, 0, 100000,
                  config_spin_words, FPREP__SPIN_AUTO,
                  "how long an idle loop or GPU thread polls for work before "
                  "it sleeps (latency against CPU); auto: 1000 with a GPU, 0 "
                  "on the CPU backend"),
};

#define CONFIG_NSETTINGS                                                       \
	(sizeof(fprep__config_settings) / sizeof(fprep__config_settings[0]))

const size_t fprep__config_nsettings = CONFIG_NSETTINGS;

const char *fprep__transfer_name(int transfer)
{
	for (const struct fprep__config_word *w = config_transfer_words;
	     w->word != NULL; w++)
		if (w->value == transfer)
			return w->word;
	return "?";
}

int64_t fprep__config_get(const fprep__config *cfg,
                          const struct fprep__config_setting *s)
{
	const char *p = (const char *)cfg + s->offset;

	switch (s->field) {
	case FPREP__CONFIG_INT:
		return *(const int *)p;
	case FPREP__CONFIG_UNSIGNED:
		return *(const unsigned *)p;
	case FPREP__CONFIG_U64:
		return (int64_t) * (const uint64_t *)p;
	}
	return 0;
}

/* config_put writes v, a default, a word's value or a number in bounds,
 * into s's field. */
static void config_put(fprep__config *cfg,
                       const struct fprep__config_setting *s, int64_t v)
{
	char *p = (char *)cfg + s->offset;

	switch (s->field) {
	case FPREP__CONFIG_INT:
		*(int *)p = (int)v;
		break;
	case FPREP__CONFIG_UNSIGNED:
		*(unsigned *)p = (unsigned)v;
		break;
	case FPREP__CONFIG_U64:
		*(uint64_t *)p = (uint64_t)v;
		break;
	}
}

void fprep__config_show(const fprep__config *cfg,
                        const struct fprep__config_setting *s, char *buf,
                        size_t size)
{
	int64_t v;

	if (s->type == FPREP__CONFIG_OTHER) {
		s->show(cfg, buf, size);
		return;
	}
	v = fprep__config_get(cfg, s);
	for (const struct fprep__config_word *w = s->words;
	     w != NULL && w->word != NULL; w++)
		if (w->value == v) {
			snprintf(buf, size, "%s", w->word);
			return;
		}
	snprintf(buf, size, "%" PRId64, v);
}

/* config_refuse says that val is none of what s accepts: "'fast' is not
 * auto or an integer in 0..100000". */
static void config_refuse(const struct fprep__config_setting *s,
                          const char *val, const char *where, FILE *err)
{
	const struct fprep__config_word *w = s->words;
	unsigned n = 0, i = 0;

	for (; w != NULL && w->word != NULL; w++)
		n += !w->alias;
	fprintf(err, "frameprepd: %s: '%s' is not ", where, val);
	for (w = s->words; w != NULL && w->word != NULL; w++) {
		const char *sep = ", ";

		if (w->alias)
			continue;
		if (++i == 1)
			sep = "";
		else if (i == n && s->type != FPREP__CONFIG_NUMBER)
			sep = " or ";
		fprintf(err, "%s%s", sep, w->word);
	}
	if (s->type == FPREP__CONFIG_NUMBER)
		fprintf(err, "%san integer in %" PRIu64 "..%" PRIu64,
		        n > 0 ? " or " : "", s->min, s->max);
	fputc('\n', err);
}

/* config_set gives setting s the value val; where names its origin (the
 * flag, or the file and key) in errors. */
static int config_set(fprep__config *cfg, const struct fprep__config_setting *s,
                      const char *val, const char *where, FILE *err)
{
	uint64_t v;

	if (s->type == FPREP__CONFIG_OTHER)
		return s->set(cfg, s, val, where, err);
	for (const struct fprep__config_word *w = s->words;
	     w != NULL && w->word != NULL; w++)
		if (strcmp(val, w->word) == 0) {
			config_put(cfg, s, w->value);
			return 0;
		}
	if (s->type == FPREP__CONFIG_NUMBER &&
	    fprep__config_values_uint(val, s->min, s->max, &v) == 0) {
		config_put(cfg, s, (int64_t)v);
		return 0;
	}
	config_refuse(s, val, where, err);
	return -1;
}

void fprep__config_init(fprep__config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t k = 0; k < CONFIG_NSETTINGS; k++) {
		const struct fprep__config_setting *s =
		        &fprep__config_settings[k];

		if (s->type == FPREP__CONFIG_OTHER)
			(void)s->set(cfg, s, NULL, s->name, stderr);
		else
			config_put(cfg, s, s->def);
	}
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

static void config_usage(const fprep__config *cfg, FILE *out)
{
	char flag[64], def[FPREP__URL_SIZE];

	fprintf(out, "Usage: frameprepd [OPTION]...\n"
	             "Serve preprocessing requests (frame -> tensor) on "
	             "ipc:// and tcp:// sockets.\n\n");
	for (size_t k = 0; k < CONFIG_NSETTINGS; k++) {
		const struct fprep__config_setting *s =
		        &fprep__config_settings[k];

		snprintf(flag, sizeof(flag), "--%s %s", s->name, s->arg);
		fprep__config_show(cfg, s, def, sizeof(def));
		fprintf(out, "  %-30s %s (default: %s)\n", flag, s->help, def);
	}
	fprintf(out, "  %-30s %s\n  %-30s %s\n  %-30s %s\n\n", "--config FILE",
	        "read settings from an INI file first", "-h, --help",
	        "print this help and exit", "--version",
	        "print the version and exit");
	fprintf(out,
	        "The INI file takes the same keys as the flags, without "
	        "the dashes in front\n(max-width = 4096), at its top level "
	        "or in a [frameprepd] section;\nflags override it. Settings "
	        "are read at start; SIGHUP reads the --config file\nagain "
	        "(the flags given at start still win over it) and applies "
	        "these at once:");
	for (size_t k = 0, col = 80; k < CONFIG_NSETTINGS; k++) {
		const struct fprep__config_setting *s =
		        &fprep__config_settings[k];
		const char *note = s->live == LIVE_RAISE
		                           ? " (raised; a lower value is kept)"
		                           : "";
		size_t len = strlen(s->name) + strlen(note) + 1;

		if (!s->live)
			continue;
		if (col + len > 78) {
			fputs("\n ", out);
			col = 1;
		}
		fprintf(out, " %s%s", s->name, note);
		col += len;
	}
	fprintf(out,
	        "\n(spin-us: the loop's; GPU lanes keep theirs); a change to "
	        "any other setting is\nlogged and kept until a restart, and "
	        "a file with an error changes nothing.\nExit status: 0 "
	        "clean shutdown, 1 runtime failure, 2 bad settings (such as "
	        "a\ntcp:// listen without a port, or a GPU named to a "
	        "frameprepd built without\nCUDA).\n");
}

/* config_find returns the setting called name, or NULL. */
static const struct fprep__config_setting *config_find(const char *name)
{
	for (size_t k = 0; k < CONFIG_NSETTINGS; k++)
		if (strcmp(name, fprep__config_settings[k].name) == 0)
			return &fprep__config_settings[k];
	return NULL;
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
	const struct fprep__config_setting *s = config_find(name);
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
	if (s == NULL) {
		fprintf(fc->err, "frameprepd: %s: unknown key\n", where);
		fc->failed = 1;
	} else if (config_set(fc->cfg, s, value, where, fc->err) != 0) {
		fc->failed = 1;
	}
	return 1;
}

/* CONFIG_FILE_MAX: the largest settings file read. */
#define CONFIG_FILE_MAX (1024 * 1024)

/* config_read_file reads the settings file at path into a terminated
 * buffer (*text, malloc'd), once: a directory, an empty file, one larger
 * than CONFIG_FILE_MAX and one that is not text (a NUL byte, or another
 * control character than tab, CR and LF) are refused with why, so that
 * neither start-up nor SIGHUP takes one for a file of no settings. */
static int config_read_file(const char *path, char **text, FILE *err)
{
	struct stat st;
	size_t n = 0;
	char *buf = NULL;
	FILE *f = fopen(path, "r");

	*text = NULL;
	if (f == NULL) {
		fprintf(err, "frameprepd: --config: cannot open '%s': %s\n",
		        path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(err,
		        "frameprepd: --config: '%s' is %s, not a settings "
		        "file\n",
		        path,
		        S_ISDIR(st.st_mode) ? "a directory"
		                            : "not a regular file");
		goto err;
	}
	if (st.st_size > CONFIG_FILE_MAX) {
		fprintf(err,
		        "frameprepd: --config: '%s' has %lld bytes, more than "
		        "a settings file's %d\n",
		        path, (long long)st.st_size, CONFIG_FILE_MAX);
		goto err;
	}
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (buf == NULL) {
		fprintf(err, "frameprepd: --config: out of memory\n");
		goto err;
	}
	n = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f) || n > CONFIG_FILE_MAX) {
		fprintf(err, "frameprepd: --config: cannot read '%s'%s\n", path,
		        n > CONFIG_FILE_MAX ? ": it grew past 1 MiB" : "");
		goto err;
	}
	if (n == 0) {
		fprintf(err,
		        "frameprepd: --config: '%s' is empty (a file of no "
		        "settings would reset every one to its default)\n",
		        path);
		goto err;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
			fprintf(err,
			        "frameprepd: --config: '%s' is not a text file "
			        "(byte 0x%02x at offset %zu)\n",
			        path, ch, i);
			goto err;
		}
	}
	buf[n] = '\0';
	fclose(f);
	*text = buf;
	return 0;
err:
	free(buf);
	fclose(f);
	return -1;
}

static int config_load_file(fprep__config *cfg, const char *path, FILE *err)
{
	struct config_file_ctx fc = {cfg, path, err, 0};
	char *text;
	int rv;

	if (config_read_file(path, &text, err) != 0)
		return -1;
	rv = ini_parse_string(text, config_ini_handler, &fc);
	free(text);
	if (rv < 0) {
		fprintf(err, "frameprepd: --config: cannot parse '%s'\n", path);
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
	struct option longopts[CONFIG_NSETTINGS + 4];
	const struct fprep__config_setting *s;
	int opt, flag_listens = 0;
	size_t n = 0;
	char where[64];

	cfg->argc = argc;
	cfg->argv = argv;
	for (; n < CONFIG_NSETTINGS; n++) {
		s = &fprep__config_settings[n];
		longopts[n] = (struct option){s->name,
		                              s->bare ? optional_argument
		                                      : required_argument,
		                              NULL, FLAG_SETTING + (int)n};
	}
	longopts[n++] =
	        (struct option){"config", required_argument, NULL, FLAG_CONFIG};
	longopts[n++] = (struct option){"help", no_argument, NULL, FLAG_HELP};
	longopts[n++] =
	        (struct option){"version", no_argument, NULL, FLAG_VERSION};
	longopts[n] = (struct option){NULL, 0, NULL, 0};

	/* First pass: --help, --version, --config and unknown flags. */
	opterr = 0;
	optind = 0;
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case FLAG_HELP:
			config_usage(cfg, out);
			return FPREP__CONFIG_EXIT;
		case FLAG_VERSION:
			fprintf(out, "frameprepd %s (protocol %d)\n",
			        FPREP_VERSION_STRING, FPREP_PROTOCOL_VERSION);
			return FPREP__CONFIG_EXIT;
		case FLAG_CONFIG:
			if (fprep__config_values_string(&cfg->config_file,
			                                optarg) != 0)
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
		if (opt < FLAG_SETTING)
			continue;
		s = &fprep__config_settings[opt - FLAG_SETTING];
		snprintf(where, sizeof(where), "--%s", s->name);
		/* The first --listen flag drops the file's listens. */
		if (strcmp(s->name, "listen") == 0 && !flag_listens++)
			(void)config_set(cfg, s, NULL, where, err);
		if (config_set(cfg, s, optarg ? optarg : "true", where, err) !=
		    0)
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

void fprep__config_resolve(fprep__config *cfg)
{
	int shared = (cfg->socket_mode & 0066) != 0;

	if (cfg->shares.shm_bytes_per_uid == FPREP__CONFIG_AUTO_U64)
		cfg->shares.shm_bytes_per_uid =
		        shared ? cfg->max_shm_bytes / 2 : 0;
	if (cfg->shares.doorbells_per_uid == FPREP__CONFIG_AUTO_UINT)
		cfg->shares.doorbells_per_uid =
		        shared ? (cfg->max_doorbells + 1) / 2 : 0;
	if (cfg->max_inflight_per_uid == FPREP__CONFIG_AUTO_UINT)
		cfg->max_inflight_per_uid =
		        shared ? (cfg->max_inflight + 1) / 2 : 0;
}

/* config_append adds the printf text to buf (of size, holding len), which
 * stays terminated when it is full. */
static size_t config_append(char *buf, size_t size, size_t len, const char *fmt,
                            ...) __attribute__((format(printf, 4, 5)));

static size_t config_append(char *buf, size_t size, size_t len, const char *fmt,
                            ...)
{
	va_list ap;
	int n;

	if (len >= size)
		return len;
	va_start(ap, fmt);
	n = vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
	return n < 0 ? len : len + (size_t)n;
}

/* config_reparse runs fprep__config_parse on cfg's command line into
 * *fresh, with its errors in err (one line, the last of them). */
static int config_reparse(const fprep__config *cfg, fprep__config *fresh,
                          char *err, size_t err_size)
{
	char *text = NULL, *line;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int rv;

	if (f == NULL) {
		snprintf(err, err_size, "out of memory");
		return -1;
	}
	fprep__config_init(fresh);
	rv = fprep__config_parse(fresh, cfg->argc, cfg->argv, f, f);
	fclose(f);
	if (rv != 0) {
		/* Its lines joined by "; ", without their "frameprepd: ". */
		size_t n = 0;
		char *save = NULL;

		err[0] = '\0';
		for (line = strtok_r(text, "\n", &save); line != NULL;
		     line = strtok_r(NULL, "\n", &save)) {
			if (strncmp(line, "frameprepd: ", 12) == 0)
				line += 12;
			n = config_append(err, err_size, n, "%s%s",
			                  n > 0 ? "; " : "", line);
		}
		if (n == 0)
			snprintf(err, err_size, "settings refused");
		fprep__config_fini(fresh);
	}
	free(text);
	return rv != 0 ? -1 : 0;
}

int fprep__config_reload(fprep__config *cfg, char *changed, size_t changed_size,
                         char *kept, size_t kept_size, char *err,
                         size_t err_size)
{
	fprep__config fresh;
	char a[FPREP__URL_SIZE], b[FPREP__URL_SIZE];
	size_t nc = 0, nk = 0;

	changed[0] = kept[0] = err[0] = '\0';
	if (cfg->config_file == NULL)
		return FPREP__RELOAD_NO_FILE;
	if (config_reparse(cfg, &fresh, err, err_size) != 0)
		return FPREP__RELOAD_REFUSED;
	/* auto stands for what it meant at start. */
	fprep__config_resolve(cfg);
	fprep__config_resolve(&fresh);
	if (fresh.spin_us == FPREP__SPIN_AUTO)
		fresh.spin_us = cfg->spin_auto_us;
	for (size_t k = 0; k < CONFIG_NSETTINGS; k++) {
		const struct fprep__config_setting *s =
		        &fprep__config_settings[k];

		fprep__config_show(cfg, s, a, sizeof(a));
		fprep__config_show(&fresh, s, b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		if (s->live == LIVE || (s->live == LIVE_RAISE &&
		                        fprep__config_get(&fresh, s) >
		                                fprep__config_get(cfg, s))) {
			config_put(cfg, s, fprep__config_get(&fresh, s));
			nc = config_append(changed, changed_size, nc,
			                   "%s%s %s -> %s", nc > 0 ? ", " : "",
			                   s->name, a, b);
		} else {
			nk = config_append(kept, kept_size, nk, "%s%s%s",
			                   nk > 0 ? ", " : "", s->name,
			                   s->live == LIVE_RAISE ? " (lowered)"
			                                         : "");
		}
	}
	fprep__config_fini(&fresh);
	return 0;
}
