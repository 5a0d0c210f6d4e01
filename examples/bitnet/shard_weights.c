/* BitNet example: the built-in weights of one rank's shard (shard.h,
 * bn_shard_weights).
 *
 * bn_weights_generate (model.c) draws every value from one splitmix64
 * stream in a fixed order.  Splitmix64 is a counter: draw k after state s
 * is mix(s + (k + 1) * golden), so any row's draws can be made without
 * those before it.  Here only the rows a rank's shard reads are drawn, on
 * several threads; the other rows' memory is allocated zeroed and never
 * touched (large callocs are mapped lazily), so a rank of a 70B-class
 * model holds and draws its share, not the whole model.  The drawn rows
 * are bn_weights_generate's bits: the sharded demo's digests, checked
 * against the one-device model built from bn_weights_generate, say so. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shard.h"

static const uint64_t golden = 0x9e3779b97f4a7c15ull;

/* draw k (0-based) after state s */
static uint64_t draw(uint64_t s, uint64_t k)
{
    uint64_t z = s + (k + 1) * golden;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct job {
    lkg_ternary *t;
    uint64_t s0;              /* the state before the tensor's first draw */
    int64_t r0, r1;           /* rows to draw */
} job;

typedef struct pool {
    job *jobs;
    int njobs;
    int next;
    int64_t chunk;            /* rows per task */
    pthread_mutex_t mu;
} pool;

static void tern_rows(const job *j, int64_t a, int64_t b)
{
    const lkg_ternary *t = j->t;
    const int64_t rb = t->ld / 4;
    for (int64_t r = a; r < b; r++) {
        uint8_t *row = t->codes + r * rb;
        for (int64_t c = 0; c < rb; c++) {
            uint64_t x = draw(j->s0, (uint64_t)(r * rb + c));
            uint8_t v = 0;
            for (int i = 0; i < 4; i++) {
                int64_t k = c * 4 + i;
                unsigned code = k < t->cols ? (unsigned)((x >> (16 * i)) % 3u) : 1u;
                v |= (uint8_t)(code << 2 * i);
            }
            row[c] = v;
        }
    }
}

/* tasks: (job, row range of chunk rows), taken in order */
static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        const job *j = NULL;
        int64_t a = 0, b = 0;
        while (p->next < p->njobs) {
            job *x = &p->jobs[p->next];
            if (x->r0 < x->r1) {
                a = x->r0;
                b = a + p->chunk < x->r1 ? a + p->chunk : x->r1;
                x->r0 = b;
                j = x;
                break;
            }
            p->next++;
        }
        pthread_mutex_unlock(&p->mu);
        if (!j)
            return NULL;
        tern_rows(j, a, b);
    }
}

static int tern_alloc(lkg_ternary *t, int64_t rows, int64_t cols)
{
    t->rows = rows;
    t->cols = cols;
    t->ld = (cols + 3) / 4 * 4;
    t->nscale = 1;
    t->codes = calloc((size_t)(rows * (t->ld / 4)) + 1, 1);
    t->scale = malloc(sizeof(float));
    if (!t->codes || !t->scale)
        return -1;
    float sc = 1.0f / sqrtf((float)cols * (2.0f / 3.0f));
    t->scale[0] = lk_f16_to_f32(lk_f32_to_f16(sc));
    return 0;
}

static float *norm_draw(int64_t n, uint64_t *s)
{
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; p && i < n; i++)
        p[i] = 0.875f + (float)(draw(*s, (uint64_t)i) >> 40) * 0x1p-26f;
    *s += (uint64_t)n * golden;
    return p;
}

int bn_shard_weights(bn_weights *w, const bn_config *cfg, uint64_t seed, int mode, int rank,
                     int size, char *err, size_t errlen)
{
    const bn_config c = *cfg;
    uint64_t s = seed;
    memset(w, 0, sizeof *w);
    w->cfg = c;
    const int tp = mode == BN_SHARD_TP;
    const int64_t N = tp ? size : 1, r = tp ? rank : 0;
    const int64_t g = c.n_head / c.n_kv, hd = c.head_dim;
    const int64_t kv0 = c.n_kv * r / N, kv1 = c.n_kv * (r + 1) / N;
    const int64_t d0 = c.dim * r / N, d1 = c.dim * (r + 1) / N;
    const int64_t f0 = c.ffn * r / N, f1 = c.ffn * (r + 1) / N;
    const int64_t l0 = tp ? 0 : c.n_layer * rank / size, l1 = tp ? c.n_layer : c.n_layer * (rank + 1) / size;
    const int need_embd = tp || rank == 0 || rank == size - 1;
    const size_t ne = (size_t)(c.vocab * c.dim);
    const int64_t qd = c.n_head * hd, kvd = c.n_kv * hd;
    job *jobs = calloc((size_t)c.n_layer * 7 + 1, sizeof *jobs);
    w->embd = need_embd ? malloc(ne * sizeof *w->embd) : calloc(1, sizeof *w->embd);
    w->layers = calloc((size_t)c.n_layer, sizeof *w->layers);
    if (!jobs || !w->embd || !w->layers)
        goto oom;
    for (size_t i = 0; need_embd && i < ne; i += 2) {
        uint64_t x = draw(s, i / 2);
        w->embd[i] = lk_f32_to_bf16((float)((int32_t)(x & 0x7ff) - 1024) * 0x1p-14f);
        if (i + 1 < ne)
            w->embd[i + 1] = lk_f32_to_bf16((float)((int32_t)((x >> 32) & 0x7ff) - 1024) * 0x1p-14f);
    }
    s += (uint64_t)((ne + 1) / 2) * golden;
    if (!(w->out_norm = norm_draw(c.dim, &s)))
        goto oom;
    int nj = 0;
    for (int64_t l = 0; l < c.n_layer; l++) {
        bn_layer_w *L = &w->layers[l];
        if (!(L->attn_norm = norm_draw(c.dim, &s)) || !(L->attn_sub_norm = norm_draw(qd, &s)) ||
            !(L->ffn_norm = norm_draw(c.dim, &s)) || !(L->ffn_sub_norm = norm_draw(c.ffn, &s)))
            goto oom;
        lkg_ternary *t[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
        const int64_t rows[7] = {qd, kvd, kvd, c.dim, c.ffn, c.ffn, c.dim};
        const int64_t cols[7] = {c.dim, c.dim, c.dim, qd, c.dim, c.dim, c.ffn};
        /* the rows of each tensor this rank's shard reads */
        const int64_t lo[7] = {kv0 * g * hd, kv0 * hd, kv0 * hd, d0, f0, f0, d0};
        const int64_t hi[7] = {kv1 * g * hd, kv1 * hd, kv1 * hd, d1, f1, f1, d1};
        const int held = l >= l0 && l < l1;
        for (int i = 0; i < 7; i++) {
            if (tern_alloc(t[i], rows[i], cols[i]))
                goto oom;
            if (held && lo[i] < hi[i]) {
                jobs[nj].t = t[i];
                jobs[nj].s0 = s;
                jobs[nj].r0 = lo[i];
                jobs[nj].r1 = hi[i];
                nj++;
            }
            s += (uint64_t)(rows[i] * (t[i]->ld / 4)) * golden;
        }
    }
    {
        pool p;
        memset(&p, 0, sizeof p);
        p.jobs = jobs, p.njobs = nj, p.chunk = 64;
        pthread_mutex_init(&p.mu, NULL);
        long nt = sysconf(_SC_NPROCESSORS_ONLN);
        const char *e = getenv("LOCKSTEP_NUM_THREADS");
        if (e && atol(e) > 0)
            nt = atol(e);
        nt = nt < 1 ? 1 : nt > 64 ? 64 : nt;
        pthread_t th[64];
        int started = 0;
        for (long i = 1; i < nt; i++)
            if (pthread_create(&th[started], NULL, worker, &p) == 0)
                started++;
        worker(&p);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        pthread_mutex_destroy(&p.mu);
    }
    free(jobs);
    return 0;
oom:
    free(jobs);
    bn_weights_free(w);
    return lkg_fail(err, errlen, "out of memory generating rank %d's weights", rank);
}
