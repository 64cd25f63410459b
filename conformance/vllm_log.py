"""vLLM's own log lines, kept out of the conformance output.

vLLM configures its ``vllm`` logger with a handler on standard output when it is first imported,
unless ``VLLM_CONFIGURE_LOGGING=0`` is set; then its loggers propagate to the root logger, whose
last-resort handler prints warnings on standard error. :func:`to_file` sets that variable (before
vLLM is imported) and gives the ``vllm`` logger one handler of its own: a file. Nothing vLLM logs
through ``logging`` then reaches the terminal (``python -m conformance run --verbose`` skips this).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

_MARK = "_pastudy_vllm_log"


def to_file(path: Path) -> logging.Handler:
    """Send every record of the ``vllm`` logger (and its children) to ``path``, none to the terminal.

    Call it before vLLM is imported; where vLLM is already imported its own handlers are removed.
    Calling it again replaces the file.
    """
    os.environ["VLLM_CONFIGURE_LOGGING"] = "0"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("vllm")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        if getattr(handler, _MARK, False):
            handler.close()
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    setattr(handler, _MARK, True)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if os.environ.get("VLLM_LOGGING_LEVEL") == "DEBUG" else logging.INFO)
    logger.propagate = False
    if "vllm" in sys.modules:  # configured already: keep its child loggers off their own handlers
        for name, child in logging.root.manager.loggerDict.items():
            if name.startswith("vllm.") and isinstance(child, logging.Logger):
                for h in list(child.handlers):
                    child.removeHandler(h)
                child.propagate = True
    return handler
