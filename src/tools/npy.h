/*
 * npy.h: writer of NumPy .npy files (format 1.0) for frameprep's tools.
 *
 * A tensor is written as one C-order array with a little-endian descr
 * ("<f4", "<f2", "|u1", ...: fprep_dtype_typestr), so `numpy.load` reads
 * it back as is. Shared
 * by the frameprep CLI and frameprep-bench; it depends on nothing but libc.
 */
#ifndef FPREP_TOOLS_NPY_H
#define FPREP_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

/* fprep_npy_write writes size bytes of data as an array of the given numpy
 * descr (at most 16 characters) and shape (ndim entries, 0 < ndim <= 8,
 * C order) to path, replacing the file. size must equal the product of the
 * shape times the element size that descr names; this is not checked.
 * Returns 0, or -1 with errno set (EINVAL for a bad descr or ndim). */
int fprep_npy_write(const char *path, const char *descr, const uint32_t *shape,
                    int ndim, const void *data, size_t size);

#endif /* FPREP_TOOLS_NPY_H */
