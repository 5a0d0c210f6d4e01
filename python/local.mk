# The Python binding (python/lockstep): pure Python over the installed
# library, shipped in the tarball for `pip install ./python`; its pytest
# suite runs from `make check` against the build tree's library.
EXTRA_DIST += python/README.md python/pyproject.toml \
	python/lockstep/__init__.py python/lockstep/_version.py \
	python/lockstep/_lib.py python/lockstep/errors.py \
	python/lockstep/_device.py python/lockstep/_dlpack.py \
	python/lockstep/_tensor.py python/lockstep/ops.py \
	python/lockstep/_check.py \
	python/tests/conftest.py python/tests/tap.py \
	python/tests/test_library.py python/tests/test_ops.py \
	python/tests/test_dlpack.py python/tools/call_overhead.py
TESTS += tests/test_python.sh
EXTRA_DIST += tests/test_python.sh
# The training ops' binding (backward ops, optimizer steps).
EXTRA_DIST += python/lockstep/train_ops.py
