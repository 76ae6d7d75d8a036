/* clang-format off */
/*
 * kernel_cache.h: compiles kernel sources to CUBINs with NVRTC and keeps them
 * in an on-disk cache, so a warm start loads kernels without compiling.
 *
 * This layer needs NVRTC but no GPU and no driver: it takes the compute
 * capability as a number. Loading a CUBIN into a device is the backend's job
 * (backend_cuda.c).
 *
 * Cache entries are files "<key as 16 hex digits>.cubin" in the cache
 * directory, each a 32-byte header followed by the CUBIN:
 *
 *   off size field
 *     0  u32 magic     FPREP_KCACHE_MAGIC ("FPKC")
 *     4  u32 version   FPREP_KCACHE_VERSION
 *     8  u64 key       the entry's key (must match the file name's)
 *    16  u64 length    bytes of CUBIN after the header
 *    24  u64 checksum  FNV-1a 64 of the CUBIN bytes
 *
 * in host byte order (the cache is local to the machine). The key is the
 * 64-bit FNV-1a hash of (format version, source name, source text, every
 * compile option, NVRTC version, compute capability), each field preceded by
 * its length so fields cannot run into each other. FNV-1a is not
 * collision-resistant against someone crafting sources; the cache directory
 * belongs to the user running the daemon, who can run code anyway. Entries
 * are written to a temporary file in the same directory, fsync'ed and
 * renamed over the final name, so readers see a whole entry or none; a
 * corrupt, truncated or stale entry is logged and replaced, never trusted.
 */
/* clang-format on */
#ifndef FPREP_GPU_KERNEL_CACHE_H
#define FPREP_GPU_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define FPREP_KCACHE_MAGIC       0x434b5046u /* "FPKC" as little-endian bytes */
#define FPREP_KCACHE_VERSION     1u
#define FPREP_KCACHE_HEADER_SIZE 32
#define FPREP_KCACHE_MAX_ENTRY   (64u << 20) /* larger entries are refused */

/* fprep__kernel_source: one entry of the table embedded at build time. */
typedef struct fprep__kernel_source {
	const char *name; /* file name, e.g. "letterbox.cu" */
	const char *text; /* NUL-terminated CUDA C++ */
} fprep__kernel_source;

/* fprep__kernel_sources: the kernels/ sources (*.cu) embedded by
 * embed.cmake, ended by an entry with name NULL. */
extern const fprep__kernel_source fprep__kernel_sources[];

/* fprep__kernel_headers: the kernels/ headers (*.h), embedded likewise. A
 * source's #include "name" is resolved among them (NVRTC named headers). */
extern const fprep__kernel_source fprep__kernel_headers[];

/* fprep__kcache: a cache directory (or a disabled cache). */
typedef struct fprep__kcache fprep__kcache;

/* fprep__kcache_open makes a cache handle in *cp. dir NULL means
 * $XDG_CACHE_HOME/frameprep, else $HOME/.cache/frameprep; the directory is
 * created (mode 0700) if needed. enabled 0 gives a cache that finds nothing
 * and writes nothing. A directory that cannot be created disables the cache
 * with a warning. Returns 0 or FPREP_ENOMEM. Release with
 * fprep__kcache_close. The handle may be used by one thread at a time;
 * several processes may share a directory. */
int fprep__kcache_open(fprep__kcache **cp, const char *dir, int enabled);

/* fprep__kcache_close frees the handle (NULL is ignored). */
void fprep__kcache_close(fprep__kcache *c);

/* fprep__kcache_dir returns the directory, or "" when the cache is off. */
const char *fprep__kcache_dir(const fprep__kcache *c);

/* fprep__kcache_stats reports lookups that hit and missed since open. */
void fprep__kcache_stats(const fprep__kcache *c, unsigned *hits,
                         unsigned *misses);

/* fprep__kcache_key hashes the inputs of a compilation: source name and
 * text, the name and text of every header (a table ended by a NULL name, or
 * NULL for none), nopts options, the NVRTC version and the compute
 * capability (major * 10 + minor). */
uint64_t fprep__kcache_key(const char *name, const char *text,
                           const fprep__kernel_source *headers,
                           const char *const *opts, int nopts, int nvrtc_major,
                           int nvrtc_minor, int cc);

/* fprep__kcache_path writes the entry file name of key into buf. Returns 0,
 * or FPREP_ELIMIT if it does not fit, FPREP_EUNSUPPORTED if disabled. */
int fprep__kcache_path(const fprep__kcache *c, uint64_t key, char *buf,
                       size_t size);

/* fprep__kcache_get reads the entry of key into *data (malloc'ed, *size
 * bytes; the caller frees it). Returns 0 on a hit; FPREP_EIO when there is
 * no usable entry (missing, or corrupt / truncated / stale, which is
 * logged); FPREP_ENOMEM. */
int fprep__kcache_get(fprep__kcache *c, uint64_t key, void **data,
                      size_t *size);

/* fprep__kcache_put stores size bytes of data under key, atomically. Does
 * nothing on a disabled cache. Returns 0 or FPREP_EIO (logged). */
int fprep__kcache_put(fprep__kcache *c, uint64_t key, const void *data,
                      size_t size);

/* fprep__nvrtc_compile compiles one source to a CUBIN for compute
 * capability cc (major * 10 + minor) with --gpu-architecture=sm_<cc> plus
 * nopts extra options; headers (a table ended by a NULL name, or NULL) are
 * the files its #include "name" lines may name. On success *cubin (malloc'ed,
 * *size bytes) is the ELF image and *ms the compile time. On a compile error
 * the NVRTC program log is logged and a one-line reason written to msg. Returns
 * 0, FPREP_ENVRTC or FPREP_ENOMEM. Thread-safe. */
int fprep__nvrtc_compile(const char *name, const char *text,
                         const fprep__kernel_source *headers, int cc,
                         const char *const *opts, int nopts, void **cubin,
                         size_t *size, double *ms, char *msg, size_t msg_size);

/* fprep__nvrtc_compile_count returns how many times nvrtcCompileProgram
 * was called in this process (for tests: a warm cache compiles nothing). */
unsigned fprep__nvrtc_compile_count(void);

/* fprep__nvrtc_arch picks the architecture to compile for on a device of
 * compute capability cc: cc itself when NVRTC supports it, else the
 * highest supported one of the same major version below it (a CUBIN runs
 * on later minor versions). Returns 0 when none fits. */
int fprep__nvrtc_arch(int cc);

/* fprep__kernel_build returns the CUBIN of source (name, text), with its
 * headers as for fprep__nvrtc_compile, for cc:
 * from the cache when it holds a valid entry (unless force is set), else
 * compiled with NVRTC and stored. *hit tells which; *cubin is malloc'ed.
 * Logs "kernel cache hit ..." or "kernel cache miss ... compile N ms".
 * Returns 0, FPREP_ENVRTC, FPREP_ENOMEM. */
int fprep__kernel_build(fprep__kcache *c, const char *name, const char *text,
                        const fprep__kernel_source *headers, int cc, int force,
                        void **cubin, size_t *size, int *hit, char *msg,
                        size_t msg_size);

#endif /* FPREP_GPU_KERNEL_CACHE_H */
