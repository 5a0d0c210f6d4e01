# The core: context, registry, loader, topology, validation, dispatch.
noinst_HEADERS += core/builtin.h core/error.h core/core.h core/dtype.h core/memory.h \
	core/topology.h core/validate.h core/capture.h \
	core/comm_impl.h
liblockstep_la_SOURCES += \
	core/error.c \
	core/version.c \
	core/dtype.c \
	core/registry.c \
	core/loader.c \
	core/topology.c \
	core/context.c \
	core/device.c \
	core/queue.c \
	core/memory.c \
	core/validate.c \
	core/ops_gemm.c \
	core/ops_reduce.c \
	core/ops_norm.c \
	core/ops_softmax.c \
	core/ops_unary.c \
	core/ops_binary.c \
	core/ops_quant.c \
	core/ops_intgemm.c \
	core/ops_model.c \
	core/ops_paged.c \
	core/weights.c \
	core/ops_bitnet.c \
	core/ops_train.c \
	core/graph.c \
	core/comm.c
# configure's exit cleanup runs 'rm -f core && rm -f -r confdefs* ...', which stops at the core/
# build directory and leaves confdefs.h behind for distcheck to find.
DISTCLEANFILES += confdefs.h

# The communicator (include/lockstep/comm.h): MPI with --with-mpi, NCCL for
# GPU tensors with --with-nccl; without them the symbols say so.
if LK_HAVE_MPI
liblockstep_la_CFLAGS += $(MPI_CFLAGS)
liblockstep_la_LIBADD += $(MPI_LIBS)
endif
if LK_HAVE_NCCL
liblockstep_la_SOURCES += core/comm_nccl.c
liblockstep_la_CFLAGS += $(NCCL_CFLAGS)
liblockstep_la_LIBADD += $(NCCL_LIBS)
endif
