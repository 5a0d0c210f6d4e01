# CPU driver (issue 3): filled in by backends/cpu
