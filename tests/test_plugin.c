/* Lockstep: driver modules.
 *
 * With LOCKSTEP_DRIVER_PATH pointing at the test-only modules (make check
 * sets it to tests/drivers/.libs):
 * - lockstep-testdrv.so loads and "test:0" appears;
 * - lockstep-badabi.so (built for the next driver ABI) is refused with a
 *   message naming both ABI numbers;
 * - lockstep-testdup.so (a second driver named "test") is skipped: the
 *   first driver of a name wins;
 * - a missing directory in the path is harmless, a directory named twice
 *   is searched once, relative and empty entries are ignored;
 * - the current directory is never searched, even when it holds modules;
 * - a driver whose init says LK_ERR_NO_DEVICE is listed with its reason;
 * - test:0, which runs the reference kernels on uneven row bands last band
 *   first, gives the bits of "ref" for every op: each op's rows are
 *   computed independently of each other. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockstep.h>
#include <lockstep/driver.h>

#include "tests/tap.h"

static char module_dir[PATH_MAX];

/* ------------------------------------------------------------ helpers */

static int has_device(lk_context *ctx, const char *name)
{
    lk_device *d;
    return lk_device_find(ctx, name, &d) == LK_OK;
}

/* The driver-list entry whose path ends in `file`, or whose name is
 * `name` when file is NULL; -1 if none.  *count gets how many match. */
static int find_driver(lk_context *ctx, const char *file, const char *name, lk_driver_info *out,
                       int *count)
{
    int found = -1, n = 0;
    for (int i = 0; i < lk_context_driver_count(ctx); i++) {
        lk_driver_info info;
        if (lk_context_driver_info(ctx, i, &info) != LK_OK)
            continue;
        int match;
        if (file) {
            size_t lp = strlen(info.path), lf = strlen(file);
            match = lp >= lf && strcmp(info.path + lp - lf, file) == 0;
        } else {
            match = strcmp(info.name, name) == 0;
        }
        if (match) {
            if (found < 0) {
                found = i;
                if (out)
                    *out = info;
            }
            n++;
        }
    }
    if (count)
        *count = n;
    return found;
}

static void list_drivers(lk_context *ctx)
{
    for (int i = 0; i < lk_context_driver_count(ctx); i++) {
        lk_driver_info info;
        if (lk_context_driver_info(ctx, i, &info) == LK_OK)
            diag("  driver %d: %s %s %s (%d devices) %s", i, info.name[0] ? info.name : "-",
                 info.builtin ? "(built in)" : info.path, lk_status_string(info.status),
                 info.device_count, info.message);
    }
}

static lk_context *context_with_path(const char *path)
{
    if (path)
        setenv("LOCKSTEP_DRIVER_PATH", path, 1);
    else
        unsetenv("LOCKSTEP_DRIVER_PATH");
    lk_context *ctx = NULL;
    if (lk_context_create(&ctx) != LK_OK)
        bail("lk_context_create: %s", lk_last_error());
    return ctx;
}

/* ------------------------------------------------------------ loading */

static void test_loading(void)
{
    lk_context *ctx = context_with_path(module_dir);
    lk_driver_info info;
    int n;

    ok(has_device(ctx, "test:0"), "test:0 appears with LOCKSTEP_DRIVER_PATH=%s", module_dir);
    int i = find_driver(ctx, "/lockstep-testdrv.so", NULL, &info, &n);
    ok(i >= 0 && n == 1 && info.status == LK_OK && strcmp(info.name, "test") == 0 &&
           !info.builtin && info.device_count == 1,
       "lockstep-testdrv.so is listed as loaded, driver \"test\", 1 device");

    char want_mod[32], want_lib[32];
    snprintf(want_mod, sizeof want_mod, "driver ABI %u", LK_DRIVER_ABI_VERSION + 1);
    snprintf(want_lib, sizeof want_lib, "speaks ABI %u", LK_DRIVER_ABI_VERSION);
    i = find_driver(ctx, "/lockstep-badabi.so", NULL, &info, &n);
    ok(i >= 0 && n == 1 && info.status == LK_ERR_ABI_MISMATCH && info.device_count == 0 &&
           strstr(info.message, want_mod) && strstr(info.message, want_lib) &&
           strstr(info.message, "lockstep-badabi.so"),
       "lockstep-badabi.so is refused: \"%s\"", i >= 0 ? info.message : "(not listed)");
    ok(!has_device(ctx, "badabi") && find_driver(ctx, NULL, "badabi", NULL, NULL) < 0,
       "nothing of the bad module was used (not even its name)");

    i = find_driver(ctx, "/lockstep-testdup.so", NULL, &info, &n);
    ok(i >= 0 && info.status == LK_ERR_INVALID_ARGUMENT && info.device_count == 0 &&
           strstr(info.message, "first one wins") && strstr(info.message, "lockstep-testdrv.so"),
       "a second driver named \"test\" is skipped: \"%s\"", i >= 0 ? info.message : "(not listed)");

    lk_driver_info ref;
    ok(lk_context_driver_info(ctx, 0, &ref) == LK_OK && strcmp(ref.name, "ref") == 0 &&
           ref.builtin && ref.path[0] == '\0',
       "built-in drivers come first");
    list_drivers(ctx);
    lk_context_destroy(ctx);

    /* the same module directory from a second context at the same time */
    lk_context *a = context_with_path(module_dir), *b = context_with_path(module_dir);
    ok(has_device(a, "test:0") && has_device(b, "test:0"), "two contexts load the module together");
    lk_context_destroy(a);
    ok(has_device(b, "test:0"), "destroying one leaves the other's test:0");
    lk_context_destroy(b);
}

static void test_search_path(void)
{
    char path[3 * PATH_MAX + 64];

    snprintf(path, sizeof path, "/nonexistent/lockstep-drivers:%s", module_dir);
    lk_context *ctx = context_with_path(path);
    ok(has_device(ctx, "test:0"), "a missing directory before the modules is harmless");
    lk_context_destroy(ctx);

    snprintf(path, sizeof path, "%s:/nonexistent/x:", module_dir);
    ctx = context_with_path(path);
    ok(has_device(ctx, "test:0"), "a missing directory and an empty entry after them too");
    lk_context_destroy(ctx);

    snprintf(path, sizeof path, "%s:%s/.:%s", module_dir, module_dir, module_dir);
    ctx = context_with_path(path);
    int n;
    find_driver(ctx, "/lockstep-testdrv.so", NULL, NULL, &n);
    ok(n == 1 && has_device(ctx, "test:0"), "a directory named three times is searched once");
    lk_context_destroy(ctx);

    ctx = context_with_path("relative/drivers:.");
    lk_driver_info info;
    int i = find_driver(ctx, "relative/drivers", NULL, &info, NULL);
    ok(!has_device(ctx, "test:0") && i >= 0 && info.status == LK_ERR_INVALID_ARGUMENT &&
           strstr(info.message, "absolute"),
       "relative entries are ignored and listed as such");
    lk_context_destroy(ctx);

    ctx = context_with_path("");
    ok(!has_device(ctx, "test:0"), "an empty LOCKSTEP_DRIVER_PATH loads no module");
    lk_context_destroy(ctx);
}

/* Run from inside the module directory with no path: nothing from it. */
static void test_no_current_directory(void)
{
    char here[PATH_MAX];
    if (!getcwd(here, sizeof here) || chdir(module_dir) != 0) {
        skip(3, "cannot change into %s", module_dir);
        return;
    }
    lk_context *ctx = context_with_path(NULL);
    ok(!has_device(ctx, "test:0"), "CWD = the module directory, no LOCKSTEP_DRIVER_PATH: no test:0");
    ok(find_driver(ctx, "/lockstep-testdrv.so", NULL, NULL, NULL) < 0 &&
           find_driver(ctx, "/lockstep-badabi.so", NULL, NULL, NULL) < 0,
       "and no module of the current directory was even tried");
    lk_context_destroy(ctx);
    ctx = context_with_path(".");
    ok(!has_device(ctx, "test:0"), "LOCKSTEP_DRIVER_PATH=. does not search it either");
    lk_context_destroy(ctx);
    if (chdir(here) != 0)
        bail("cannot change back to %s", here);
}

static void test_no_device(void)
{
    setenv("LOCKSTEP_TESTDRV_NODEVICE", "1", 1);
    lk_context *ctx = context_with_path(module_dir);
    int quiet = lk_last_error()[0] == '\0';
    lk_driver_info info;
    int i = find_driver(ctx, "/lockstep-testdrv.so", NULL, &info, NULL);
    ok(!has_device(ctx, "test:0") && i >= 0 && info.status == LK_ERR_NO_DEVICE &&
           info.device_count == 0 && strstr(info.message, "LOCKSTEP_TESTDRV_NODEVICE"),
       "a driver whose init says LK_ERR_NO_DEVICE is listed with its reason: \"%s\"",
       i >= 0 ? info.message : "(not listed)");
    ok(quiet, "and the context was created without an error message");
    lk_context_destroy(ctx);
    unsetenv("LOCKSTEP_TESTDRV_NODEVICE");
}

/* ------------------------------------------------------------ test:0 == ref */

static uint64_t rng;
static lk_queue *qref, *qtest;

#define BIG (1 << 20)
static float fin[BIG / 4];      /* random floats */
static uint16_t hin[BIG / 2];   /* random bf16/f16 bits */
static int8_t iin[BIG];         /* random int8 */
static int8_t tin[BIG];         /* random values in {-1, 0, 1} */
static uint8_t pin[BIG];        /* random t2 bytes, reserved code included */
static float sin_[4096];        /* positive scales */
static unsigned char out_ref[BIG], out_test[BIG];

static float rnd_float(void)
{
    uint64_t r = tap_rand(&rng);
    switch (r % 64) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return 1e-40f; /* subnormal */
    case 3: return (r & 64) ? 3e38f : -3e38f;
    default: break;
    }
    return (float)((int64_t)(r >> 40) - (INT64_C(1) << 23)) / (float)(1 << 21);
}

static void fill_inputs(void)
{
    for (size_t i = 0; i < sizeof fin / sizeof fin[0]; i++)
        fin[i] = rnd_float();
    for (size_t i = 0; i < sizeof hin / sizeof hin[0]; i++)
        hin[i] = lk_f32_to_bf16(rnd_float());
    for (size_t i = 0; i < sizeof iin; i++) {
        uint64_t r = tap_rand(&rng);
        iin[i] = (int8_t)(uint8_t)r;
        tin[i] = (int8_t)((r >> 8) % 3) - 1;
        pin[i] = (uint8_t)(r >> 16);
    }
    for (size_t i = 0; i < sizeof sin_ / sizeof sin_[0]; i++)
        sin_[i] = 0.01f + (float)(tap_rand(&rng) % 1000) / 64.0f;
}

typedef lk_status (*op_fn)(lk_queue *q, unsigned char *out, int variant);

/* Run on ref and on test:0 into outputs prefilled alike; compare every byte. */
static void same_bits(const char *what, op_fn fn, int variant)
{
    memset(out_ref, 0xEE, sizeof out_ref);
    memset(out_test, 0xEE, sizeof out_test);
    lk_status sr = fn(qref, out_ref, variant);
    char mr[512];
    snprintf(mr, sizeof mr, "%s", lk_last_error());
    lk_status st = fn(qtest, out_test, variant);
    if (sr == LK_ERR_UNSUPPORTED && strstr(mr, "not written yet")) {
        skip(1, "%s: %s", what, mr);
        return;
    }
    int good = sr == LK_OK && st == LK_OK && memcmp(out_ref, out_test, sizeof out_ref) == 0;
    ok(good, "test:0 == ref, bit for bit: %s", what);
    if (!good) {
        diag("ref: %s %s; test:0: %s %s", lk_status_string(sr), mr, lk_status_string(st),
             lk_last_error());
        for (size_t i = 0; i < sizeof out_ref; i++)
            if (out_ref[i] != out_test[i]) {
                diag("first difference at byte %zu: 0x%02x vs 0x%02x", i, out_ref[i], out_test[i]);
                break;
            }
    }
}

enum { M = 77, N = 19, K = 150 };

static lk_status op_gemm(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor a = lk_mat(fin, LK_F32, M, K), b = lk_mat(hin, LK_BF16, K, N);
    lk_tensor bias = lk_mat(fin + 60000, LK_F16, 1, N), c = lk_mat_ld(out, LK_F32, M, N, N + 5);
    switch (v) {
    case 0:
        return lk_gemm(q, LK_NO_TRANS, LK_NO_TRANS, &a, &b, NULL, &c, 1, 0);
    case 1: /* transposed a with a leading dimension, transposed b, bias */
        a = lk_mat_ld(fin, LK_F32, K, M, M + 3);
        b = lk_mat(hin, LK_BF16, N, K);
        return lk_gemm(q, LK_TRANS, LK_TRANS, &a, &b, &bias, &c, 1, 0);
    case 2: /* batch of 3, shared b, accumulate into the prefilled c */
        for (int i = 0; i < 3 * M * (N + 5); i++)
            ((float *)out)[i] = fin[100000 + i];
        a.batch_stride = M * K + 7;
        c.batch_stride = M * (N + 5);
        return lk_gemm(q, LK_NO_TRANS, LK_NO_TRANS, &a, &b, &bias, &c, 3, LK_GEMM_ACCUMULATE);
    default: /* bf16 output, f16 a */
        a = lk_mat(hin, LK_F16, M, K);
        c.dtype = LK_BF16;
        return lk_gemm(q, LK_NO_TRANS, LK_NO_TRANS, &a, &b, NULL, &c, 1, 0);
    }
}

static lk_status op_reduce(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor x = lk_mat_ld(fin, LK_F32, M, 70, 73);
    lk_tensor y = lk_mat_ld(out, v == LK_REDUCE_ARGMAX ? LK_I64 : LK_F32, M, 1, 2);
    return lk_reduce(q, (lk_reduce_op)v, &x, &y);
}

static lk_status op_norm(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor x = lk_mat(hin, LK_BF16, M, 40), w = lk_mat(fin, LK_F32, 1, 40);
    lk_tensor b = lk_mat(hin + 9000, LK_F16, 1, 40), y = lk_mat(out, LK_F32, M, 40);
    switch (v) {
    case 0: return lk_rmsnorm(q, &x, &w, 1e-6f, &y);
    case 1: return lk_layernorm(q, &x, &w, &b, 1e-5f, &y);
    case 2: return lk_softmax(q, &x, &y);
    default: return lk_log_softmax(q, &x, &y);
    }
}

static lk_status op_unary(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor x = lk_mat(fin, LK_F32, M, 21), y = lk_mat(out, LK_BF16, M, 21);
    return lk_unary(q, (lk_unary_op)v, &x, &y);
}

static lk_status op_binary(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor a = lk_mat(fin, LK_F32, M, 21), y = lk_mat(out, LK_F32, M, 21);
    lk_tensor b = v ? lk_mat(hin, LK_BF16, 1, 21) : lk_mat(fin + 5000, LK_F32, M, 21);
    return lk_binary(q, v ? LK_BINARY_MUL : LK_BINARY_ADD, &a, &b, &y);
}

static lk_status op_quant(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor x = lk_mat(fin, LK_F32, M, 50);
    if (v == 0) {
        lk_tensor xq = lk_mat(out, LK_I8, M, 50), s = lk_mat(out + 8192, LK_F32, M, 1);
        return lk_quantize_act(q, &x, &xq, &s);
    }
    lk_tensor wq = lk_mat_ld(out, LK_T2, M, 50, 52), s = lk_mat(out + 8192, LK_F32, 1, 1);
    return lk_quantize_ternary(q, &x, &wq, &s);
}

static lk_status op_pack(lk_queue *q, unsigned char *out, int v)
{
    if (v == 0) {
        lk_tensor w = lk_mat_ld(tin, LK_I8, M, 50, 51), wq = lk_mat_ld(out, LK_T2, M, 50, 56);
        return lk_ternary_pack(q, &w, &wq);
    }
    lk_tensor wq = lk_mat_ld(pin, LK_T2, M, 50, 52), w = lk_mat(out, LK_I8, M, 50);
    return lk_ternary_unpack(q, &wq, &w);
}

static lk_status op_qgemm(lk_queue *q, unsigned char *out, int v)
{
    lk_tensor x = lk_mat(iin, LK_I8, M, 130), xs = lk_mat(sin_, LK_F32, M, 1);
    lk_tensor ws = lk_mat(sin_ + 1000, LK_F32, 1, v == 1 ? 1 : N);
    switch (v) {
    case 0:
    case 1: {
        lk_tensor w = lk_mat_ld(pin, LK_T2, N, 130, 132), y = lk_mat(out, LK_F32, M, N);
        return lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
    }
    case 2: {
        lk_tensor w = lk_mat(iin + 50000, LK_I8, N, 130), y = lk_mat(out, LK_I32, M, N);
        return lk_int8_gemm(q, &x, &w, NULL, NULL, &y);
    }
    default: {
        lk_tensor w = lk_mat(iin + 50000, LK_I8, N, 130), y = lk_mat(out, LK_F16, M, N);
        return lk_int8_gemm(q, &x, &w, &xs, &ws, &y);
    }
    }
}

static void test_same_as_ref(void)
{
    lk_context *ctx = context_with_path(module_dir);
    lk_device *dref, *dtest;
    if (lk_device_find(ctx, "ref", &dref) != LK_OK || lk_device_find(ctx, "test:0", &dtest) != LK_OK ||
        lk_queue_create(dref, NULL, &qref) != LK_OK || lk_queue_create(dtest, NULL, &qtest) != LK_OK)
        bail("ref or test:0 unusable: %s", lk_last_error());
    rng = tap_seed();
    fill_inputs();

    static const char *const gemm_what[] = {"gemm f32 x bf16", "gemm a^T (ld) x b^T + f16 bias",
                                            "gemm batch 3, accumulate", "gemm f16 x bf16 -> bf16"};
    for (int v = 0; v < 4; v++)
        same_bits(gemm_what[v], op_gemm, v);
    for (int op = LK_REDUCE_SUM; op <= LK_REDUCE_ARGMAX; op++) {
        char what[32];
        snprintf(what, sizeof what, "reduce op %d", op);
        same_bits(what, op_reduce, op);
    }
    static const char *const norm_what[] = {"rmsnorm", "layernorm", "softmax", "log_softmax"};
    for (int v = 0; v < 4; v++)
        same_bits(norm_what[v], op_norm, v);
    for (int op = LK_UNARY_COPY; op <= LK_UNARY_ERF; op++) {
        char what[32];
        snprintf(what, sizeof what, "unary op %d", op);
        same_bits(what, op_unary, op);
    }
    same_bits("binary add", op_binary, 0);
    same_bits("binary mul, broadcast bf16 b", op_binary, 1);
    same_bits("quantize_act", op_quant, 0);
    same_bits("quantize_ternary", op_quant, 1);
    same_bits("ternary_pack", op_pack, 0);
    same_bits("ternary_unpack (reserved code included)", op_pack, 1);
    same_bits("ternary_gemm, per-channel w_scale", op_qgemm, 0);
    same_bits("ternary_gemm, one w_scale", op_qgemm, 1);
    same_bits("int8_gemm -> i32", op_qgemm, 2);
    same_bits("int8_gemm scaled -> f16", op_qgemm, 3);

    lk_queue_destroy(qref);
    lk_queue_destroy(qtest);
    lk_context_destroy(ctx);
}

int main(void)
{
    const char *env = getenv("LOCKSTEP_DRIVER_PATH");
    if (!env || !*env)
        skip_all("LOCKSTEP_DRIVER_PATH is not set: run through make check");
    size_t len = strcspn(env, ":");
    if (len == 0 || len >= sizeof module_dir || env[0] != '/')
        skip_all("the first entry of LOCKSTEP_DRIVER_PATH is not an absolute directory");
    memcpy(module_dir, env, len);
    module_dir[len] = '\0';
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/lockstep-testdrv.so", module_dir);
    if (access(probe, R_OK) != 0)
        skip_all("no %s (build the check programs first)", probe);
    unsetenv("LOCKSTEP_TESTDRV_NODEVICE");
    unsetenv("LOCKSTEP_TESTDRV_DEVMEM");
    unsetenv("LOCKSTEP_TESTDRV_DISABLE");
    unsetenv("LOCKSTEP_TESTDRV_REFUSE");
    unsetenv("LOCKSTEP_TESTDRV_FAIL");

    test_loading();
    test_search_path();
    test_no_current_directory();
    test_no_device();
    test_same_as_ref();
    return done_testing();
}
