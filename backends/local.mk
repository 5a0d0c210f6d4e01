# Backends: the reference (the executable contract), then the drivers.
noinst_HEADERS += backends/contract.h
include backends/ref/local.mk
include backends/cpu/local.mk
include backends/cuda/local.mk
