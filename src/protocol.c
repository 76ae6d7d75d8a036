/* protocol.c: placeholder, replaced by its implementation. */
