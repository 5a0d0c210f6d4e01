# Backends: the reference (the executable contract), then the drivers.
include backends/ref/local.mk
# lk_bitnet_decode as the composition of its ops on any kernel table: what
# lk_host's bitnet_compose runs (the CUDA module compiles it in too).
noinst_HEADERS += backends/bitnet.h
backends_ref_libref_la_SOURCES += backends/bitnet.c
# The lk_host services as the reference and CPU kernels reach them; in the
# reference's library because every user of its kernels links that.
noinst_HEADERS += backends/host.h
backends_ref_libref_la_SOURCES += backends/host.c
include backends/cpu/local.mk
include backends/cuda/local.mk
