/*
 * FPREP_EXTERN marks a declaration that libframeprep exports. The library
 * is built with hidden visibility, so a function of its sources that is not
 * declared with this macro in <frameprep/...> stays inside it.
 */
#ifndef FRAMEPREP_EXPORT_H
#define FRAMEPREP_EXPORT_H

#if defined(__GNUC__) && __GNUC__ >= 4
#define FPREP_EXTERN __attribute__((visibility("default")))
#else
#define FPREP_EXTERN
#endif

#endif /* FRAMEPREP_EXPORT_H */
