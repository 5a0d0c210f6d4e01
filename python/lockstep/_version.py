# The package version.  It follows the C library's (configure.ac AC_INIT):
# change both together.  The binding works with any liblockstep of the
# same soname (liblockstep.so.0); lockstep.library_version() says which
# one was loaded.
__version__ = "0.1.0"
