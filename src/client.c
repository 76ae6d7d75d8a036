/* client.c: placeholder, replaced by its implementation. */
