# The core: context, registry, loader, topology, validation, dispatch.
noinst_HEADERS += core/error.h core/fpenv.h
