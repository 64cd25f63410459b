"""Kernel tests run Triton under its CPU interpreter (no GPU here): set it before triton loads."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
