"""Which shard channel carries a key's events on a Redis Cluster: one rule for every process.

On a Redis Cluster a bridge spreads its events over ``shards`` shard channels (sharded
pub/sub: ``SPUBLISH`` / ``SSUBSCRIBE``, Redis >= 7), so that an event costs the work of the
one primary that owns its channel's hash slot, not the whole cluster's (a plain
``PUBLISH`` on a cluster is broadcast over the cluster bus to every node). The rule:

1. a key's message is :func:`~._encoding.encode_key`'s bytes (``"orders"``: ``b"sorders"``);
2. its shard is ``CRC16(message) mod shards``, CRC16 being Redis's own (CRC-16/XMODEM,
   ``binascii.crc_hqx(message, 0)``; ``CRC16(b"123456789")`` is 0x31C3);
3. shard ``i``'s channel is ``f"{channel}:{i}{{{tag}}}"``: the hash tag ``{tag}`` makes Redis
   hash only ``tag``, and ``tag`` is the smallest non-negative integer, in decimal, whose
   slot (``CRC16(str(tag)) mod 16384``) is the middle slot of the ``i``-th of ``shards``
   equal slot ranges, ``(2 i + 1) * 16384 // (2 shards)``.

Worked example, ``channel="watch:keys"``, ``shards=3``: the target slots are 2730, 8192 and
13653, the middles of the three ranges ``redis-cli --cluster create`` gives three primaries
(0-5460, 5461-10922, 10923-16383), so each primary serves one shard channel; the channels
are ``watch:keys:0{...}``, ``watch:keys:1{...}``, ``watch:keys:2{...}`` with the tags
:func:`shard_channels` computes. With ``shards`` a multiple of the primaries and the slots
split evenly, each primary serves ``shards / primaries`` channels; any other ``shards``
works, less evenly. Every process of a deployment must use the same ``channel`` and
``shards`` (a publisher with another ``shards`` announces keys on channels nobody reads).

Computing the tags: a sweep over 0, 1, 2, ... until every target slot has its tag (about
16,384 x ln(shards) CRCs, a few milliseconds; cached per ``shards``).
"""

from __future__ import annotations

import functools
from binascii import crc_hqx

__all__ = ["SLOTS", "key_slot", "shard_channels", "shard_of"]

#: Hash slots of a Redis Cluster.
SLOTS = 16384


def key_slot(name: bytes) -> int:
    """Redis Cluster's hash slot of a key or channel name (its hash tag's, if it has
    one: the bytes between the first ``{`` and the next ``}``, when not empty).
    O(len(name))."""
    start = name.find(b"{")
    if start >= 0:
        end = name.find(b"}", start + 1)
        if end > start + 1:
            name = name[start + 1 : end]
    return crc_hqx(name, 0) % SLOTS


def shard_of(message: bytes, shards: int) -> int:
    """The shard of an encoded key (rule 2 of the module doc). O(len(message))."""
    return crc_hqx(message, 0) % shards


@functools.cache
def _tags(shards: int) -> tuple[int, ...]:
    """The tag of each shard (rule 3). O(16384 x ln(shards)) CRCs, once per ``shards``."""
    targets = {(2 * i + 1) * SLOTS // (2 * shards): i for i in range(shards)}
    tags = [-1] * shards
    left = len(targets)
    tag = 0
    while left:
        i = targets.get(crc_hqx(b"%d" % tag, 0) % SLOTS)
        if i is not None and tags[i] < 0:
            tags[i] = tag
            left -= 1
        tag += 1
    return tuple(tags)


def shard_channels(channel: str, shards: int) -> list[str]:
    """The shard channels of ``channel``, shard 0 first (rule 3 of the module doc).

    ValueError if ``shards`` is not an int in 1..16384 or ``channel`` holds a brace (its
    own hash tag would override the shard's). O(shards) once the tags are cached.
    """
    if not isinstance(shards, int) or isinstance(shards, bool) or not 1 <= shards <= SLOTS:
        raise ValueError(f"shards must be an int from 1 to {SLOTS}, got {shards!r}")
    if "{" in channel or "}" in channel:
        raise ValueError(f"a cluster channel cannot contain braces, got {channel!r}")
    return [f"{channel}:{i}{{{tag}}}" for i, tag in enumerate(_tags(shards))]
