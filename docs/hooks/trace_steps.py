"""The traces the site's explorer shows: the conformance corpus and the seed demo's two workloads.

The seed demo's first experiment (a sequence grows from 4 to 5 tokens in blocks of 4, so the fifth
token needs a second block) is :data:`SEED_FIFTH_TOKEN_TRACE`, the first exercise set; its second
(shared prefix, fork, free, eviction) is :data:`SEED_DEMO_TRACE`.

Replaying a trace into display states is :mod:`conformance.explorer.steps` (shared with
``python -m conformance explore``); this module only says which traces get a page, under which
slug and title.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.explorer.steps import op_summary, outcome_summary, replay
from conformance.trace_file import load_trace

#: The seed demo's V0 workload (``docs/hooks/seed_data.py``: shared prefix, fork with copy-on-write,
#: free, an allocation that must evict), written as lockstep ops so it replays like any trace.
SEED_PREFIX = [11, 12, 13, 14, 15, 16, 17, 18]
SEED_DEMO_TRACE: dict[str, Any] = {
    "semantics": "v0",
    "source": "the seed demo's V0 workload (docs/hooks/seed_data.py: workload_stages) as lockstep ops",
    "config": {"block_size": 4, "num_gpu_blocks": 8, "num_cpu_blocks": 0, "watermark": 0.0,
               "sliding_window": None, "enable_caching": True},
    "ops": [
        {"op": "add_group", "group": "A", "seqs": [1], "prompt": SEED_PREFIX + [21, 22]},
        {"op": "allocate", "group": "A"},
        {"op": "num_cached_tokens", "seq": 1},
        {"op": "mark_computed", "group": "A"},
        {"op": "add_group", "group": "B", "seqs": [2], "prompt": SEED_PREFIX + [31, 32]},
        {"op": "allocate", "group": "B"},
        {"op": "num_cached_tokens", "seq": 2},
        {"op": "compute", "seq": 1},
        {"op": "fork", "group": "A", "parent": 1, "child": 3},
        {"op": "append_token", "seq": 3, "token": 41},
        {"op": "append_slots", "seq": 3, "lookahead": 0},
        {"op": "num_cached_tokens", "seq": 3},
        {"op": "access", "seq": 1, "now": 1.0},
        {"op": "access", "seq": 2, "now": 2.0},
        {"op": "access", "seq": 3, "now": 3.0},
        {"op": "free", "seq": 1},
        {"op": "free", "seq": 2},
        {"op": "free", "seq": 3},
        {"op": "add_group", "group": "C", "seqs": [4], "prompt": list(range(100, 128))},
        {"op": "allocate", "group": "C"},
        {"op": "num_cached_tokens", "seq": 4},
    ],
}


#: The seed demo's first experiment as lockstep ops: four tokens fill one block of four; the fifth
#: token needs a second block (the reference V0 manager, blocks of 4, 8 GPU blocks).
SEED_FIFTH_TOKEN_TRACE: dict[str, Any] = {
    "semantics": "v0",
    "source": "the seed demo's first experiment (docs/seed-demo.md: one sequence, two placements) as lockstep "
              "ops; vLLM 0.10.2's V0 manager replays it identically",
    "config": {"block_size": 4, "num_gpu_blocks": 8, "num_cpu_blocks": 0, "watermark": 0.0,
               "sliding_window": None, "enable_caching": False},
    "ops": [
        {"op": "add_group", "group": "A", "seqs": [1], "prompt": [1, 2, 3, 4]},
        {"op": "allocate", "group": "A"},
        {"op": "compute", "seq": 1},
        {"op": "append_token", "seq": 1, "token": 5},
        {"op": "append_slots", "seq": 1, "lookahead": 0},
        {"op": "block_table", "seq": 1},
    ],
}
SEED_FIFTH_TOKEN_SLUG = "seed-demo-fifth-token"


@dataclass(frozen=True)
class TraceSpec:
    """A trace to explore: its page slug, a title, and the trace itself."""

    slug: str
    title: str
    trace: dict


def corpus_specs(paths: list[Path]) -> list[TraceSpec]:
    """Every trace of the corpus (``conformance.corpus.corpus()``), then the seed demo's two."""
    specs = []
    for path in paths:
        trace = load_trace(path)
        specs.append(TraceSpec(f"{path.parent.name}-{path.stem}".lower(), f"{path.parent.name}/{path.stem}", trace))
    specs.append(TraceSpec(SEED_FIFTH_TOKEN_SLUG, "seed demo: the fifth token", SEED_FIFTH_TOKEN_TRACE))
    specs.append(TraceSpec("seed-demo-workload", "seed demo: the V0 workload", SEED_DEMO_TRACE))
    return specs


# replay and the summaries live in conformance.explorer.steps; named here too for older callers.
__all__ = ["SEED_DEMO_TRACE", "SEED_FIFTH_TOKEN_SLUG", "SEED_FIFTH_TOKEN_TRACE", "TraceSpec", "corpus_specs",
           "op_summary", "outcome_summary", "replay"]
