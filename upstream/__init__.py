"""The bottom floor under ``annotations/``, ``conformance/``, ``benchmarks/`` and the docs hooks:
what the project knows of vLLM's releases before any room uses it. It imports nothing of ours.

* :mod:`upstream.releases`: the two pinned releases, the one home of both strings;
* :mod:`upstream.fetch`: a release's sdist by package name and version, sha256-verified and cached
  outside the clone, and single files read from it.
"""
