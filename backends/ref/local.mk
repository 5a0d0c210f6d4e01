# The reference backend: the executable contract.
noinst_HEADERS += backends/ref/ref.h backends/scalar.h
noinst_LTLIBRARIES += backends/ref/libref.la
backends_ref_libref_la_CFLAGS = $(AM_CFLAGS)
backends_ref_libref_la_SOURCES = \
	backends/ref/lanes.c backends/ref/lanes.h
liblockstep_la_LIBADD += backends/ref/libref.la
