"""What kind of attention a KV-cache group serves, as far as page management cares.

A model's layers are partitioned into *KV-cache groups*; all layers of a group share one block
table per request. The page manager needs only two facts about a group: its block size, and
whether its layers attend to every earlier token (*full attention*) or only to the last
``window`` tokens (*sliding window*). A sliding-window layer can release pages that fell out of
its window -- the page manager replaces them by the null block -- and a prefix-cache hit for it
needs only the last ``window - 1`` tokens' pages, not the whole prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reference.blocks.errors import InvalidArgument


@dataclass(frozen=True)
class FullAttention:
    """Layers that attend to every earlier token."""

    block_size: int

    def __post_init__(self) -> None:
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise InvalidArgument(f"block_size must be a positive int, got {self.block_size!r}")


@dataclass(frozen=True)
class SlidingWindow:
    """Layers that attend to the last ``window`` tokens (the current one included)."""

    block_size: int
    window: int

    def __post_init__(self) -> None:
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise InvalidArgument(f"block_size must be a positive int, got {self.block_size!r}")
        if not isinstance(self.window, int) or self.window < 1:
            raise InvalidArgument(f"sliding window must be a positive int, got {self.window!r}")


GroupSpec = FullAttention | SlidingWindow


def hybrid_layout_problem(groups: Sequence[GroupSpec], enable_caching: bool, any_layout: bool,
                          needs_distinct_specs: bool = False,
                          checked_without_caching: bool = False, single_group: bool = False) -> str | None:
    """Why a release's hybrid coordinator refuses this list of groups, or None when it accepts it.

    Only several groups are checked, and only with prefix caching on (one group, or caching off,
    uses a coordinator without the check) unless the release checks them either way
    (``V1Policy.hybrid_layout_checked_without_caching``). A manager without a coordinator
    (``V1Policy.single_kv_cache_group``) refuses several groups outright. A restricted coordinator (``V1Policy.hybrid_groups_any_layout``
    false) needs exactly one kind of full-attention group and one other kind, and the
    full-attention group ids all before or all after the others. An unrestricted one may still
    need at least two distinct specs (``V1Policy.hybrid_needs_distinct_specs``).
    """
    if single_group and len(groups) > 1:
        return "the manager takes one KV-cache group only (no coordinator)"
    if (not enable_caching and not checked_without_caching) or len(groups) < 2:
        return None
    if any_layout:
        if needs_distinct_specs and len(set(groups)) < 2:
            return "the hybrid coordinator requires at least two attention groups (distinct specs)"
        return None
    full = [i for i, g in enumerate(groups) if isinstance(g, FullAttention)]
    other = [i for i, g in enumerate(groups) if not isinstance(g, FullAttention)]
    if len({groups[i] for i in full}) != 1 or len({groups[i] for i in other}) != 1:
        return "the hybrid coordinator needs exactly one kind of full-attention group and one other kind"
    if not (max(full) < min(other) or max(other) < min(full)):
        return "the hybrid coordinator needs the full-attention groups all before or all after the others"
    return None
