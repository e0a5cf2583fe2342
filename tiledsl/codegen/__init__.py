"""Code emitters: pure functions from (op, schedule) to CUDA C text."""
