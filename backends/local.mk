# Backends: the reference (the executable contract), then the drivers.
noinst_HEADERS += backends/contract.h
include backends/ref/local.mk
# lk_bitnet_decode's scratch layout and its composition on any kernel table:
# the built-in drivers' slot.  In the reference's library because the ref
# driver's table uses it and modules link that library (tests/drivers); a
# driver module that does not compiles bitnet.c in itself.
noinst_HEADERS += backends/bitnet.h
backends_ref_libref_la_SOURCES += backends/bitnet.c
include backends/cpu/local.mk
include backends/cuda/local.mk
