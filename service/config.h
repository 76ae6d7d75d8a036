/*
 * config.h: frameprepd's settings, from defaults, an optional INI file and
 * command-line flags (flags win), each value validated. One table
 * (fprep__config_settings) describes them all. Loop thread, at start-up.
 */
#ifndef FPREP_SERVICE_CONFIG_H
#define FPREP_SERVICE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "frameprep/protocol.h"

#define FPREP__MAX_LISTEN 16
#define FPREP__URL_SIZE   512

/* Device choices besides a GPU id (>= 0). */
#define FPREP__DEVICE_AUTO (-1)
#define FPREP__DEVICE_CPU  (-2)
#define FPREP__DEVICE_ALL  (-3) /* every GPU present */
#define FPREP__DEVICE_LIST (-4) /* the GPUs in devices[] */

#define FPREP__MAX_DEVICES 64 /* GPUs in one daemon */
#define FPREP__MAX_LANES   64 /* lanes (GPU x lanes) in one daemon */

/* fprep__shares: one connection's and one user's (peer uid's) shares of
 * the daemon-wide budgets of registrations, so that a client of a shared
 * socket (socket-mode 660 or 666) cannot take all of them; 0: no share
 * (the whole budget). Read on the loop thread when a REGISTER,
 * REGISTER_CUDA or DOORBELL is checked (regions.c, port_doorbell.c): a
 * lowered share refuses new registrations and keeps those made. */
typedef struct fprep__shares {
	uint64_t shm_bytes_per_conn; /* of max-shm-bytes */
	uint64_t shm_bytes_per_uid;  /* of max-shm-bytes */
	unsigned doorbells_per_conn; /* of max-doorbells */
	unsigned doorbells_per_uid;  /* of max-doorbells */
	unsigned cuda_per_uid; /* CUDA regions of one user, all connections */
} fprep__shares;

/* fprep__config: everything frameprepd is told. Strings are owned by the
 * config and released with fprep__config_fini. */
typedef struct fprep__config {
	char listen[FPREP__MAX_LISTEN][FPREP__URL_SIZE];
	unsigned nlisten;  /* 0: fprep_default_url */
	char *config_file; /* NULL: none */
	int device;        /* FPREP__DEVICE_AUTO, _CPU, _ALL, _LIST, or
	                      a GPU id (then also devices[0]) */
	int devices[FPREP__MAX_DEVICES]; /* GPU ids, distinct, in order */
	unsigned ndevices;               /* of devices[]; 0: none named */
	unsigned lanes;                  /* GPU lanes per device */
	unsigned workers;      /* CPU worker threads, 0: one per core */
	unsigned max_inflight; /* nng contexts: requests in flight */
	unsigned max_inflight_per_conn; /* of those, one connection's */
	unsigned max_inflight_per_uid;  /* of those, one peer uid's (all its
	                                   connections); 0: no bound */
	unsigned inflight_reserve; /* slots kept for connections holding none */
	int reply_stall_ms; /* a reply waiting this long on a connection that
	                       reads none closes it, while slots are short */
	uint64_t max_reply_bytes;  /* tensor bytes of the replies in flight */
	fprep_limits limits;       /* request bounds */
	int send_timeout_ms;       /* bound on each reply's send */
	int shutdown_timeout_ms;   /* bound on draining work at shutdown */
	unsigned slots;            /* GPU staging slots per lane */
	char *kernel_dir;          /* NULL: the embedded kernel sources */
	char *kernel_cache;        /* NULL: the default cache directory */
	int cache_enabled;         /* 0: --kernel-cache off */
	int log_level;             /* enum fprep__log_level */
	int socket_mode;           /* permission bits of ipc:// socket files */
	unsigned max_regions;      /* shared-memory regions per connection */
	unsigned max_doorbells;    /* doorbell areas watched, all connections */
	uint64_t max_region_bytes; /* largest region */
	uint64_t max_shm_bytes;    /* all regions together */
	int allow_cuda_regions;    /* 0: REGISTER_CUDA refused */
	int jpeg_engine; /* 1: GPU lanes decode JPEGs on the GPU's engine */
	unsigned max_cuda_regions; /* CUDA regions per connection */
	fprep__shares shares;      /* of the budgets above */
	char *metrics_listen;      /* HOST:PORT of /metrics; NULL: off */
	int trace;                 /* stage times in each reply's message */
	int transfer;              /* enum fprep__transfer (GPU) */
	int h2d_all_rows;          /* 1: a staged H2D copies every frame row */
	int spin_us;      /* idle threads poll this long before sleeping, in
	                     microseconds; FPREP__SPIN_AUTO: by backend */
	int spin_auto_us; /* what auto means for this backend (main sets
	                     it): fprep__config_reload's auto */
	int argc;         /* the command line parsed (main's argv, */
	char **argv;      /* borrowed): SIGHUP parses it again */
} fprep__config;

/* FPREP__SPIN_AUTO: --spin-us auto, FPREP__SPIN_GPU_US with a GPU backend
 * (a frame's GPU work is a few hundred microseconds, and waking a sleeping
 * thread adds tens to every hand-off), 0 with the CPU backend (its workers
 * need the cores). */
#define FPREP__SPIN_AUTO   (-1)
#define FPREP__SPIN_GPU_US 1000

/* FPREP__CONFIG_AUTO_U64, FPREP__CONFIG_AUTO_UINT: the value of "auto" in
 * a per-uid share's field (max-shm-bytes-per-uid, max-doorbells-per-uid,
 * max-inflight-per-uid) until fprep__config_resolve replaces it: half of
 * the budget where the socket mode lets other users connect (660, 666),
 * else 0 (no share). */
#define FPREP__CONFIG_AUTO_U64  UINT64_MAX
#define FPREP__CONFIG_AUTO_UINT UINT32_MAX

/* fprep__config_resolve replaces the "auto" shares by their values (see
 * FPREP__CONFIG_AUTO_U64): the server runs it at start, and
 * fprep__config_reload on the file's new settings; it may run again. */
void fprep__config_resolve(fprep__config *cfg);

/* fprep__transfer: how the GPU lane moves frames and tensors that lie in
 * registered pinned memory: copies on the copy engines (STAGED), the
 * kernel through mapped device pointers (MAPPED), or a rule (AUTO). */
enum fprep__transfer {
	FPREP__TRANSFER_STAGED,
	FPREP__TRANSFER_MAPPED,
	FPREP__TRANSFER_AUTO
};

/* fprep__transfer_name returns "staged", "mapped" or "auto". */
const char *fprep__transfer_name(int transfer);

/* Results of fprep__config_parse besides 0 (run). */
#define FPREP__CONFIG_EXIT  1 /* --help or --version printed: exit 0 */
#define FPREP__CONFIG_ERROR 2 /* error printed: exit 2 */

/* fprep__config_type: how a setting's value is read. */
enum fprep__config_type {
	FPREP__CONFIG_NUMBER, /* a whole decimal number in [min, max], or one
	                         of words (spin-us: auto) */
	FPREP__CONFIG_WORD,   /* one of words (true/false for a switch) */
	FPREP__CONFIG_OTHER,  /* set and show of its own (URLs, devices,
	                         directories) */
};

/* fprep__config_field: the C type of a NUMBER or WORD setting's field. */
enum fprep__config_field {
	FPREP__CONFIG_INT,
	FPREP__CONFIG_UNSIGNED,
	FPREP__CONFIG_U64,
};

/* fprep__config_word: a word a setting accepts and the value it stands
 * for. An alias is accepted but not named in --help or in errors (0600 for
 * 600). A list ends with a NULL word. */
struct fprep__config_word {
	const char *word;
	int64_t value;
	int alias;
};

/* fprep__config_setting: one row of the settings table. name is both the
 * flag (--name) and the INI key; arg and help make its --help line, which
 * ends with the default as show prints it on a fresh config. NUMBER and
 * WORD settings fill the field at offset (of C type field) and start at
 * def; OTHER settings are read by set, which with val NULL writes the
 * default, and printed by show. min and max bound a NUMBER (and the GPU
 * ids of --device). bare: the flag alone means "true". live: 1 when
 * SIGHUP applies a new value at once (fprep__config_reload), 2 when it
 * applies a higher value only, 0 when it keeps the value until a restart;
 * a live field is read only by the loop thread while the daemon runs, or
 * copied per request (config.c's LIVE says which and why the others are
 * not). */
struct fprep__config_setting {
	const char *name;
	int live;
	const char *arg;
	const char *help;
	enum fprep__config_type type;
	size_t offset;
	enum fprep__config_field field;
	uint64_t min, max;
	int64_t def;
	const struct fprep__config_word *words;
	int bare;
	int (*set)(fprep__config *cfg, const struct fprep__config_setting *s,
	           const char *val, const char *where, FILE *err);
	void (*show)(const fprep__config *cfg, char *buf, size_t size);
};

/* fprep__config_settings: every setting, in --help's order; there are
 * fprep__config_nsettings of them. --config, --help and --version are
 * flags only, not settings. */
extern const struct fprep__config_setting fprep__config_settings[];
extern const size_t fprep__config_nsettings;

/* fprep__config_get returns the value of a NUMBER or WORD setting. */
int64_t fprep__config_get(const fprep__config *cfg,
                          const struct fprep__config_setting *s);

/* fprep__config_show writes s's value in cfg as a flag would give it (or
 * as --help describes the default: "the sources built in") into buf. */
void fprep__config_show(const fprep__config *cfg,
                        const struct fprep__config_setting *s, char *buf,
                        size_t size);

/* fprep__config_init fills *cfg with the defaults. */
void fprep__config_init(fprep__config *cfg);

/* fprep__config_parse reads argv (and the file named by --config, whose
 * values the flags override) into *cfg, which fprep__config_init filled.
 * Usage, version and errors are written to out / err. Returns 0,
 * FPREP__CONFIG_EXIT or FPREP__CONFIG_ERROR. */
int fprep__config_parse(fprep__config *cfg, int argc, char **argv, FILE *out,
                        FILE *err);

/* Results of fprep__config_reload. */
#define FPREP__RELOAD_NO_FILE (1)  /* started without --config: nothing */
#define FPREP__RELOAD_REFUSED (-1) /* the file (or a flag) refused */

/* fprep__config_reload parses cfg's command line again (argc, argv: the
 * file named by --config, read afresh, then the flags over it) into a
 * fresh config, and copies the value of each live setting that differs
 * into *cfg. Into changed it writes "max-width 8192 -> 1024, ..." (the
 * live settings changed), into kept the names of the other settings whose
 * value differs, which *cfg keeps ("listen, device"), and into err the
 * parser's message when it refuses (then *cfg is unchanged). Each buffer
 * is written whole or cut, and always terminated. Loop thread only (it
 * writes fields the loop reads, and getopt's globals). Returns 0 (applied,
 * perhaps nothing), FPREP__RELOAD_NO_FILE or FPREP__RELOAD_REFUSED. */
int fprep__config_reload(fprep__config *cfg, char *changed, size_t changed_size,
                         char *kept, size_t kept_size, char *err,
                         size_t err_size);

/* fprep__config_fini releases the strings of *cfg. */
void fprep__config_fini(fprep__config *cfg);

#endif /* FPREP_SERVICE_CONFIG_H */
