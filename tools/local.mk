# The `lockstep` command, and the contract matrix it shares with the tests
# (one implementation, two front ends: `lockstep check` and
# tests/test_contract.c).
noinst_LTLIBRARIES += tools/libmatrix.la
tools_libmatrix_la_SOURCES = \
	tools/matrix.h \
	tools/matrix.c \
	tools/matrix_cases.c \
	tools/matrix_data.c

bin_PROGRAMS += tools/lockstep
tools_lockstep_SOURCES = \
	tools/cmd.h \
	tools/args.c \
	tools/lockstep.c \
	tools/cmd_info.c \
	tools/cmd_check.c \
	tools/cmd_bench.c \
	tools/cmd_demo.c \
	tools/cmd_demo_tp.c
tools_lockstep_LDADD = tools/libmatrix.la liblockstep.la
# `lockstep bench` is bench/libbench.la (bench/local.mk adds it to the LDADD).
tools_lockstep_CPPFLAGS = $(AM_CPPFLAGS) -DLK_HAVE_BENCH
