# The reference backend: the executable contract.
noinst_HEADERS += backends/ref/ref.h
noinst_LTLIBRARIES += backends/ref/libref.la
backends_ref_libref_la_CFLAGS = $(AM_CFLAGS)
backends_ref_libref_la_SOURCES = \
	backends/ref/lanes.c backends/ref/lanes.h
liblockstep_la_LIBADD += backends/ref/libref.la
# Element loads/stores of float tensors, and the GEMM, integer GEMM,
# quantisation, packing and binary kernels (numerics.md sections 3, 4, 7, 8, 9).
backends_ref_libref_la_SOURCES += backends/ref/load_store.c backends/ref/load_store.h
backends_ref_libref_la_SOURCES += backends/ref/gemm.c backends/ref/int8_gemm.c \
	backends/ref/ternary.c backends/ref/t2.h backends/ref/qgemm_epilogue.h \
	backends/ref/quant.c backends/ref/binary.c
# Row reductions, norms and softmax (numerics.md sections 5 and 6).
backends_ref_libref_la_SOURCES += backends/ref/reduce.c backends/ref/norm.c \
	backends/ref/softmax.c
# The built-in "ref" driver: the reference kernels behind the driver ABI.
backends_ref_libref_la_SOURCES += backends/ref/driver.c
# The library's transcendental functions (the sequences are inline in
# backends/transcendental.h) and the unary ops (numerics.md section 7).
noinst_HEADERS += backends/transcendental.h
backends_ref_libref_la_SOURCES += backends/ref/transcendental.c \
	backends/ref/transcendental.h backends/ref/unary.c
EXTRA_DIST += backends/transcendental_fit.py
# The tensor-core tier: the exact model of the GPUs' MMA arithmetic.
backends_ref_libref_la_SOURCES += backends/ref/mma_model.c
# The transformer ops: RoPE, attention, embedding (numerics.md section 12).
noinst_HEADERS += backends/rope.h
backends_ref_libref_la_SOURCES += backends/ref/rope.c backends/ref/attention.c \
	backends/ref/embedding.c
# lk_set_rows, the scatter counterpart of embedding (numerics.md section 12.4.1).
backends_ref_libref_la_SOURCES += backends/ref/set_rows.c
# The training ops: backward ops and optimizer steps (numerics.md section 13).
noinst_HEADERS += backends/train.h
backends_ref_libref_la_SOURCES += backends/ref/train.c
