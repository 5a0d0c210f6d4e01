EXTRA_DIST += docs/numerics.md
