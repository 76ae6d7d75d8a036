/* npy.c: placeholder, replaced by its implementation. */
