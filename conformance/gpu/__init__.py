"""The GPU lane: one prepared script (``run.sh`` -> ``run.py``) that checks vLLM's CUDA kernels on a
GPU and runs a quick decode-kernel sweep, writing ``reports/gpu-lane.json`` here.

Modules: ``csrc`` (the pinned v0.10.2 ``csrc/`` from the verified sdist), ``build`` (our
``launcher.cu`` as a torch extension, cached by content; ``--ci`` builds it without a GPU),
``ops`` (where the CUDA ops come from), ``cuda_checks`` (conformance), ``plan`` and ``evaluate``
(the sweep's plan and judgement, plain Python), ``measure`` (the sweep on the device), ``bench``
(the sweep on its own), ``report`` (the report as the site shows it). Importing this package
imports nothing heavy.
"""
