/* BitNet example: a GGUF reader (v2 and v3) for BitNet b1.58 model files.
 *
 * The whole file is read into memory and parsed once; every count, size and
 * offset is checked against the file size with overflow-safe arithmetic
 * before anything is read, so a malformed or hostile file gives an error
 * message, never a crash or an out-of-bounds read.  Tensor data stays in the
 * file buffer; the converters below turn it into what Lockstep's ops take:
 * f32 / bf16 matrices and LK_T2 packed ternary weights with their scale
 * (docs/formats.md).
 *
 * Every function that can fail returns 0 on success or -1 with a message in
 * err (errlen bytes, may be NULL). */
#ifndef LK_EXAMPLES_BITNET_GGUF_H
#define LK_EXAMPLES_BITNET_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* GGUF metadata value types (the gguf spec's numbering). */
enum lkg_vtype {
    LKG_U8 = 0, LKG_I8 = 1, LKG_U16 = 2, LKG_I16 = 3, LKG_U32 = 4, LKG_I32 = 5,
    LKG_F32 = 6, LKG_BOOL = 7, LKG_STRING = 8, LKG_ARRAY = 9, LKG_U64 = 10,
    LKG_I64 = 11, LKG_F64 = 12, LKG_VTYPE_COUNT_ = 13
};

/* ggml tensor types this reader converts (ggml.h numbering; I2_S is
 * bitnet.cpp's, whose fork of ggml.h gives it 36). */
enum lkg_ttype {
    LKG_T_F32 = 0, LKG_T_F16 = 1, LKG_T_BF16 = 30,
    LKG_T_TQ1_0 = 34, LKG_T_TQ2_0 = 35, LKG_T_I2_S = 36
};

/* Refusal limits: far above any real model, far below what would let a
 * hostile header make us allocate or loop without end. */
#define LKG_MAX_TENSORS 65536u
#define LKG_MAX_KV 65536u
#define LKG_MAX_ARRAY ((uint64_t)1 << 26)  /* elements in one array */
#define LKG_MAX_STRING ((uint64_t)1 << 24) /* bytes in one string */
#define LKG_MAX_DIMS 4u
#define LKG_MAX_ARRAY_DEPTH 4

typedef struct lkg_str {
    const char *s; /* points into the file buffer; NOT NUL-terminated */
    uint64_t len;
} lkg_str;

typedef struct lkg_value {
    uint32_t type; /* enum lkg_vtype */
    union {
        uint64_t u;   /* U8..U64, BOOL */
        int64_t i;    /* I8..I64 */
        double f;     /* F32, F64 */
        lkg_str str;  /* STRING */
        struct {
            uint32_t type;      /* element type */
            uint64_t count;
            const uint8_t *raw; /* first element in the file buffer */
            uint64_t bytes;     /* total encoded size of the elements */
        } arr;
    } v;
} lkg_value;

typedef struct lkg_kv {
    lkg_str key;
    lkg_value value;
} lkg_kv;

typedef struct lkg_tensor {
    lkg_str name;
    uint32_t n_dims;
    uint64_t ne[LKG_MAX_DIMS]; /* ne[0] is the fastest dimension; unused = 1 */
    uint32_t type;             /* enum lkg_ttype or any other ggml type */
    uint64_t offset;           /* relative to the data section */
    uint64_t nbytes;           /* 0 when the type is unknown to this reader */
    const uint8_t *data;       /* NULL when the type is unknown */
} lkg_tensor;

typedef struct lkg_file {
    uint8_t *buf; /* owned copy of the file */
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    lkg_kv *kv;
    uint64_t n_tensors;
    lkg_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
} lkg_file;

/* Write the message into err (errlen bytes) and return -1: how every
 * function here (and the demo model's and tokenizer's) fails. */
int lkg_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parse a GGUF image of size bytes (copied).  *out is set only on success. */
int lkg_parse(const void *data, size_t size, lkg_file **out, char *err, size_t errlen);
int lkg_open(const char *path, lkg_file **out, char *err, size_t errlen);
void lkg_close(lkg_file *f);

/* "F32", "TQ2_0", ... or NULL for a type this reader does not know. */
const char *lkg_type_name(uint32_t type);

/* Lookups; NULL when absent. */
const lkg_kv *lkg_find_kv(const lkg_file *f, const char *key);
const lkg_tensor *lkg_find_tensor(const lkg_file *f, const char *name);
int lkg_str_eq(lkg_str s, const char *c);

/* Typed getters: -1 (with err) when absent or not convertible.  Integers
 * must fit; floats accept F32/F64 and integers. */
int lkg_get_u64(const lkg_file *f, const char *key, uint64_t *v, char *err, size_t errlen);
int lkg_get_f32(const lkg_file *f, const char *key, float *v, char *err, size_t errlen);
/* Copies the string value (NUL-terminated, truncated to n - 1). */
int lkg_get_str(const lkg_file *f, const char *key, char *buf, size_t n, char *err,
                size_t errlen);
/* Element i of a string array. */
int lkg_array_str(const lkg_value *v, uint64_t i, lkg_str *out);

/* Rows and columns of a tensor seen as a matrix: cols = ne[0], rows = the
 * product of the other dimensions (checked not to overflow). */
int lkg_tensor_shape(const lkg_tensor *t, int64_t *rows, int64_t *cols, char *err, size_t errlen);

/* A float tensor (F32, F16, BF16) converted exactly to f32 (dst holds
 * rows * cols), or to bf16 (F32 and F16 values rounded to nearest even). */
int lkg_tensor_to_f32(const lkg_tensor *t, float *dst, char *err, size_t errlen);
int lkg_tensor_to_bf16(const lkg_tensor *t, uint16_t *dst, char *err, size_t errlen);

/* A ternary tensor (TQ1_0, TQ2_0, I2_S) as LK_T2 (docs/formats.md).
 * codes: rows * (ld / 4) bytes with ld = cols rounded up to 4, padding codes
 * 1.  Scales: I2_S has one per tensor (nscale = 1); TQ1_0/TQ2_0 have one f16
 * per 256-weight block, accepted only when every block of a row that holds
 * a non-zero weight has the same one, giving one per row (nscale = rows).
 * i2s_block is the I2_S block size the file was written with: 128 (x86
 * builds of bitnet.cpp) or 64 (ARM builds); 0 means 128. */
typedef struct lkg_ternary {
    int64_t rows, cols, ld;
    uint8_t *codes;
    float *scale;
    int64_t nscale;
} lkg_ternary;

int lkg_tensor_to_t2(const lkg_tensor *t, int i2s_block, lkg_ternary *out, char *err,
                     size_t errlen);
void lkg_ternary_free(lkg_ternary *t);

/* ---------------------------------------------------------------- writer
 * A small GGUF v3 writer (gguf_write.c): enough for the tests and for
 * `lockstep demo --write-gguf`.  Build up a file in memory, then take its
 * bytes.  Functions return 0, or -1 when out of memory. */
typedef struct lkg_writer lkg_writer;

lkg_writer *lkg_writer_new(uint32_t alignment);
void lkg_writer_free(lkg_writer *w);
int lkg_w_u32(lkg_writer *w, const char *key, uint32_t v);
int lkg_w_f32(lkg_writer *w, const char *key, float v);
int lkg_w_str(lkg_writer *w, const char *key, const char *v);
/* Any scalar value already encoded (for tests of every type). */
int lkg_w_raw(lkg_writer *w, const char *key, uint32_t type, const void *enc, size_t n);
int lkg_w_str_array(lkg_writer *w, const char *key, const char *const *v, uint64_t n);
int lkg_w_tensor(lkg_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                 const uint64_t *ne, const void *data, uint64_t nbytes);
/* The finished file: *data (malloc'd, the caller frees it) and *size. */
int lkg_writer_finish(lkg_writer *w, uint8_t **data, size_t *size);

/* Encoders from LK_T2 rows (ld = cols rounded up to 4) to the file formats,
 * the inverses of lkg_tensor_to_t2.  TQ1_0/TQ2_0 take one scale per row
 * (stored as f16 in every block of the row) and need cols % 256 == 0; I2_S
 * one per tensor, rows * cols % block == 0.  dst holds lkg_ternary_bytes. */
uint64_t lkg_ternary_bytes(uint32_t type, int64_t rows, int64_t cols, int i2s_block);
int lkg_encode_ternary(uint32_t type, const uint8_t *codes, int64_t rows, int64_t cols,
                       const float *scale, int i2s_block, uint8_t *dst);

#endif
