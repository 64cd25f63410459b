"""The content hash that lets prefix caching recognise a page it has seen before.

A full page is identified not by its own tokens alone but by *everything before it*: its hash mixes
whether it is the first page, the hash of the previous page, its tokens and an optional extra hash
(the LoRA adapter id, for instance). Two pages therefore share a hash only if they share the whole
prefix up to and including themselves, which is what makes reusing them safe.

The hash is Python's built-in ``hash`` of a tuple, exactly as vLLM v0.10.2 computes it
(``v0.10.2 vllm/core/block/prefix_caching_block.py:927-953``). Two things in that tuple vary from
process to process. The "no previous page" sentinel is ``hash('None')``, a *string* hash, which
Python randomises per process unless ``PYTHONHASHSEED`` is fixed. And the extra hash is ``None``
for every page without a LoRA adapter; before Python 3.12 ``hash(None)`` is derived from the
object's address, which ``PYTHONHASHSEED`` does not touch. With address randomisation on (the
Linux default), that address moves between processes wherever ``None`` is loaded at a random
place: in a position-independent interpreter (such as a pyenv build made by a compiler that
defaults to position-independent executables) and in any that loads ``libpython`` as a shared
library. It stays put where ``None`` lies in an executable that is not position-independent
(Debian 12's ``/usr/bin/python3``). With address randomisation off it repeats only between
processes started alike: a shared ``libpython`` still lands at an address that depends on the
libraries mapped before it and on the stack limit, so a preloaded library moves it, and so does a
stack limit large enough to move the kernel's mmap base (on Linux, about 128 MiB or more, or
``unlimited``). Ints and bools hash the same in every process of a 64-bit build. Hashes
thus agree with vLLM's byte for byte inside one process (which is how the lockstep conformance runs); across processes
they agree only under the same ``PYTHONHASHSEED`` and, on Python 3.11 and older, for pages without
an adapter only where ``None`` has the same address in both processes: the same executable that
is not position-independent, or, with address randomisation off, processes started alike.

What differs between releases (the first page's parent, whether an extra-hash slot ends the tuple)
is a :class:`PageHashing`, made from the release's policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from reference.blocks.policies import V0Policy

# vLLM uses the *string* 'None' (v0.10.2 prefix_caching_block.py:75, :977) so that the sentinel is not the
# constant hash(None) of Python >= 3.12.
NONE_HASH: int = hash("None")


def hash_block_tokens(is_first_block: bool, prev_block_hash: Optional[int],
                      token_ids: Sequence[int], extra_hash: Optional[int] = None) -> int:
    """Hash one full page given the hash of the page before it, as vLLM 0.6.5 and later do.

    The caller passes the first page's parent (:attr:`PageHashing.first_parent`). A ``None``
    parent is hashed as given: vLLM 0.10.2's classmethod replaces it by its sentinel for a first
    page, but none of its callers passes ``None`` there, and :meth:`PageHashing.page_hash` is
    the reference's counterpart of those callers."""
    return hash((is_first_block, prev_block_hash, *token_ids, extra_hash))


@dataclass(frozen=True)
class PageHashing:
    """How one release hashes pages: two fields of its :class:`~reference.blocks.policies.V0Policy`."""

    # The parent hash of a sequence's first page, which doubles as the marker "the previous page
    # has no hash yet": NONE_HASH (from vLLM 0.7.2) or None (V0Policy.str_none_parent_hash).
    first_parent: Optional[int]
    # Whether the hashed tuple ends with the page's extra hash, None without one (from vLLM 0.6.5;
    # V0Policy.extra_hash_in_page_hash). Before, the tuple ends with the last token.
    extra_slot: bool

    @classmethod
    def of(cls, policy: V0Policy) -> PageHashing:
        return cls(NONE_HASH if policy.str_none_parent_hash else None, policy.extra_hash_in_page_hash)

    def block_hash(self, is_first_block: bool, prev_block_hash: Optional[int],
                   token_ids: Sequence[int], extra_hash: Optional[int] = None) -> int:
        """Hash one full page given the hash of the page before it (the first page: ``first_parent``)."""
        if self.extra_slot:
            return hash_block_tokens(is_first_block, prev_block_hash, token_ids, extra_hash)
        # v0.6.4 vllm/core/block/prefix_caching_block.py:822-842: no extra hash at all.
        return hash((is_first_block, prev_block_hash, *token_ids))

    def page_hash(self, is_first_block: bool, prev_block_hash: Optional[int], token_ids: Sequence[int],
                  extra_hash: Optional[int]) -> Optional[int]:
        """A full page's hash given what the page before it answered for its hash (the rule of
        :attr:`.block.Block.content_hash`): None when that page has none, i.e. answered the marker
        ``first_parent``; a previous page that is not full answers None, which is hashed on with."""
        if is_first_block:
            return self.block_hash(True, self.first_parent, token_ids, extra_hash)
        if prev_block_hash == self.first_parent:
            return None
        return self.block_hash(False, prev_block_hash, token_ids, extra_hash)


#: vLLM 0.10.2's hashing (the reference's default).
V0_10_2_HASHING = PageHashing(NONE_HASH, extra_slot=True)


def hash_hex(value: Optional[int]) -> Optional[str]:
    """A hash as 16 hex digits (two's complement), for messages and JSON; None stays None."""
    if value is None:
        return None
    return format(value & 0xFFFF_FFFF_FFFF_FFFF, "016x")
