/* Lockstep core: driver modules.
 *
 * Every *.so in each absolute directory of LOCKSTEP_DRIVER_PATH, then in
 * the compiled-in LK_DRIVER_DIR ($(pkglibdir)/drivers), is opened with
 * dlopen(RTLD_NOW | RTLD_LOCAL) and asked for its lockstep_driver_entry.
 * The environment comes first so that a build tree's modules can stand in
 * for installed ones (the first driver of a name wins).  The current
 * directory is never searched: empty and relative entries of the path are
 * ignored, as a dynamic loader does for a privileged program. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#ifndef LK_DRIVER_DIR
#define LK_DRIVER_DIR "/usr/local/lib/lockstep/drivers"
#endif

typedef struct lk_dirset {
    char **v;
    int n;
} lk_dirset;

/* Directories already searched (by their real path), so that a directory
 * named twice is not loaded twice. */
static int lk_dirset_seen(lk_dirset *ds, const char *dir)
{
    char *real = realpath(dir, NULL);
    if (!real)
        return 1; /* missing: nothing to load, nothing to say */
    for (int i = 0; i < ds->n; i++) {
        if (strcmp(ds->v[i], real) == 0) {
            free(real);
            return 1;
        }
    }
    char **t = realloc(ds->v, (size_t)(ds->n + 1) * sizeof *t);
    if (!t) {
        free(real);
        return 1;
    }
    ds->v = t;
    ds->v[ds->n++] = real;
    return 0;
}

static int lk_cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int lk_is_module_name(const char *n)
{
    size_t len = strlen(n);
    return n[0] != '.' && len > 3 && strcmp(n + len - 3, ".so") == 0;
}

static lk_status lk_load_one(lk_context *ctx, const char *path)
{
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        return lk_registry_refuse(ctx, path, NULL, LK_ERR_DRIVER, "dlopen failed: %s",
                                  e ? e : "unknown error");
    }
    void *sym = dlsym(dl, LK_DRIVER_ENTRY_SYMBOL);
    if (!sym) {
        dlclose(dl);
        return lk_registry_refuse(ctx, path, NULL, LK_ERR_DRIVER,
                                  "no %s symbol: not a Lockstep driver module",
                                  LK_DRIVER_ENTRY_SYMBOL);
    }
    lk_driver_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object to function pointer, as POSIX allows */
    return lk_registry_add(ctx, entry(), dl, path);
}

static lk_status lk_load_dir(lk_context *ctx, lk_dirset *seen, const char *dir)
{
    if (lk_dirset_seen(seen, dir))
        return LK_OK;
    DIR *d = opendir(dir);
    if (!d) {
        lk_debug("driver directory %s: %s", dir, strerror(errno));
        return LK_OK;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    lk_status st = LK_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!lk_is_module_name(e->d_name))
            continue;
        if (n == cap) {
            size_t c = cap ? 2 * cap : 16;
            char **t = realloc(names, c * sizeof *t);
            if (!t) {
                st = LK_ERR_OUT_OF_MEMORY;
                break;
            }
            names = t;
            cap = c;
        }
        if (!(names[n] = strdup(e->d_name))) {
            st = LK_ERR_OUT_OF_MEMORY;
            break;
        }
        n++;
    }
    closedir(d);
    /* a fixed order, so "first one wins" means the same thing every run */
    if (n)
        qsort(names, n, sizeof *names, lk_cmp_names);
    for (size_t i = 0; i < n && st == LK_OK; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(len);
        if (!path) {
            st = LK_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        lk_debug("trying driver module %s", path);
        st = lk_load_one(ctx, path);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return st;
}

lk_status lk_loader_modules(lk_context *ctx)
{
    lk_dirset seen = {NULL, 0};
    lk_status st = LK_OK;
    const char *env = getenv("LOCKSTEP_DRIVER_PATH");
    char *copy = env ? strdup(env) : NULL;
    if (env && !copy)
        return LK_ERR_OUT_OF_MEMORY;
    for (char *p = copy; p && st == LK_OK;) {
        char *colon = strchr(p, ':');
        if (colon)
            *colon = '\0';
        if (p[0] == '/')
            st = lk_load_dir(ctx, &seen, p);
        else if (p[0])
            st = lk_registry_refuse(ctx, p, NULL, LK_ERR_INVALID_ARGUMENT,
                                    "LOCKSTEP_DRIVER_PATH entry \"%s\" ignored: only "
                                    "absolute directories are searched",
                                    p);
        p = colon ? colon + 1 : NULL;
    }
    free(copy);
    if (st == LK_OK)
        st = lk_load_dir(ctx, &seen, LK_DRIVER_DIR);
    for (int i = 0; i < seen.n; i++)
        free(seen.v[i]);
    free(seen.v);
    return st;
}
