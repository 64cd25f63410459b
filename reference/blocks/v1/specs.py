"""What kind of attention a KV-cache group serves, as far as page management cares.

A model's layers are partitioned into *KV-cache groups*; all layers of a group share one block
table per request. The page manager needs only two facts about a group: its block size, and
whether its layers attend to every earlier token (*full attention*) or only to the last
``window`` tokens (*sliding window*). A sliding-window layer can release pages that fell out of
its window -- the page manager replaces them by the null block -- and a prefix-cache hit for it
needs only the last ``window - 1`` tokens' pages, not the whole prefix.
"""

from __future__ import annotations

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
