/* Lockstep tests: a fuzz target's saved inputs replayed without libFuzzer,
 * so that `make check` (and its sanitizer build in CI) runs every input
 * that once crashed a target.  Linked with one tests/fuzz/fuzz_*.c; TAP.
 *
 *   replay_X [FILE...]    the files given, or else every file named
 *                         X-* in $srcdir/tests/fuzz/regressions
 * A few built-in inputs (empty, one byte, zeros) run first. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tests/tap.h"

/* a target without set-up leaves it undefined */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#ifndef REPLAY_TARGET
#error "REPLAY_TARGET (the target's name) must be defined"
#endif

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ok(0, "%s: cannot open", path);
        return;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b)
                free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (!buf)
        bail("out of memory");
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    ok(1, "%s (%zu bytes) runs clean", path, n);
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    static const uint8_t zeros[512];
    static const uint8_t one[1] = {1};
    LLVMFuzzerTestOneInput(zeros, 0);
    LLVMFuzzerTestOneInput(one, 1);
    LLVMFuzzerTestOneInput(zeros, sizeof zeros);
    ok(1, "%s: built-in inputs run clean", REPLAY_TARGET);
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            run_file(argv[i]);
        return done_testing();
    }
    const char *srcdir = getenv("srcdir");
    char dir[4096], path[8192], prefix[64];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regressions", srcdir && *srcdir ? srcdir : ".");
    snprintf(prefix, sizeof prefix, "%s-", REPLAY_TARGET);
    DIR *d = opendir(dir);
    if (!d) {
        skip(1, "no directory %s", dir);
        return done_testing();
    }
    /* sorted, so the numbering is stable */
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            char **nb = realloc(names, (nn + 1) * sizeof *names);
            if (!nb || !(nb[nn] = strdup(e->d_name)))
                bail("out of memory");
            names = nb;
            nn++;
        }
    closedir(d);
    for (size_t i = 0; i < nn; i++)
        for (size_t j = i + 1; j < nn; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    for (size_t i = 0; i < nn; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        run_file(path);
        free(names[i]);
    }
    free(names);
    if (nn == 0)
        diag("no saved inputs %s* in %s", prefix, dir);
    return done_testing();
}
