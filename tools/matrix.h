/* Lockstep: the cross-device contract matrix (internal to tools/ and tests/).
 *
 * One implementation behind two front ends, `lockstep check` and
 * tests/test_contract.c (tests/test_invariance.c and tests/test_hostile.c
 * reuse its cases and runner).  A case is one op call with fixed dtypes and
 * shapes and a seed for its inputs; it is run on the reference device and on
 * every other device, and each device's outputs are compared with the
 * reference's byte for byte.
 *
 * Everything here goes through the public API only, so the matrix checks
 * what a user gets. */
#ifndef LK_TOOLS_MATRIX_H
#define LK_TOOLS_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include <lockstep.h>

/* The op family of a case; buffer order in lk_mx_case.buf per kind:
 *   GEMM          a, b, bias, c
 *   REDUCE        x, y
 *   RMSNORM       x, weight, -, y        LAYERNORM  x, weight, bias, y
 *   SOFTMAX/LOG   x, y
 *   UNARY/CONVERT x, y
 *   BINARY        a, b, y
 *   QUANT_ACT     x, q, scale            QUANT_TERNARY  w, wq, scale
 *   PACK/UNPACK   src, dst
 *   TERNARY_GEMM/INT8_GEMM  x, x_scale, w, w_scale, y
 *   ROPE          x, pos, y              EMBEDDING  table, ids, y
 *   ATTENTION     q, k, v, pos, out
 *   SET_ROWS      src, idx, dst (dst's prefill is part of the result)
 *   GLU           gate, up, y */
typedef enum lk_mx_kind {
    LK_MX_GEMM = 1,
    LK_MX_REDUCE,
    LK_MX_RMSNORM,
    LK_MX_LAYERNORM,
    LK_MX_SOFTMAX,
    LK_MX_LOG_SOFTMAX,
    LK_MX_UNARY,
    LK_MX_CONVERT,
    LK_MX_BINARY,
    LK_MX_QUANT_ACT,
    LK_MX_QUANT_TERNARY,
    LK_MX_PACK,
    LK_MX_UNPACK,
    LK_MX_TERNARY_GEMM,
    LK_MX_INT8_GEMM,
    LK_MX_ROPE,
    LK_MX_ATTENTION,
    LK_MX_EMBEDDING,
    LK_MX_RMSNORM_QUANT,
    LK_MX_SET_ROWS,
    LK_MX_GLU
} lk_mx_kind;

/* How a buffer's initial contents are made (inputs, and the prefill of
 * outputs, which every device receives identically so that a stray write
 * shows up as a difference). */
typedef enum lk_mx_fill {
    LK_MX_FILL_NONE = 0,   /* absent optional tensor */
    LK_MX_FILL_SENTINEL,   /* output prefill: a fixed byte pattern */
    LK_MX_FILL_NORMAL,     /* finite values of mixed magnitude, both signs */
    LK_MX_FILL_EDGE,       /* NORMAL with NaN, Inf, +-0, subnormals, ties,
                              near-overflow sprinkled in (param: 1 in N) */
    LK_MX_FILL_WIDE,       /* half random bit patterns (any class), half NORMAL */
    LK_MX_FILL_ALLBITS,    /* 16-bit dtypes: element i has bits i mod 65536 */
    LK_MX_FILL_OFFSET,     /* NORMAL plus a large common offset (variance) */
    LK_MX_FILL_NEGBIG,     /* softmax/exp: large negative values, some -Inf */
    LK_MX_FILL_ZEROROWS,   /* NORMAL with rows 0, 3, 6 ... all zero (+0/-0) */
    LK_MX_FILL_POSITIVE,   /* scales: positive finite values */
    LK_MX_FILL_SCALE_EDGE, /* scales with 0, Inf, NaN, subnormal among them */
    LK_MX_FILL_I8,         /* int8, full range with extremes */
    LK_MX_FILL_I8_CONST,   /* int8, every value fill_param (e.g. -128) */
    LK_MX_FILL_TERNARY,    /* int8 in {-1, 0, 1} */
    LK_MX_FILL_TERNARY_BAD,/* int8 in {-1, 0, 1} with one 2 */
    LK_MX_FILL_T2_RANDOM,  /* packed ternary, random bytes (every code) */
    LK_MX_FILL_T2_ALL3,    /* packed ternary, every code 3 (decodes to 2) */
    LK_MX_FILL_POS,        /* int32 positions in [0, param], 0 and param included */
    LK_MX_FILL_POS_EDGE,   /* POS with negative, huge, 2^20, 2^22 (+1), INT32_MIN/MAX */
    LK_MX_FILL_IDS,        /* int32 ids in [0, param) */
    LK_MX_FILL_IDS_BAD     /* IDS with one id out of range (param or -1) */
} lk_mx_fill;

typedef enum lk_mx_role { LK_MX_IN = 0, LK_MX_OUT, LK_MX_INOUT } lk_mx_role;

/* Which axis of a buffer is the batch (M) axis of the op, for batch
 * invariance: rows [o, o + m) of the problem are that axis' slice. */
typedef enum lk_mx_axis { LK_MX_AXIS_NONE = 0, LK_MX_AXIS_ROWS, LK_MX_AXIS_COLS } lk_mx_axis;

#define LK_MX_MAX_BUFS 5

typedef struct lk_mx_buf {
    const char *name;      /* "a", "c", "y" ... */
    int present;           /* 0: optional tensor left out (NULL) */
    int alias;             /* >= 0: same memory as buf[alias] (in place) */
    lk_dtype dtype;
    int64_t rows, cols, ld;
    int64_t batch_stride;  /* elements; 0 = one matrix shared by the batch */
    int64_t nmat;          /* matrices stored (1, or the batch) */
    lk_mx_role role;
    lk_mx_axis m_axis;
    lk_mx_fill fill;
    int fill_param;
} lk_mx_buf;

typedef struct lk_mx_case {
    int id;                /* position in the full list, for --case */
    lk_mx_kind kind;
    char op[24];           /* "gemm", "reduce.sum", "unary.exp", ... */
    char label[128];       /* dtypes, flags, shape */
    uint64_t seed;         /* of its inputs */
    int sub;               /* lk_reduce_op / lk_unary_op (also GLU) / lk_binary_op */
    lk_transpose ta, tb;
    unsigned flags;        /* LK_GEMM_* */
    int64_t batch;
    int64_t m;             /* length of the batch axis (0: none) */
    float eps;
    lk_status expect;      /* what every device must return (LK_OK, or an
                              error such as LK_ERR_INVALID_VALUE) */
    int nbuf;
    lk_mx_buf buf[LK_MX_MAX_BUFS];
    /* RoPE and attention (flags holds LK_ROPE_*) */
    int64_t n_head, n_kv, head_dim;
    float theta, scale;
} lk_mx_case;

/* --- the case list --- */

/* Every case for this seed.  full != 0 adds larger shapes and the complete
 * dtype x flag products.  Ids are assigned before any filtering, so a
 * case's id and inputs do not depend on which ops are selected.  Returns
 * the count (0 on allocation failure); free with free(). */
int lk_mx_build(uint64_t seed, int full, lk_mx_case **cases);

/* Op families that --op accepts ("gemm", "reduce", "reduce.sum", ...),
 * NULL-terminated. */
const char *const *lk_mx_op_names(void);

/* Whether the case belongs to the op family `name`: "reduce" matches
 * "reduce.sum", "reduce.max", ...; "reduce.sum" only itself. */
int lk_mx_op_matches(const lk_mx_case *c, const char *name);

/* --- data --- */

typedef struct lk_mx_data {
    int nbuf;
    size_t bytes[LK_MX_MAX_BUFS];
    void *host[LK_MX_MAX_BUFS]; /* NULL for absent or aliased buffers */
} lk_mx_data;

/* Initial contents of every buffer (inputs and output prefills). */
lk_status lk_mx_data_make(const lk_mx_case *c, lk_mx_data *d);
lk_status lk_mx_data_clone(const lk_mx_data *src, lk_mx_data *dst);
void lk_mx_data_free(lk_mx_data *d);

/* Called right before and right after the op itself (and its queue sync),
 * e.g. to set a hostile floating-point environment only around the call. */
typedef struct lk_mx_hook {
    void (*before)(void *user);
    void (*after)(void *user);
    void *user;
} lk_mx_hook;

/* The batch-axis slice to run: m_len < 0 runs the whole case. */
typedef struct lk_mx_slice {
    int64_t m_off, m_len;
} lk_mx_slice;

#define LK_MX_WHOLE ((lk_mx_slice){0, -1})

/* Issue the case's op on q with buffer i at ptr[i] (device pointers). */
lk_status lk_mx_exec(lk_queue *q, const lk_mx_case *c, void *const ptr[],
                     lk_mx_slice slice);

/* Run the case on q: out receives a copy of in, then the op runs on it
 * (through device memory when q's device has no host memory) and out holds
 * every buffer afterwards.  *op_status receives the op's status and msg
 * (may be NULL) its lk_last_error(); the return value is LK_OK unless the
 * harness itself failed (allocation, copies), in which case the case counts
 * as skipped on that device.  hook may be NULL.  Free out in every case. */
lk_status lk_mx_run(lk_queue *q, const lk_mx_case *c, const lk_mx_data *in,
                    lk_mx_data *out, lk_mx_slice slice, const lk_mx_hook *hook,
                    lk_status *op_status, char *msg, size_t msgsize);

/* --- comparison --- */

typedef enum lk_mx_verdict {
    LK_MX_IDENTICAL = 0,
    LK_MX_DIFFERS,
    LK_MX_UNSUPPORTED,
    LK_MX_SKIPPED,
    LK_MX_ERROR          /* the reference failed: nothing to compare with */
} lk_mx_verdict;

typedef struct lk_mx_result {
    lk_mx_verdict verdict;
    lk_status status;     /* the device's status */
    int buf;              /* DIFFERS: which buffer, -1 for a status mismatch */
    int64_t index;        /* DIFFERS: first differing element of that buffer */
    uint64_t ref_bits, dev_bits;
    char detail[200];     /* one line: where and how it differs, or why */
} lk_mx_result;

const char *lk_mx_verdict_name(lk_mx_verdict v);

/* First difference between the buffers of a and b that are outputs of c,
 * within every stored byte (padding included).  Returns 1 and fills r's
 * DIFFERS fields if one exists, else 0. */
int lk_mx_compare(const lk_mx_case *c, const lk_mx_data *ref, const lk_mx_data *dev,
                  lk_mx_result *r);

/* The whole check of one case: run it on ref_q, then on each qs[i], and
 * fill res[i] (ref_res for the reference: IDENTICAL when it ran as
 * expected, ERROR or UNSUPPORTED otherwise). */
void lk_mx_check_case(const lk_mx_case *c, lk_queue *ref_q, lk_queue *const *qs,
                      int nq, lk_mx_result *ref_res, lk_mx_result *res);

/* Element size in bytes for comparisons (LK_T2 compares bytes). */
size_t lk_mx_elem_bytes(lk_dtype dt);

#endif
