/* Lockstep benchmarks: finding and loading the ternary peers' libraries
 * (dlopen, at run time), and the entry points common to both. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/peers/ternary_peers.h"

/* What get-peers.sh installs, under the peers directory. */
#define TQ2_0_LIB "llama.cpp/lib/libggml-cpu.so"
#define I2_S_LIB "bitnet/lib/libbitnet-peer.so"
#define GGML_KNOWN "0.25.3"

typedef struct peer_lib {
    int tried, ok;
    lk_ggml_vec_dot_fn dot;
    char why[1600];
    char source[1400];
} peer_lib;

static peer_lib libs[3];

static const char *peers_dir(void)
{
    static char dir[1024];
    if (dir[0])
        return dir;
    const char *e = getenv("LOCKSTEP_PEERS_DIR"), *home = getenv("HOME");
    if (e && *e)
        snprintf(dir, sizeof dir, "%s", e);
    else
        snprintf(dir, sizeof dir, "%s/.cache/lockstep/peers", home && *home ? home : ".");
    return dir;
}

const char *lk_peer_t2_name(int kind)
{
    return kind == LK_PEER_TQ2_0 ? "llama.cpp TQ2_0" : "bitnet.cpp I2_S";
}

/* The peers are built for a fixed ISA (get-peers.sh): on x86, AVX2 with
 * FMA, F16C and BMI2; calling them on a CPU without it would stop the
 * process on an illegal instruction. */
static int cpu_runs_peers(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
#else
    return 1;
#endif
}

/* dlopen PATH, or say why not: a missing file points to get-peers.sh. */
static void *open_lib(int kind, const char *path, peer_lib *l)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(l->why, sizeof l->why, "%s: not found in %s; run scripts/get-peers.sh%s",
                 lk_peer_t2_name(kind), peers_dir(),
                 kind == LK_PEER_I2_S ? " --bitnet-src DIR (a bitnet.cpp checkout)" : "");
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        snprintf(l->why, sizeof l->why, "%s: cannot load %s: %s", lk_peer_t2_name(kind), path,
                 dlerror());
    return h;
}

/* Through ggml's public interface; the block layouts are ours
 * (ggml_abi.h), so they are checked against the library's first. */
static void load_tq2_0(peer_lib *l, const char *path)
{
    void *h = open_lib(LK_PEER_TQ2_0, path, l);
    if (h == NULL)
        return;
    lk_ggml_get_type_traits_cpu_fn traits;
    lk_ggml_type_size_fn type_size;
    lk_ggml_blck_size_fn blck_size;
    lk_ggml_version_fn version;
    lk_ggml_cpu_init_fn cpu_init;
    *(void **)&traits = dlsym(h, "ggml_get_type_traits_cpu");
    *(void **)&type_size = dlsym(h, "ggml_type_size");
    *(void **)&blck_size = dlsym(h, "ggml_blck_size");
    *(void **)&version = dlsym(h, "ggml_version");
    *(void **)&cpu_init = dlsym(h, "ggml_cpu_init");
    if (!traits || !type_size || !blck_size || !cpu_init) {
        snprintf(l->why, sizeof l->why,
                 "llama.cpp TQ2_0: %s lacks ggml's CPU interface (ggml_get_type_traits_cpu); "
                 "run scripts/get-peers.sh --force",
                 path);
        return;
    }
    const char *v = version ? version() : "before 0.9";
    if (type_size(LK_GGML_TYPE_TQ2_0) != sizeof(lk_ggml_block_tq2_0) ||
        blck_size(LK_GGML_TYPE_TQ2_0) != LK_GGML_QK_K ||
        type_size(LK_GGML_TYPE_Q8_K) != sizeof(lk_ggml_block_q8_K) ||
        blck_size(LK_GGML_TYPE_Q8_K) != LK_GGML_QK_K) {
        snprintf(l->why, sizeof l->why,
                 "llama.cpp TQ2_0: ggml %s in %s stores TQ2_0 or Q8_K otherwise than ggml "
                 GGML_KNOWN ", which this bench knows; run scripts/get-peers.sh --force",
                 v, path);
        return;
    }
    cpu_init();
    const lk_ggml_type_traits_cpu *t = traits(LK_GGML_TYPE_TQ2_0);
    if (t == NULL || t->vec_dot == NULL || t->vec_dot_type != LK_GGML_TYPE_Q8_K) {
        snprintf(l->why, sizeof l->why,
                 "llama.cpp TQ2_0: ggml %s in %s has no TQ2_0 x Q8_K dot product", v, path);
        return;
    }
    l->dot = t->vec_dot;
    snprintf(l->source, sizeof l->source, "llama.cpp TQ2_0 from ggml %s (%s)", v, path);
    l->ok = 1;
}

static void load_i2_s(peer_lib *l, const char *path)
{
    void *h = open_lib(LK_PEER_I2_S, path, l);
    if (h == NULL)
        return;
    *(void **)&l->dot = dlsym(h, "ggml_vec_dot_i2_i8_s");
    if (l->dot == NULL) {
        snprintf(l->why, sizeof l->why, "bitnet.cpp I2_S: %s exports no ggml_vec_dot_i2_i8_s",
                 path);
        return;
    }
    snprintf(l->source, sizeof l->source, "bitnet.cpp I2_S (%s)", path);
    l->ok = 1;
}

static peer_lib *load(int kind)
{
    if (kind != LK_PEER_TQ2_0 && kind != LK_PEER_I2_S)
        return NULL;
    peer_lib *l = &libs[kind];
    if (l->tried)
        return l;
    l->tried = 1;
    if (!cpu_runs_peers()) {
        snprintf(l->why, sizeof l->why,
                 "%s: get-peers.sh builds it for AVX2, FMA, F16C and BMI2, which this CPU lacks",
                 lk_peer_t2_name(kind));
        return l;
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", peers_dir(), kind == LK_PEER_TQ2_0 ? TQ2_0_LIB : I2_S_LIB);
    if (kind == LK_PEER_TQ2_0)
        load_tq2_0(l, path);
    else
        load_i2_s(l, path);
    return l;
}

int lk_peer_t2_available(int kind, const char **why)
{
    peer_lib *l = load(kind);
    if (l && l->ok)
        return 1;
    if (why)
        *why = l ? l->why : "no such peer";
    return 0;
}

const char *lk_peer_t2_source(int kind)
{
    peer_lib *l = load(kind);
    return l && l->ok ? l->source : NULL;
}

lk_peer_t2 *lk_peer_t2_create(int kind, const uint8_t *w, int64_t n, int64_t k)
{
    if (n <= 0 || k <= 0 || k % 256 != 0 || k > (1 << 20) || n * k > INT32_MAX ||
        !lk_peer_t2_available(kind, NULL))
        return NULL;
    lk_peer_t2 *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->kind = kind;
    p->n = n;
    p->k = k;
    p->dot = libs[kind].dot;
    int st = kind == LK_PEER_TQ2_0 ? lk_peer_tq2_0_create(p, w) : lk_peer_i2_s_create(p, w);
    if (st != 0) {
        lk_peer_t2_destroy(p);
        return NULL;
    }
    return p;
}

void lk_peer_t2_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                    int threads)
{
    if (p->kind == LK_PEER_TQ2_0)
        lk_peer_tq2_0_run(p, x, x_scale, w_scale, y, threads);
    else
        lk_peer_i2_s_run(p, x, x_scale, w_scale, y, threads);
}

void lk_peer_t2_destroy(lk_peer_t2 *p)
{
    if (p == NULL)
        return;
    free(p->w);
    free(p->act);
    free(p);
}
