"""Block hashing: byte-identical to vLLM's formulas, recomputed here with hashlib/pickle/cbor2."""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import replace

import cbor2
import pytest

from conformance.changelog import v1_policy_at
from reference.blocks.v1.hashing import (
    BlockHasher,
    LoRAIdentity,
    block_extra_keys,
    derive_none_hash,
    hash_function,
    sha256_cbor,
    sha256_pickle,
    split_group_key,
    with_group_id,
)

# The policies of the two pinned releases, computed by the change log.
V1_V0_10_2 = v1_policy_at("0.10.2")
V1_V0_33_0 = v1_policy_at("0.33.0")


def oracle_pickle(value) -> bytes:
    return hashlib.sha256(pickle.dumps(value, protocol=5)).digest()


def oracle_cbor(value) -> bytes:
    return hashlib.sha256(cbor2.dumps(value, canonical=True)).digest()


ORACLES = {"sha256": oracle_pickle, "sha256_cbor": oracle_cbor}


@pytest.mark.parametrize("value", [b"seed", (b"\x00" * 32, (1, 2, 3, 4), None), (b"p", (0,), (("cache_salt", "s"),)), "0"])
def test_hash_functions_match_independent_digests(value):
    """Catches: a wrong serialisation (pickle protocol, non-canonical CBOR) that changes every hash byte."""
    assert sha256_pickle(value) == oracle_pickle(value)
    assert sha256_cbor(value) == oracle_cbor(value)
    assert sha256_pickle(value) != sha256_cbor(value)


@pytest.mark.parametrize("name", ["sha256", "sha256_cbor"])
def test_chained_hashes_known_answer(name):
    """Catches: a chain that hashes tokens without the parent, seeds the first block wrongly, or drops partial blocks."""
    oracle = ORACLES[name]
    none_hash = oracle("0")
    hasher = BlockHasher(4, hash_function(name), none_hash, V1_V0_33_0)
    tokens = [5, 6, 7, 8, 9, 10, 11, 12, 13]
    first = oracle((none_hash, (5, 6, 7, 8), None))
    second = oracle((first, (9, 10, 11, 12), None))
    assert hasher.new_hashes([], tokens) == [first, second]
    assert hasher.new_hashes([first], tokens) == [second]  # incremental extension
    assert hasher.new_hashes([first, second], tokens) == []


@pytest.mark.parametrize("policy", [V1_V0_33_0, V1_V0_10_2])
def test_none_hash_with_pythonhashseed(policy):
    """Catches: ignoring PYTHONHASHSEED, which both releases hash into NONE_HASH."""
    assert derive_none_hash(sha256_pickle, policy, "42") == oracle_pickle("42")
    assert derive_none_hash(sha256_cbor, policy, "42") == oracle_cbor("42")


def test_none_hash_default_seed_per_policy():
    """Catches: v0.33.0's fixed 'vllm-none-hash' seed confused with v0.10.2's raw random bytes."""
    entropy = bytes(range(32))
    assert derive_none_hash(sha256_pickle, V1_V0_33_0, None, lambda n: entropy) == oracle_pickle("vllm-none-hash")
    assert derive_none_hash(sha256_pickle, V1_V0_10_2, None, lambda n: entropy) == entropy


def test_extra_keys_tagged_and_bare():
    """Catches: salt on later blocks, wrong key order (LoRA before salt), or the wrong spelling per release."""
    lora = LoRAIdentity("ad", 7, "/p")
    assert block_extra_keys(V1_V0_33_0, 0, "s", lora) == (("lora", "ad", "/p"), ("cache_salt", "s"))
    assert block_extra_keys(V1_V0_10_2, 0, "s", lora) == (7, "s")
    assert block_extra_keys(V1_V0_33_0, 4, "s", None) is None
    assert block_extra_keys(V1_V0_33_0, 4, "s", lora) == (("lora", "ad", "/p"),)
    assert block_extra_keys(V1_V0_33_0, 0, "", None) is None  # an empty salt adds nothing


def test_salted_chain_known_answer():
    """Catches: a salt that is not mixed into the first block, or that leaks into later blocks' extra keys."""
    none_hash = oracle_pickle("0")
    hasher = BlockHasher(2, sha256_pickle, none_hash, V1_V0_33_0)
    first = oracle_pickle((none_hash, (1, 2), (("cache_salt", "t"),)))
    second = oracle_pickle((first, (3, 4), None))
    assert hasher.new_hashes([], [1, 2, 3, 4], cache_salt="t") == [first, second]
    assert hasher.new_hashes([], [1, 2, 3, 4])[0] != first


def test_group_key_packing():
    """Catches: a group id packed little-endian or in fewer than four bytes, which breaks BlockHashWithGroupId keys."""
    digest = oracle_pickle("x")
    key = with_group_id(digest, 258)
    assert key == digest + bytes([0, 0, 1, 2])
    assert split_group_key(key) == (digest, 258)


def test_policy_field_alone_changes_hash():
    """Catches: extra-key spelling decided by something other than the tagged_extra_keys field."""
    bare = replace(V1_V0_33_0, tagged_extra_keys=False)
    hashers = [BlockHasher(2, sha256_pickle, b"n" * 32, p) for p in (V1_V0_33_0, bare)]
    tagged, untagged = (h.new_hashes([], [1, 2], cache_salt="s") for h in hashers)
    assert tagged != untagged
    assert untagged == [oracle_pickle((b"n" * 32, (1, 2), ("s",)))]
