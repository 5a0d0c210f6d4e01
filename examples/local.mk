# Examples: small programs a user copies from.  Built by `make` (never
# installed) so that they cannot rot, and compiled as a user would compile
# them: public headers only, no internal defines.
noinst_PROGRAMS += examples/quickstart examples/cross_check
EXAMPLES_CPPFLAGS = -I$(top_srcdir)/include -I$(top_builddir)/include
examples_quickstart_SOURCES = examples/quickstart.c
examples_quickstart_CPPFLAGS = $(EXAMPLES_CPPFLAGS)
examples_quickstart_LDADD = liblockstep.la
examples_cross_check_SOURCES = examples/cross_check.c
examples_cross_check_CPPFLAGS = $(EXAMPLES_CPPFLAGS)
examples_cross_check_LDADD = liblockstep.la

include examples/bitnet/local.mk

# A driver module to start from (docs/drivers.md).  Not built here: a module
# builds against an installed Lockstep, which scripts/ci-install.sh does
# (tests/test_install.sh), from a copy outside the source tree.
EXTRA_DIST += examples/driver/binary_f32.c
