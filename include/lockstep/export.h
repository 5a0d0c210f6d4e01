/* Lockstep: symbol export.
 *
 * The library is built with -fvisibility=hidden; only declarations marked
 * LK_API are part of the ABI.  LK_BUILDING is defined by the build alone, so
 * users of the installed headers see plain declarations. */
#ifndef LOCKSTEP_EXPORT_H
#define LOCKSTEP_EXPORT_H

#if defined(LK_BUILDING) && defined(__GNUC__)
#define LK_API __attribute__((visibility("default")))
#else
#define LK_API
#endif

#ifdef __cplusplus
#define LK_BEGIN_DECLS extern "C" {
#define LK_END_DECLS }
#else
#define LK_BEGIN_DECLS
#define LK_END_DECLS
#endif

#endif
