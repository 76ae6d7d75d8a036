/*
 * kernel_cache.c: NVRTC compilation of the kernel sources to CUBIN and the
 * on-disk cache of the results (format and key in kernel_cache.h).
 *
 * The design is simple: fprep__kernel_build hashes what determines the
 * CUBIN into a key, reads "<key>.cubin" if it is there and checks its
 * header, key, length and checksum; otherwise it compiles with NVRTC for the
 * device's architecture (never PTX, which a driver older than NVRTC would
 * refuse) and writes the entry through a temporary file and rename(2).
 * Nothing here touches a GPU, so it runs and is tested on machines with no
 * driver.
 */
#include "gpu/kernel_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpu/cuda_check.h"

struct fprep__kcache {
	int enabled;
	unsigned hits;
	unsigned misses;
	char dir[PATH_MAX];
};

typedef struct kcache_header {
	uint32_t magic;
	uint32_t version;
	uint64_t key;
	uint64_t length;
	uint64_t checksum;
} kcache_header;

_Static_assert(sizeof(kcache_header) == FPREP_KCACHE_HEADER_SIZE,
               "cache header layout");

static atomic_uint kcache_compiles;

#define KCACHE_FNV_OFFSET 0xcbf29ce484222325ull
#define KCACHE_FNV_PRIME  0x100000001b3ull

static uint64_t kcache_fnv(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= KCACHE_FNV_PRIME;
	}
	return h;
}

/* kcache_fnv_field hashes n as 8 bytes and then the n bytes of data. */
static uint64_t kcache_fnv_field(uint64_t h, const void *data, size_t n)
{
	uint64_t len = n;
	h = kcache_fnv(h, &len, sizeof len);
	return kcache_fnv(h, data, n);
}

static uint64_t kcache_fnv_str(uint64_t h, const char *s)
{
	return kcache_fnv_field(h, s, strlen(s));
}

uint64_t fprep__kcache_key(const char *name, const char *text,
                           const fprep__kernel_source *headers,
                           const char *const *opts, int nopts, int nvrtc_major,
                           int nvrtc_minor, int cc)
{
	uint32_t version = FPREP_KCACHE_VERSION;
	int32_t nums[3] = {nvrtc_major, nvrtc_minor, cc};
	uint64_t h = KCACHE_FNV_OFFSET;

	h = kcache_fnv_field(h, &version, sizeof version);
	h = kcache_fnv_str(h, name);
	h = kcache_fnv_str(h, text);
	for (int i = 0; headers != NULL && headers[i].name != NULL; i++) {
		h = kcache_fnv_str(h, headers[i].name);
		h = kcache_fnv_str(h, headers[i].text);
	}
	h = kcache_fnv_field(h, &nopts, sizeof nopts);
	for (int i = 0; i < nopts; i++)
		h = kcache_fnv_str(h, opts[i]);
	return kcache_fnv_field(h, nums, sizeof nums);
}

/* kcache_mkdirs creates dir and its parents with mode 0700. */
static int kcache_mkdirs(const char *dir)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof path)
		return -1;
	memcpy(path, dir, n + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return -1;
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int fprep__kcache_open(fprep__kcache **cp, const char *dir, int enabled)
{
	fprep__kcache *c = calloc(1, sizeof *c);
	int n;

	*cp = NULL;
	if (c == NULL)
		return FPREP_ENOMEM;
	if (!enabled)
		goto out;
	if (dir != NULL && dir[0] != '\0') {
		n = snprintf(c->dir, sizeof c->dir, "%s", dir);
	} else {
		const char *xdg = getenv("XDG_CACHE_HOME");
		const char *home = getenv("HOME");
		if (xdg != NULL && xdg[0] == '/')
			n = snprintf(c->dir, sizeof c->dir, "%s/frameprep",
			             xdg);
		else if (home != NULL && home[0] == '/')
			n = snprintf(c->dir, sizeof c->dir,
			             "%s/.cache/frameprep", home);
		else
			n = -1;
	}
	if (n < 0 || (size_t)n >= sizeof c->dir) {
		fprep__log(FPREP_LOG_WARNING,
		           "kernel cache off: no usable directory (set "
		           "XDG_CACHE_HOME or the cache directory)");
		goto out;
	}
	if (kcache_mkdirs(c->dir) != 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "kernel cache off: cannot create %s: %s", c->dir,
		           strerror(errno));
		goto out;
	}
	c->enabled = 1;
out:
	if (!c->enabled)
		c->dir[0] = '\0';
	*cp = c;
	return 0;
}

void fprep__kcache_close(fprep__kcache *c)
{
	free(c);
}

const char *fprep__kcache_dir(const fprep__kcache *c)
{
	return c->dir;
}

void fprep__kcache_stats(const fprep__kcache *c, unsigned *hits,
                         unsigned *misses)
{
	*hits = c->hits;
	*misses = c->misses;
}

int fprep__kcache_path(const fprep__kcache *c, uint64_t key, char *buf,
                       size_t size)
{
	if (!c->enabled)
		return FPREP_EUNSUPPORTED;
	int n = snprintf(buf, size, "%s/%016llx.cubin", c->dir,
	                 (unsigned long long)key);
	return n < 0 || (size_t)n >= size ? FPREP_ELIMIT : 0;
}

/* kcache_io_all reads (or, when writing, writes) exactly n bytes of fd at
 * buf, again after EINTR and short counts. Returns 0, or -1 on an error or
 * the end of the file. */
static int kcache_io_all(int fd, unsigned char *p, size_t n, int writing)
{
	while (n > 0) {
		ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int kcache_read_all(int fd, void *buf, size_t n)
{
	return kcache_io_all(fd, buf, n, 0);
}

/* kcache_write_all: write(2) does not change the bytes at buf. */
static int kcache_write_all(int fd, const void *buf, size_t n)
{
	return kcache_io_all(fd, (unsigned char *)(uintptr_t)buf, n, 1);
}

int fprep__kcache_get(fprep__kcache *c, uint64_t key, void **data, size_t *size)
{
	char path[PATH_MAX];
	const char *why = NULL;
	kcache_header h;
	struct stat st;
	void *buf = NULL;
	int fd = -1;
	int err = FPREP_EIO;

	*data = NULL;
	*size = 0;
	if (fprep__kcache_path(c, key, path, sizeof path) != 0)
		return FPREP_EIO;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto out; /* no entry: a plain miss, nothing to log */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		why = "not a readable file";
		goto out;
	}
	if ((uint64_t)st.st_size < sizeof h ||
	    kcache_read_all(fd, &h, sizeof h)) {
		why = "truncated header";
		goto out;
	}
	if (h.magic != FPREP_KCACHE_MAGIC ||
	    h.version != FPREP_KCACHE_VERSION) {
		why = "bad magic or format version";
		goto out;
	}
	if (h.key != key) {
		why = "key does not match the file name";
		goto out;
	}
	if (h.length == 0 || h.length > FPREP_KCACHE_MAX_ENTRY ||
	    h.length != (uint64_t)st.st_size - sizeof h) {
		why = "length does not match the file size";
		goto out;
	}
	buf = malloc(h.length);
	if (buf == NULL) {
		err = FPREP_ENOMEM;
		goto out;
	}
	if (kcache_read_all(fd, buf, h.length) != 0) {
		why = "short read";
		goto out;
	}
	if (kcache_fnv(KCACHE_FNV_OFFSET, buf, h.length) != h.checksum) {
		why = "checksum mismatch";
		goto out;
	}
	*data = buf;
	*size = h.length;
	buf = NULL;
	err = 0;
out:
	if (why != NULL)
		fprep__log(FPREP_LOG_WARNING,
		           "kernel cache: ignoring corrupt entry %s: %s", path,
		           why);
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

int fprep__kcache_put(fprep__kcache *c, uint64_t key, const void *data,
                      size_t size)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16];
	kcache_header h = {
	        .magic = FPREP_KCACHE_MAGIC,
	        .version = FPREP_KCACHE_VERSION,
	        .key = key,
	        .length = size,
	        .checksum = kcache_fnv(KCACHE_FNV_OFFSET, data, size),
	};
	int fd = -1, err = FPREP_EIO;

	if (!c->enabled)
		return 0;
	if (fprep__kcache_path(c, key, path, sizeof path) != 0)
		return FPREP_EIO;
	snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "kernel cache: cannot create %s: %s", tmp,
		           strerror(errno));
		return FPREP_EIO;
	}
	if (kcache_write_all(fd, &h, sizeof h) != 0 ||
	    kcache_write_all(fd, data, size) != 0 || fsync(fd) != 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "kernel cache: cannot write %s: %s", tmp,
		           strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "kernel cache: cannot rename %s to %s: %s", tmp,
		           path, strerror(errno));
		goto out;
	}
	/* Make the rename itself durable. */
	int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	err = 0;
out:
	if (fd >= 0)
		close(fd);
	if (err != 0)
		unlink(tmp);
	return err;
}

unsigned fprep__nvrtc_compile_count(void)
{
	return atomic_load(&kcache_compiles);
}

int fprep__nvrtc_arch(int cc)
{
	int n = 0, best = 0;
	int *archs = NULL;

	if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0)
		return 0;
	archs = calloc((size_t)n, sizeof *archs);
	if (archs == NULL || nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS)
		goto out;
	for (int i = 0; i < n; i++)
		if (archs[i] / 10 == cc / 10 && archs[i] <= cc &&
		    archs[i] > best)
			best = archs[i];
out:
	free(archs);
	return best;
}

static double kcache_ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* kcache_log_program logs NVRTC's program log (the compiler's messages). */
static void kcache_log_program(nvrtcProgram prog, const char *name)
{
	size_t n = 0;
	if (nvrtcGetProgramLogSize(prog, &n) != NVRTC_SUCCESS || n <= 1)
		return;
	char *log = malloc(n);
	if (log == NULL)
		return;
	if (nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
		/* One record per line: the journal keeps records short. */
		char *save = NULL;
		for (char *l = strtok_r(log, "\n", &save); l != NULL;
		     l = strtok_r(NULL, "\n", &save))
			fprep__log(FPREP_LOG_ERR, "nvrtc %s: %s", name, l);
	}
	free(log);
}

int fprep__nvrtc_compile(const char *name, const char *text,
                         const fprep__kernel_source *headers, int cc,
                         const char *const *opts, int nopts, void **cubin,
                         size_t *size, double *ms, char *msg, size_t msg_size)
{
	fprep__gpu_status st = {0};
	nvrtcProgram prog = NULL;
	const char **all = NULL;
	const char **htext = NULL, **hname = NULL;
	int nh = 0;
	char arch[48];
	size_t n = 0;
	void *buf = NULL;
	struct timespec t0;
	int err = FPREP_ENVRTC;
	nvrtcResult r;

	*cubin = NULL;
	*size = 0;
	msg[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (headers != NULL && headers[nh].name != NULL)
		nh++;
	all = calloc((size_t)nopts + 1, sizeof *all);
	htext = calloc((size_t)nh + 1, sizeof *htext);
	hname = calloc((size_t)nh + 1, sizeof *hname);
	if (all == NULL || htext == NULL || hname == NULL) {
		err = FPREP_ENOMEM;
		goto out;
	}
	for (int i = 0; i < nh; i++) {
		htext[i] = headers[i].text;
		hname[i] = headers[i].name;
	}
	snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", cc);
	all[0] = arch;
	for (int i = 0; i < nopts; i++)
		all[i + 1] = opts[i];

	if (FPREP__NVRTC(&st, nvrtcCreateProgram(&prog, text, name, nh, htext,
	                                         hname)))
		goto out;
	atomic_fetch_add(&kcache_compiles, 1);
	r = nvrtcCompileProgram(prog, nopts + 1, all);
	if (r != NVRTC_SUCCESS) {
		fprep__log(FPREP_LOG_ERR, "nvrtc: compiling %s for sm_%d: %s",
		           name, cc, nvrtcGetErrorString(r));
		kcache_log_program(prog, name);
		snprintf(msg, msg_size, "NVRTC compile of %s for sm_%d: %s",
		         name, cc, nvrtcGetErrorString(r));
		goto out;
	}
	if (FPREP__NVRTC(&st, nvrtcGetCUBINSize(prog, &n)))
		goto out;
	buf = malloc(n ? n : 1);
	if (buf == NULL) {
		err = FPREP_ENOMEM;
		goto out;
	}
	if (FPREP__NVRTC(&st, nvrtcGetCUBIN(prog, buf)))
		goto out;
	*cubin = buf;
	*size = n;
	buf = NULL;
	*ms = kcache_ms_since(&t0);
	err = 0;
out:
	if (err == FPREP_ENVRTC && msg[0] == '\0')
		snprintf(msg, msg_size, "%s", st.text);
	free(buf);
	if (prog != NULL)
		nvrtcDestroyProgram(&prog);
	free(hname);
	free(htext);
	free(all);
	return err;
}

int fprep__kernel_build(fprep__kcache *c, const char *name, const char *text,
                        const fprep__kernel_source *headers, int cc, int force,
                        void **cubin, size_t *size, int *hit, char *msg,
                        size_t msg_size)
{
	int major = 0, minor = 0;
	double ms = 0;
	uint64_t key;
	int err;

	*hit = 0;
	msg[0] = '\0';
	if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
		snprintf(msg, msg_size, "nvrtcVersion failed");
		return FPREP_ENVRTC;
	}
	key = fprep__kcache_key(name, text, headers, NULL, 0, major, minor, cc);
	if (c->enabled && !force) {
		err = fprep__kcache_get(c, key, cubin, size);
		if (err == 0) {
			c->hits++;
			*hit = 1;
			fprep__log(FPREP_LOG_INFO,
			           "kernel cache hit %s sm_%d key %016llx (%zu "
			           "bytes, %s)",
			           name, cc, (unsigned long long)key, *size,
			           c->dir);
			return 0;
		}
		if (err == FPREP_ENOMEM)
			return err;
	}
	c->misses++;
	err = fprep__nvrtc_compile(name, text, headers, cc, NULL, 0, cubin,
	                           size, &ms, msg, msg_size);
	if (err != 0)
		return err;
	fprep__log(FPREP_LOG_INFO,
	           "kernel cache miss %s sm_%d key %016llx compile %.0f ms "
	           "(%zu bytes, %s)",
	           name, cc, (unsigned long long)key, ms, *size,
	           c->enabled ? c->dir : "cache off");
	/* A cache that cannot be written costs a compile at the next start,
	 * nothing more. */
	(void)fprep__kcache_put(c, key, *cubin, *size);
	return 0;
}
