/* error.c: placeholder, replaced by its implementation. */
