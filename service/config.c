/* config.c: placeholder, replaced by its implementation. */
