/* kernel_cache.c: placeholder, replaced by its implementation. */
