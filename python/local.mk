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
# The training ops' binding, exact training with PyTorch, BitLinear, tests
# and the training benchmark.
EXTRA_DIST += python/lockstep/train_ops.py python/lockstep/torch/_backward.py \
	python/lockstep/torch/_optim.py python/lockstep/torch/bitlinear.py \
	python/tests/test_train_exact.py python/tests/test_bitlinear.py \
	python/tools/bench_train.py
# lockstep.torch (exact mode for PyTorch), its tests, example and benchmark
EXTRA_DIST += scripts/ci-torch.sh
EXTRA_DIST += python/lockstep/torch/__init__.py python/lockstep/torch/_registry.py \
	python/lockstep/torch/_mode.py python/lockstep/torch/_call.py \
	python/lockstep/torch/_ops.py python/lockstep/torch/_compose.py \
	python/lockstep/torch/_exactops.py python/lockstep/torch/_attention.py \
	python/lockstep/torch/_check.py \
	python/tests/test_torch_exact.py python/tests/test_torch_models.py \
	python/examples/exact_transformers.py python/tools/bench_exact.py
