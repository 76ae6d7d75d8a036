/*
 * host_copy.h: memcpy of large buffers spread over a few threads.
 *
 * One thread copies about 11 GB/s, so a 1080p frame costs ~560 us and a
 * 640x640x3 float32 tensor ~450 us: on the inline path these host copies,
 * not PCIe, bound a GPU lane. Splitting each copy over a few threads lets
 * them run at the memory system's speed.
 */
#ifndef FPREP_GPU_HOST_COPY_H
#define FPREP_GPU_HOST_COPY_H

#include <stddef.h>

/* fprep__copy_pool: worker threads that take chunks of copies. */
typedef struct fprep__copy_pool fprep__copy_pool;

/* fprep__copy_pool_open starts nthreads workers (0: a pool that copies on
 * the calling thread only). Returns 0 or FPREP_ENOMEM. */
int fprep__copy_pool_open(fprep__copy_pool **pp, unsigned nthreads);

/* fprep__copy_pool_close joins the workers and frees the pool (NULL is
 * ignored). No copy may be in progress. */
void fprep__copy_pool_close(fprep__copy_pool *p);

/* fprep__copy copies n bytes from src to dst (not overlapping), in chunks
 * shared between the caller and the pool's workers when n is large; returns
 * when every byte is copied. Several threads may call it at once. */
void fprep__copy(fprep__copy_pool *p, void *dst, const void *src, size_t n);

/* fprep__copy_rows copies rows rows of width bytes each, the rows pitch
 * bytes apart in both src and dst (pitch >= width), cut between rows into
 * chunks as fprep__copy cuts bytes. Same threads and return as
 * fprep__copy. */
void fprep__copy_rows(fprep__copy_pool *p, void *dst, const void *src,
                      size_t width, size_t pitch, size_t rows);

#endif /* FPREP_GPU_HOST_COPY_H */
