# The reference backend: the executable contract.
noinst_HEADERS += backends/ref/ref.h backends/scalar.h
