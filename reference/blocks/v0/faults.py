"""V0-specific refusals that the shared exception hierarchy does not name.

:class:`UpstreamInvariantBroken` is special: it is raised where vLLM v0.10.2 itself fails an
internal assertion in a state that ordinary calls can reach (for example the LRU evictor handing
back a stale heap entry whose hash is no longer cached). The reference reproduces the *same* failure
at the *same* point so that lockstep runs stay comparable; unlike a refusal of bad input, the state
is then whatever vLLM leaves behind, and the manager should be discarded.
"""

from __future__ import annotations

from reference.blocks.errors import BlockManagerError


class UpstreamInvariantBroken(BlockManagerError):
    """vLLM's own bookkeeping contradicts itself here; the reference fails the same way."""

    category = "upstream_invariant_broken"


class NullBlockMisuse(BlockManagerError):
    """The sliding-window null page was asked to be swapped, forked or written."""

    category = "null_block_misuse"
