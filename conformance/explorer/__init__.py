"""The trace explorer's data and page, shared by the study site and ``python -m conformance explore``.

* :mod:`conformance.explorer.steps`: a trace replayed on the reference, one display state per step;
* :mod:`conformance.explorer.op_notes`: which upstream notes and which reference function each op
  stands for, per annotated release;
* :mod:`conformance.explorer.exercises`: the questions of exercise mode, answered from those states;
* :mod:`conformance.explorer.page`: the explorer's HTML (a fragment for the site's pages, or a
  self-contained page) and its script and style (``assets/``).

The docs hook (``docs/hooks/trace_explorer.py``) and the ``explore`` command both build pages
from these; nothing here imports the docs hooks.
"""
