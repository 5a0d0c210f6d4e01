# The contract's shared primitives, header-only, used by the core and by
# every backend alike: its constants, the scalar conversions and
# operations, the floating-point environment guard (docs/numerics.md).
noinst_HEADERS += numerics/contract.h numerics/scalar.h numerics/fpenv.h
