# doxygen-filter.sed: the public headers' comments as Doxygen reads them
# (Doxyfile.in says why). Formatter directives are not documentation.
/clang-format/b
0,/^\/\*$/s|^/\*$|/** @file|
s|^\([ \t]*\)/\* \([A-Za-z_(][A-Za-z0-9_]*\)|\1/** \2|
s|\([;,]\)\([ \t]*\)/\* |\1\2/**< |
s|^\(#define[ \t].*[^ \t]\)\([ \t]\+\)/\* |\1\2/**< |
