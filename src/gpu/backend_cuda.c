/* backend_cuda.c: placeholder, replaced by its implementation. */
