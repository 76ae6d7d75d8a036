/*
 * npy.c: writes NumPy .npy files, format version 1.0.
 *
 * The file is the magic "\x93NUMPY", the version bytes 1 0, a little-endian
 * u16 header length, and a Python dict literal padded with spaces and
 * ended by a newline so that the data starts on a 64-byte boundary; the
 * array bytes follow, in C order.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <frameprep/protocol.h>

#include "npy.h"

int fprep_npy_write(const char *path, const char *descr, const uint32_t *shape,
                    int ndim, const void *data, size_t size)
{
	char hdr[256];
	size_t n, total;
	FILE *f;
	int saved, ret = -1;

	if (ndim <= 0 || ndim > 8 || strlen(descr) > 16) {
		errno = EINVAL;
		return -1;
	}
	/* Magic (6), version (2) and length (2) come first. */
	n = 10;
	n += (size_t)snprintf(hdr + n, sizeof(hdr) - n,
	                      "{'descr': '%s', 'fortran_order': False, "
	                      "'shape': (",
	                      descr);
	/* Python tuples: "(5,)" and "(1, 3, 2, 2)". */
	for (int i = 0; i < ndim; i++)
		n += (size_t)snprintf(hdr + n, sizeof(hdr) - n, "%u%s",
		                      shape[i],
		                      ndim == 1      ? ","
		                      : i + 1 < ndim ? ", "
		                                     : "");
	n += (size_t)snprintf(hdr + n, sizeof(hdr) - n, "), }");
	total = (n + 1 + 63) / 64 * 64;
	memset(hdr + n, ' ', total - 1 - n);
	hdr[total - 1] = '\n';
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (char)((total - 10) & 0xff);
	hdr[9] = (char)((total - 10) >> 8);

	f = fopen(path, "wb");
	if (f == NULL)
		return -1;
	if (fwrite(hdr, 1, total, f) != total ||
	    (size > 0 && fwrite(data, 1, size, f) != size))
		goto out;
	ret = 0;
out:
	saved = errno;
	if (fclose(f) != 0 && ret == 0) {
		saved = errno;
		ret = -1;
	}
	errno = saved;
	return ret;
}
