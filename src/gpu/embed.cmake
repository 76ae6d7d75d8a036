# embed.cmake: writes OUT, a C file holding each kernel source of SOURCES as
# a string, in the table fprep__kernel_sources[] (name, text), NULL-ended
# (declared in kernel_cache.h).
set(body "/* Generated from kernels by src/gpu/embed.cmake. */\n#include <stddef.h>\n#include \"gpu/kernel_cache.h\"\n")
set(table "")
set(i 0)
foreach(src IN LISTS SOURCES)
  file(READ ${src} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  get_filename_component(name ${src} NAME)
  string(APPEND body "static const char fprep_kernel_${i}[] = {${hex}0x00};\n")
  string(APPEND table "  {\"${name}\", fprep_kernel_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "const fprep__kernel_source fprep__kernel_sources[] = {\n${table}  {NULL, NULL}\n};\n")
file(WRITE ${OUT} "${body}")
