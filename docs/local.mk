# The user's documentation (Markdown, carried in the tarball), the plots the
# README shows (a snapshot refreshed by `make bench-snapshot`), maintainers'
# notes by topic, and the lockstep(1) man page, installed.
EXTRA_DIST += docs/numerics.md
EXTRA_DIST += docs/formats.md
EXTRA_DIST += docs/api.md docs/drivers.md
EXTRA_DIST += docs/demo.md docs/multi-device.md
EXTRA_DIST += docs/performance.md docs/performance/ratio.png docs/performance/ratio-gpu.png \
	docs/performance/compute.png docs/performance/bandwidth.png
EXTRA_DIST += docs/internals
EXTRA_DIST += NEWS HACKING.md RELEASING.md
dist_man_MANS = docs/lockstep.1
