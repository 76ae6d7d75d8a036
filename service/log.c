/* log.c: placeholder, replaced by its implementation. */
