/* Lockstep tests: lk_queue_create's options as docs/api.md ("Queues")
 * states them, on every device of the context.
 *
 *   native_stream on a host-memory device (no streams): LK_ERR_INVALID_ARGUMENT
 *   num_threads < 0 or > 1024: LK_ERR_INVALID_ARGUMENT
 *   num_threads 0, 1 or 1024 and NULL opts: a queue
 *
 * A refused queue leaves *q as it was.  A GPU device's native_stream needs
 * a real stream of that device (tests/test_cuda.c): a SKIP here. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

static lk_queue *const canary = (lk_queue *)&canary;

/* lk_queue_create with opts must fail with `want` and leave q alone */
static void refused(lk_device *dev, const lk_queue_opts *opts, lk_status want, const char *what)
{
    lk_queue *q = canary;
    lk_status st = lk_queue_create(dev, opts, &q);
    char msg[512]; /* before any other call clears it */
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    ok(st == want && q == canary && msg[0] != '\0', "%s: %s is %s (got %s: %s)%s",
       lk_device_name(dev), what, lk_status_string(want), lk_status_string(st), msg,
       q == canary ? "" : "; *q written");
    if (st == LK_OK && q != canary)
        lk_queue_destroy(q);
}

static void accepted(lk_device *dev, const lk_queue_opts *opts, const char *what)
{
    lk_queue *q = NULL;
    lk_status st = lk_queue_create(dev, opts, &q);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    ok(st == LK_OK && q != NULL, "%s: %s gives a queue (%s %s)", lk_device_name(dev), what,
       lk_status_string(st), msg);
    if (st == LK_OK)
        lk_queue_destroy(q);
}

int main(void)
{
    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    int devs = lk_device_count(ctx);
    for (int i = 0; i < devs; i++) {
        lk_device *dev;
        lk_device_props p;
        if (lk_device_get(ctx, i, &dev) != LK_OK || lk_device_props_get(dev, &p) != LK_OK)
            bail("device %d: %s", i, lk_last_error());
        diag("%s (%s)", p.name, p.host_memory ? "host memory" : "device memory");
        lk_queue_opts o;
        memset(&o, 0, sizeof o);
        o.native_stream = &o; /* not a stream: must never be used */
        if (p.host_memory) {
            refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "native_stream on a device without streams");
            o.num_threads = 2;
            refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "native_stream with num_threads = 2");
        } else if (p.kind == LK_DEVICE_GPU) {
            skip(2, "%s: native_stream needs a real stream (tests/test_cuda.c)", p.name);
        } else {
            refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "a native_stream not of this device");
            o.num_threads = 2;
            refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "a native_stream not of this device");
        }
        memset(&o, 0, sizeof o);
        o.num_threads = -1;
        refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "num_threads = -1");
        o.num_threads = 1025;
        refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "num_threads = 1025");
        o.num_threads = -2147483647 - 1;
        refused(dev, &o, LK_ERR_INVALID_ARGUMENT, "num_threads = INT_MIN");
        accepted(dev, NULL, "NULL opts");
        o.num_threads = 0;
        accepted(dev, &o, "num_threads = 0");
        o.num_threads = 1;
        accepted(dev, &o, "num_threads = 1");
        o.num_threads = 1024;
        accepted(dev, &o, "num_threads = 1024");
    }
    lk_context_destroy(ctx);
    return done_testing();
}
