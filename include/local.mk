# Public headers.
include_HEADERS = include/lockstep.h
lockstepincdir = $(includedir)/lockstep
lockstepinc_HEADERS = \
	include/lockstep/export.h \
	include/lockstep/status.h \
	include/lockstep/types.h \
	include/lockstep/device.h \
	include/lockstep/ops.h \
	include/lockstep/driver.h \
	include/lockstep/info.h \
	include/lockstep/weights.h \
	include/lockstep/graph.h \
	include/lockstep/bitnet.h \
	include/lockstep/comm.h
nodist_lockstepinc_HEADERS = include/lockstep/version.h
