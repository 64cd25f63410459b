"""vLLM's own log lines (and torch's, which importing vLLM provokes), kept out of the conformance output.

vLLM configures its ``vllm`` logger with a handler on standard output when it is first imported,
unless ``VLLM_CONFIGURE_LOGGING=0`` is set; then its loggers propagate to the root logger, whose
last-resort handler prints warnings on standard error. :func:`to_file` sets that variable (before
vLLM is imported) and gives the ``vllm`` logger one handler of its own: a file. Nothing vLLM logs
through ``logging`` then reaches the terminal (``python -m conformance run --verbose`` skips this).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path

#: Set on the handler this module installs, so a second call can tell it from vLLM's and torch's.
HANDLER_MARK = "_pastudy_vllm_log"


def to_file(path: Path) -> logging.Handler:
    """Send every record of the ``vllm`` logger, and torch's warnings, to ``path``; none to the terminal.

    Call it before vLLM is imported; where vLLM is already imported its own handlers are removed.
    Calling it again replaces the file.
    """
    os.environ["VLLM_CONFIGURE_LOGGING"] = "0"
    # Importing torch sets up torch's own log handlers (torch._logging._init_logs), replacing any
    # that are already there: import it first, so that the redirect below is the last word.
    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401 - imported for its side effect on the loggers (see above)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    setattr(handler, HANDLER_MARK, True)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s %(name)s: %(message)s"))
    level = logging.DEBUG if os.environ.get("VLLM_LOGGING_LEVEL") == "DEBUG" else logging.INFO
    # torch's loggers too: importing vLLM makes torch warn about vLLM's registrations
    # (torch/_library/opaque_object.py), through the handler torch installs on its own logger.
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
            if getattr(old, HANDLER_MARK, False):
                old.close()
        logger.addHandler(handler)
        logger.setLevel(level if name == "vllm" else logging.WARNING)
        logger.propagate = False
        if name in sys.modules:  # configured already: keep its child loggers off their own handlers
            for child_name, child in logging.root.manager.loggerDict.items():
                if child_name.startswith(name + ".") and isinstance(child, logging.Logger):
                    for h in list(child.handlers):
                        child.removeHandler(h)
                    child.propagate = True
    return handler


#: The loggers whose records go to the file instead of the terminal.
LOGGERS = ("vllm", "torch")
