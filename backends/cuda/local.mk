# CUDA driver module (issue 5): filled in by backends/cuda
