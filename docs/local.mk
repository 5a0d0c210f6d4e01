EXTRA_DIST += docs/numerics.md
EXTRA_DIST += docs/formats.md
EXTRA_DIST += docs/api.md docs/drivers.md
EXTRA_DIST += docs/demo.md
