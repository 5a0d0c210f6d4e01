/* Lockstep core: the version of the library actually loaded. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <lockstep/version.h>

LK_API const char *lk_version_string(void)
{
    return LK_VERSION_STRING;
}

LK_API void lk_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = LK_VERSION_MAJOR;
    if (minor)
        *minor = LK_VERSION_MINOR;
    if (patch)
        *patch = LK_VERSION_PATCH;
}

LK_API int lk_contract_version(void)
{
    return LK_CONTRACT_VERSION;
}
