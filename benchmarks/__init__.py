"""Benchmarks and experiments: scripts that print figures side by side; never timed assertions."""
