/* server.c: placeholder, replaced by its implementation. */
