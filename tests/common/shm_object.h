/*
 * shm_object.h: the shared-memory objects the tests make to stand for a
 * client's region. Header-only.
 */
#ifndef FPREP_TESTS_SHM_OBJECT_H
#define FPREP_TESTS_SHM_OBJECT_H

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* shm_object_make creates a new shared-memory object named
 * "/fprep-test-TAG-PID" (written into name, name_size bytes; an object
 * left by an earlier run of that name is removed first) of size bytes.
 * Returns its descriptor, open for reading and writing, or -1 (errno
 * set). The caller closes it and shm_unlinks name. */
static inline int shm_object_make(char *name, size_t name_size, const char *tag,
                                  size_t size)
{
	int fd;

	snprintf(name, name_size, "/fprep-test-%s-%ld", tag, (long)getpid());
	shm_unlink(name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
		close(fd);
		shm_unlink(name);
		return -1;
	}
	return fd;
}

#endif /* FPREP_TESTS_SHM_OBJECT_H */
