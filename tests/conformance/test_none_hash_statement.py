"""The V1 adapter re-seeds an import-time NONE_HASH by evaluating the installed module's own statement."""

from __future__ import annotations

import hashlib
import importlib.util
import pickle

import pytest

from conformance.adapters.vllm_v1 import _none_hash_expression, _seeded_environment
from conformance.versions import HarnessError

# The statement of v0.8.4 vllm/v1/core/kv_cache_utils.py:45-46 (inverted) and of v0.8.5 (corrected).
MODULE = '''import os, hashlib, pickle


def sha256(value):
    return int.from_bytes(hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest(), "big")


NONE_HASH = int.from_bytes(os.urandom(32), byteorder="big") if os.getenv(
    'PYTHONHASHSEED') is {test} None else sha256(os.getenv('PYTHONHASHSEED'))
'''


def _module(tmp_path, test: str):
    path = tmp_path / f"kv_utils_{test.replace(' ', '_') or 'is'}.py"
    path.write_text(MODULE.format(test=test))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sha256_int(value) -> int:
    return int.from_bytes(hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest(), "big")


@pytest.mark.parametrize("test, unset, seeded", [
    ("not", "sha256(None)", "entropy"),  # 0.8.3, 0.8.4
    ("", "entropy", "sha256(seed)"),  # 0.8.5 .. 0.9.2
])
def test_the_installed_statement_decides_how_the_seed_is_read(tmp_path, test, unset, seeded):
    """Catches: the adapter restating 0.8.5's NONE_HASH rule for every release before 0.10.0, so that
    0.8.3 and 0.8.4 (which test PYTHONHASHSEED the other way round) were driven with a NONE_HASH
    their own import never computes."""
    module = _module(tmp_path, test)
    entropy = bytes(range(32))
    expected = {"entropy": int.from_bytes(entropy, "big"), "sha256(None)": _sha256_int(None),
                "sha256(seed)": _sha256_int("7")}
    expression = _none_hash_expression(module)
    with _seeded_environment(None, entropy):
        assert eval(expression, vars(module)) == expected[unset]
    with _seeded_environment("7", entropy):
        assert eval(expression, vars(module)) == expected[seeded]


def test_a_module_without_the_statement_is_a_harness_error(tmp_path):
    """Catches: a NONE_HASH set some other way (a function, an annotation) silently left unseeded."""
    path = tmp_path / "kv_utils_none.py"
    path.write_text("NONE_HASH: int\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(HarnessError, match="no top-level"):
        _none_hash_expression(module)
