"""The GPU lane: one prepared script (``run.sh``) that checks vLLM's CUDA kernels on a GPU.

Importing this package imports nothing heavy; ``run.py`` imports torch, the reference kernels and
(optionally) vLLM only when it runs.
"""
