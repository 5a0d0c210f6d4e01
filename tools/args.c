/* Helpers the sub-commands share (tools/cmd.h). */
#include <stdlib.h>
#include <time.h>

#include "cmd.h"

double lk_tool_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int lk_tool_parse_list(const char *s, long *v, int max, long lo, long hi)
{
    int n = 0;
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < lo || x > hi || n == max)
            return -1;
        v[n++] = x;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}
