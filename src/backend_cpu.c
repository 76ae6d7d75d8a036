/* backend_cpu.c: placeholder, replaced by its implementation. */
