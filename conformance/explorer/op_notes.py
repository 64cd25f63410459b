"""Which upstream notes and which reference function each lockstep op stands for.

An op of a trace is one scheduler call (``conformance/adapters/vllm_v1.py`` / ``vllm_v0.py`` say
which vLLM call each op makes). The explorer links every step to

* the annotation notes of the upstream function that call runs, at an annotated release
  (``annotations/v<release>/<path>.md``, a note named ``v<release>/<path>#<note id>``, the form
  ``see:`` lines use), and
* the reference function that reproduced it (a dotted name under ``reference/``).

:data:`OP_NOTES` holds the first, per semantics and annotated release; :data:`OP_REFERENCE` the
second. The ops in :data:`BOOKKEEPING` have neither: they are the adapters' own bookkeeping (a V0
sequence group is made, a token appended to a sequence, a prefill marked computed), which vLLM's
scheduler does without calling the block manager. ``tests/conformance/test_explore_notes.py`` checks that every note named here exists
and every reference name imports, so a renamed note or function fails a test.

The exercise questions link to :data:`QUESTION_NOTES`: the note that explains a kind of answer
(the free queue's order, reference counting; V1 names the step that changed a count: a prefix hit,
a new block or a free).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from upstream.releases import V0_RELEASE, V1_RELEASE, policy_name

_V1 = f"v{V1_RELEASE}/vllm/v1/core/"
_V0 = f"v{V0_RELEASE}/vllm/core/"

#: semantics -> annotated release -> op -> notes (``v<release>/<upstream path>#<note id>``), the
#: call's own note first.
OP_NOTES: dict[str, dict[str, dict[str, list[str]]]] = {
    "v1": {
        V1_RELEASE: {
            "add_request": [_V1 + "kv_cache_utils.py#kv_cache_utils.request_block_hasher",
                            _V1 + "kv_cache_utils.py#kv_cache_utils.hash_block_tokens"],
            "get_computed_blocks": [_V1 + "kv_cache_manager.py#kv_cache_manager.get_computed_blocks",
                                    _V1 + "kv_cache_coordinator.py#kv_cache_coordinator.unitary.find_longest_cache_hit",
                                    _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.full.find_longest_cache_hit",
                                    _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.swa.find_longest_cache_hit"],
            "allocate_slots": [_V1 + "kv_cache_manager.py#kv_cache_manager.allocate_slots",
                               _V1 + "kv_cache_manager.py#kv_cache_manager.allocate_slots.remove_skipped",
                               _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.swa.get_num_skipped_tokens",
                               _V1 + "kv_cache_manager.py#kv_cache_manager.allocate_slots.capacity_check",
                               _V1 + "kv_cache_manager.py#kv_cache_manager.allocate_slots.adopt_and_allocate",
                               _V1 + "block_pool.py#block_pool.get_new_blocks",
                               _V1 + "kv_cache_manager.py#kv_cache_manager.allocate_slots.cache"],
            "append_tokens": [_V1 + "kv_cache_utils.py#kv_cache_utils.request_block_hasher"],
            "preempt": [_V1 + "kv_cache_manager.py#kv_cache_manager.free",
                        _V1 + "block_pool.py#block_pool.free_blocks"],
            "free": [_V1 + "kv_cache_manager.py#kv_cache_manager.free",
                     _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.base.free",
                     _V1 + "block_pool.py#block_pool.free_blocks"],
            "reset_prefix_cache": [_V1 + "kv_cache_manager.py#kv_cache_manager.evict_and_reset",
                                   _V1 + "block_pool.py#block_pool.reset_prefix_cache"],
            "evict_blocks": [_V1 + "kv_cache_manager.py#kv_cache_manager.evict_and_reset",
                             _V1 + "block_pool.py#block_pool.evict_blocks"],
        },
    },
    "v0": {
        V0_RELEASE: {
            "num_cached_tokens": [_V0 + "block_manager.py#block_manager.get_num_cached_tokens",
                                  _V0 + "block/prefix_caching_block.py#prefix_caching_block.computed_blocks_tracker.get_num_cached_tokens"],
            "can_allocate": [_V0 + "block_manager.py#block_manager.can_allocate.required_blocks",
                             _V0 + "block_manager.py#block_manager.can_allocate.watermark"],
            "allocate": [_V0 + "block_manager.py#block_manager.allocate",
                         _V0 + "block_manager.py#block_manager.allocate_sequence",
                         _V0 + "block/block_table.py#block_table.allocate"],
            "can_append_slots": [_V0 + "block_manager.py#block_manager.can_append_slots"],
            "append_slots": [_V0 + "block_manager.py#block_manager.append_slots",
                             _V0 + "block/block_table.py#block_table.append_token_ids",
                             _V0 + "block/common.py#common.cow_tracker"],
            "fork": [_V0 + "block_manager.py#block_manager.fork",
                     _V0 + "block/block_table.py#block_table.fork"],
            "free": [_V0 + "block_manager.py#block_manager.free",
                     _V0 + "block/block_table.py#block_table.free"],
            "can_swap_out": [_V0 + "block_manager.py#block_manager.can_swap_out"],
            "swap_out": [_V0 + "block_manager.py#block_manager.swap_out"],
            "can_swap_in": [_V0 + "block_manager.py#block_manager.can_swap_in"],
            "swap_in": [_V0 + "block_manager.py#block_manager.swap_in"],
            "access": [_V0 + "block_manager.py#block_manager.access_all_blocks_in_seq"],
            "mark_computed": [_V0 + "block_manager.py#block_manager.mark_blocks_as_computed"],
            "common_computed": [_V0 + "block_manager.py#block_manager.get_common_computed_block_ids"],
            "reset_prefix_cache": [_V0 + "block_manager.py#block_manager.prefix_cache_controls"],
            "hit_rate": [_V0 + "block_manager.py#block_manager.prefix_cache_controls"],
            "num_free": [_V0 + "block_manager.py#block_manager.free_block_counts"],
            "block_table": [_V0 + "block_manager.py#block_manager.get_block_table"],
        },
    },
}

#: semantics -> the ops that are the adapters' own bookkeeping: no block-manager call, no note.
BOOKKEEPING: dict[str, frozenset[str]] = {"v0": frozenset({"add_group", "compute", "append_token"}),
                                          "v1": frozenset()}

_V1_MANAGER = "reference.blocks.v1.manager.KVCacheManager."
_V0_MANAGER = "reference.blocks.v0.manager.BlockSpaceManager."

#: semantics -> op -> the reference function the reference adapter calls for it.
OP_REFERENCE: dict[str, dict[str, str]] = {
    "v1": {op: _V1_MANAGER + name for op, name in {
        "add_request": "add_request", "get_computed_blocks": "get_computed_blocks",
        "allocate_slots": "allocate_slots", "append_tokens": "append_token_ids", "preempt": "preempt",
        "free": "free", "reset_prefix_cache": "reset_prefix_cache", "evict_blocks": "evict_blocks"}.items()},
    "v0": {op: _V0_MANAGER + name for op, name in {
        "num_cached_tokens": "get_num_cached_tokens", "can_allocate": "can_allocate", "allocate": "allocate",
        "can_append_slots": "can_append_slots", "append_slots": "append_slots", "fork": "fork", "free": "free",
        "can_swap_out": "can_swap_out", "swap_out": "swap_out", "can_swap_in": "can_swap_in",
        "swap_in": "swap_in", "access": "access_all_blocks_in_seq", "mark_computed": "mark_blocks_as_computed",
        "common_computed": "get_common_computed_block_ids", "reset_prefix_cache": "reset_prefix_cache",
        "hit_rate": "get_prefix_cache_hit_rate", "num_free": "get_num_free_gpu_blocks",
        "block_table": "get_block_table"}.items()},
}

#: semantics -> question kind -> the note that explains that kind of answer.
QUESTION_NOTES: dict[str, dict[str, str]] = {
    "v1": {"free_head": _V1 + "kv_cache_utils.py#kv_cache_utils.free_queue",
           "new_blocks": _V1 + "block_pool.py#block_pool.get_new_blocks",
           "no_new_blocks": _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.base.allocate_new_blocks.grow",
           "free_head_freed": _V1 + "block_pool.py#block_pool.free_blocks",
           "ref_hit": _V1 + "block_pool.py#block_pool.touch",
           "ref_new": _V1 + "block_pool.py#block_pool.get_new_blocks",
           "ref_free": _V1 + "block_pool.py#block_pool.free_blocks",
           "ref_window": _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.swa.get_num_skipped_tokens",
           "table_window": _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.swa.get_num_skipped_tokens",
           "new_blocks_after_hit": _V1 + "kv_cache_manager.py#kv_cache_manager.allocate_slots.adopt_and_allocate",
           "lookup_window": _V1 + "single_type_kv_cache_manager.py#single_type_kv_cache_manager.swa.find_longest_cache_hit"},
    "v0": {"free_head": _V0 + "block/naive_block.py#naive_block.allocate",
           "ref": _V0 + "block/common.py#common.ref_counter",
           "ref_fork": _V0 + "block/block_table.py#block_table.fork",
           "ref_cow": _V0 + "block/naive_block.py#naive_block.cow_block_if_not_appendable.copy",
           "ref_allocate": _V0 + "block/naive_block.py#naive_block.allocate",
           "ref_free": _V0 + "block/naive_block.py#naive_block.free",
           "table_allocate": _V0 + "block/block_table.py#block_table.allocate_blocks_for_token_ids",
           "table_append": _V0 + "block/block_table.py#block_table.ensure_num_empty_slots",
           "table_copy": _V0 + "block/naive_block.py#naive_block.cow_block_if_not_appendable.copy",
           "copies": _V0 + "block/naive_block.py#naive_block.cow_block_if_not_appendable.copy"},
}

_TARGET = re.compile(r"^v(?P<version>[0-9]+\.[0-9]+\.[0-9]+)/(?P<path>[^#\s]+)#(?P<id>[a-z0-9_.-]+)$")


@dataclass(frozen=True)
class NoteRef:
    """One upstream note: the release, the upstream file and the note id."""

    version: str
    path: str
    note_id: str

    @property
    def target(self) -> str:
        return f"v{self.version}/{self.path}#{self.note_id}"


def note_ref(target: str) -> NoteRef:
    """``v0.33.0/vllm/v1/core/block_pool.py#block_pool.touch`` as a :class:`NoteRef`."""
    match = _TARGET.match(target)
    if not match:
        raise ValueError(f"{target!r} is not 'v<release>/<upstream path>#<note id>'")
    return NoteRef(match["version"], match["path"], match["id"])


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"[0-9]+", version)[:3])


def trace_release(trace: dict) -> str:
    """The vLLM release a trace was recorded at: its config's policy (V0 without one: 0.10.2)."""
    policy = trace.get("config", {}).get("policy") or (policy_name(V0_RELEASE) if trace.get("semantics") == "v0" else "")
    return policy.lstrip("v")


def notes_release(semantics: str, release: str) -> str | None:
    """The annotated release whose notes stand for ``release``: itself when annotated, else the
    newest annotated release not after it, else the oldest one (None when the semantics has none)."""
    annotated = sorted(OP_NOTES.get(semantics, {}), key=_version_key)
    if not annotated:
        return None
    if release in annotated:
        return release
    if release:
        earlier = [r for r in annotated if _version_key(r) <= _version_key(release)]
        if earlier:
            return earlier[-1]
    return annotated[0]


def op_notes(semantics: str, release: str, op_name: str) -> list[NoteRef]:
    """The notes of the upstream call behind ``op_name``, at the annotated release for ``release``."""
    at = notes_release(semantics, release)
    return [note_ref(t) for t in OP_NOTES.get(semantics, {}).get(at or "", {}).get(op_name, [])]


def question_note(semantics: str, kind: str) -> NoteRef | None:
    """The note explaining a question of ``kind`` (None where :data:`QUESTION_NOTES` names none)."""
    target = QUESTION_NOTES.get(semantics, {}).get(kind)
    return None if target is None else note_ref(target)


def all_note_refs() -> list[NoteRef]:
    """Every note named by this module (for the test that they exist)."""
    targets = [t for releases in OP_NOTES.values() for ops in releases.values() for ts in ops.values() for t in ts]
    targets += [t for kinds in QUESTION_NOTES.values() for t in kinds.values()]
    return [note_ref(t) for t in dict.fromkeys(targets)]
