"""Prefix-cache block hashing, byte-identical to vLLM's V1 hashes.

Why hash at all? Two requests whose prompts start with the same tokens produce the same keys and
values for that prefix, so a full block computed for one can be reused by the other. To find
such blocks quickly, every *full* block of a request gets a content hash, and a pool-wide map
goes from hash to block.

What is hashed? Not the block's tokens alone -- the same 16 tokens mean different KV depending
on everything before them. So the hash is *chained*: block ``i``'s hash covers the triple

    (hash of block i-1, or NONE_HASH for the first block, tuple(tokens of block i), extra_keys)

and therefore fingerprints the whole prefix. ``extra_keys`` carries request-level facts that
change the KV without changing the tokens: the LoRA adapter, multimodal inputs (omitted here)
and the *cache salt*, a per-tenant string mixed into the first block only so that tenants
cannot probe each other's cache. How those keys are spelled differs between releases
(:attr:`V1Policy.tagged_extra_keys`, :attr:`V1Policy.lora_extra_key`).

The triple is serialised and digested with SHA-256, either through ``pickle`` (protocol 5,
vLLM's ``sha256``) or canonical CBOR (``sha256_cbor``, language independent). The seed of the
chain, NONE_HASH, follows :attr:`V1Policy.none_hash_default_seed` (and, in older releases,
:attr:`V1Policy.none_hash_at_import` and :attr:`V1Policy.none_hash_seed_inverted`); before 0.8.3
(:attr:`V1Policy.builtin_hash_only`) Python's builtin ``hash`` is the only hash and the chain
starts at ``hash('None')``.

In the pool a hash is keyed together with its KV-cache group: the 4-byte big-endian group id is
appended to the digest, so the same prefix cached by two groups (e.g. a full-attention and a
sliding-window group) lives under two distinct keys.

Before 0.10.2 (:attr:`V1Policy.int_block_hashes`) a hash was not a digest alone but an
:class:`IntBlockHash`: the digest as an int (``int.from_bytes`` of the pickle's SHA-256, or
Python's builtin ``hash``) together with the block's token ids and extra keys, so that two blocks
whose digests collide still get different keys; the pool key was the pair
(:class:`IntBlockHash`, group id). :func:`group_key_function` gives the pool key of either form.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from reference.blocks.errors import InvalidArgument
from reference.blocks.policies import V1Policy

HashFunction = Callable[[Any], bytes]


def sha256_pickle(value: Any) -> bytes:
    """SHA-256 of the highest-protocol pickle of ``value`` (vLLM's ``sha256``)."""
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor(value: Any) -> bytes:
    """SHA-256 of the canonical CBOR encoding of ``value`` (vLLM's ``sha256_cbor``)."""
    import cbor2  # imported on use: only this hash needs it

    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


def sha256_pickle_int(value: Any) -> int:
    """:func:`sha256_pickle` read as a big-endian int (vLLM's ``sha256`` before 0.10.2)."""
    return int.from_bytes(sha256_pickle(value), byteorder="big")


HASH_FUNCTIONS: dict[str, HashFunction] = {"sha256": sha256_pickle, "sha256_cbor": sha256_cbor}
# Before 0.10.2: vLLM's ``caching_hash_algo`` / ``prefix_caching_hash_algo`` ("builtin" is
# Python's own ``hash``, which for strings depends on the process's PYTHONHASHSEED).
INT_HASH_FUNCTIONS: dict[str, Callable[[Any], int]] = {"builtin": hash, "sha256": sha256_pickle_int}


def hash_function_names(policy: V1Policy) -> tuple[str, ...]:
    """The hash functions the release of ``policy`` offers, by vLLM's names."""
    if policy.builtin_hash_only:
        return ("builtin",)
    return tuple(INT_HASH_FUNCTIONS if policy.int_block_hashes else HASH_FUNCTIONS)


def hash_function(name: str, policy: V1Policy | None = None) -> HashFunction:
    """The hash function vLLM calls ``name`` in the release of ``policy`` (default: the digest form)."""
    # The int family (before 0.10.1; only "builtin" before 0.8.3) or the digest family.
    table: dict[str, Callable[[Any], Any]] = (
        INT_HASH_FUNCTIONS if policy is not None and policy.int_block_hashes else HASH_FUNCTIONS)
    if policy is not None and policy.builtin_hash_only:
        table = {"builtin": hash}
    try:
        return table[name]
    except KeyError:
        raise InvalidArgument(f"unknown hash function {name!r}; known: {sorted(table)}") from None


def derive_none_hash(
    hash_fn: HashFunction,
    policy: V1Policy,
    pythonhashseed: str | None,
    entropy: Callable[[int], bytes] = os.urandom,
) -> Any:
    """The parent hash of every first block (bytes; an int where ``policy.int_block_hashes``).

    ``pythonhashseed`` is the value of the PYTHONHASHSEED environment variable (None when unset);
    it is passed explicitly so that the caller, not the process environment, decides.
    ``entropy(32)`` supplies the random bytes the older releases use when no seed is set.
    """
    if policy.builtin_hash_only:
        # Before 0.8.3 there is no NONE_HASH: the first block's parent is the string hash of
        # 'None', which depends only on this process's own hash seed.
        return hash("None")
    if policy.int_block_hashes:
        if policy.none_hash_seed_inverted:
            # 0.8.3 and 0.8.4 test PYTHONHASHSEED the wrong way round: random when it is set,
            # sha256(None) (its value, unset) when it is not.
            return int.from_bytes(bytes(entropy(32)), byteorder="big") if pythonhashseed is not None \
                else sha256_pickle_int(None)
        if pythonhashseed is None:
            return int.from_bytes(bytes(entropy(32)), byteorder="big")
        # Before 0.10.0 NONE_HASH is set when kv_cache_utils is imported, with sha256 whatever
        # hash function the manager is later given.
        return sha256_pickle_int(pythonhashseed) if policy.none_hash_at_import else hash_fn(pythonhashseed)
    if pythonhashseed is not None:
        return hash_fn(pythonhashseed)
    if policy.none_hash_default_seed is None:
        return bytes(entropy(32))
    return hash_fn(policy.none_hash_default_seed)


@dataclass(frozen=True)
class LoRAIdentity:
    """What the page manager needs to know about a LoRA adapter: its name, id and path."""

    name: str
    int_id: int
    path: str = ""


def block_extra_keys(
    policy: V1Policy, start_token: int, cache_salt: str | None, lora: LoRAIdentity | None
) -> tuple | None:
    """The extra keys of the block starting at token ``start_token`` (None when there are none)."""
    keys: list[Any] = []
    if lora is not None:
        keys.append({"tagged": ("lora", lora.name, lora.path), "name": lora.name,
                     "int_id": lora.int_id}[policy.lora_extra_key])
    if start_token == 0 and cache_salt:
        keys.append(("cache_salt", cache_salt) if policy.tagged_extra_keys else cache_salt)
    return tuple(keys) if keys else None


def hash_block_tokens(
    hash_fn: HashFunction,
    none_hash: bytes,
    parent_hash: bytes | None,
    token_ids: Sequence[int],
    extra_keys: tuple | None = None,
) -> bytes:
    """The chained hash of one full block."""
    parent = parent_hash if parent_hash else none_hash
    return hash_fn((parent, tuple(token_ids), extra_keys))


class IntBlockHash(NamedTuple):
    """A block hash before 0.10.2: the int digest, and the token ids and extra keys it covers."""

    hash_value: int
    token_ids: tuple[int, ...]
    extra_keys: tuple | None = None


class IntBlockHashWithGroup(NamedTuple):
    """The pool key of an :class:`IntBlockHash` in one KV-cache group (before 0.10.2)."""

    block_hash: IntBlockHash
    group_id: int


def hash_int_block_tokens(
    hash_fn: Callable[[Any], int],
    none_hash: int,
    parent_hash: IntBlockHash | None,
    token_ids: Sequence[int],
    extra_keys: tuple | None = None,
) -> IntBlockHash:
    """The chained hash of one full block before 0.10.2 (the parent enters as its int digest).

    A parent digest of 0 counts as no parent, as in vLLM (``if not parent_block_hash``).
    """
    parent = parent_hash.hash_value if parent_hash is not None else None
    tokens = tuple(token_ids)
    return IntBlockHash(hash_fn((parent if parent else none_hash, tokens, extra_keys)), tokens, extra_keys)


def with_group_id(block_hash: bytes, group_id: int) -> bytes:
    """The pool key of ``block_hash`` in KV-cache group ``group_id``."""
    return block_hash + group_id.to_bytes(4, "big", signed=False)


def split_group_key(key: bytes) -> tuple[bytes, int]:
    """Undo :func:`with_group_id`: (block hash, group id)."""
    return key[:-4], int.from_bytes(key[-4:], "big", signed=False)


def bare_key(block_hash: Any, group_id: int) -> Any:
    """The pool key before vLLM 0.9.1 (one group, no group id): the block hash itself."""
    return block_hash


def group_key_function(policy: V1Policy) -> Callable[[Any, int], Any]:
    """How the release of ``policy`` keys a block hash with its group id in the pool."""
    if not policy.pool_key_has_group_id:
        return bare_key
    return IntBlockHashWithGroup if policy.int_block_hashes else with_group_id


def hash_text(value: Any) -> str | None:
    """A block hash, pool key or NONE_HASH of either form as text (None stays None).

    Digests are hex; an :class:`IntBlockHash` (or vLLM's ``BlockHash``, a tuple of the same
    fields) is written as the plain tuple it is, with bytes in hex, and an int NONE_HASH as its
    decimal repr. Any other value is read as bytes (a release's own bytes-like hash type).
    Equal keys give equal text.
    """
    if value is None:
        return None
    if isinstance(value, (tuple, int)):
        return repr(_plain(value))
    return bytes(value).hex()


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, bytes):
        return value.hex()
    return value


@dataclass(frozen=True)
class BlockHasher:
    """Computes a request's block hashes as its token list grows."""

    block_size: int
    hash_fn: HashFunction
    none_hash: bytes
    policy: V1Policy

    def new_hashes(
        self,
        known: Sequence[bytes],
        token_ids: Sequence[int],
        cache_salt: str | None = None,
        lora: LoRAIdentity | None = None,
        end: int | None = None,
    ) -> list[bytes]:
        """Hashes of the full blocks of ``token_ids[:end]`` beyond the ``len(known)`` already hashed."""
        out: list = []
        parent = known[-1] if known else None
        start = len(known) * self.block_size
        stop = len(token_ids) if end is None else min(end, len(token_ids))
        # The two hash families (int before 0.10.1, digests after) share one calling shape.
        chain: Callable[..., Any] = hash_int_block_tokens if self.policy.int_block_hashes else hash_block_tokens
        while start + self.block_size <= stop:
            extra = block_extra_keys(self.policy, start, cache_salt, lora)
            parent = chain(self.hash_fn, self.none_hash, parent, token_ids[start : start + self.block_size], extra)
            out.append(parent)
            start += self.block_size
        return out
