"""Damaging a segment file in place, the way a disk or a stray write would."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

Damage = Callable[[bytearray, int], None]


def flip_payload(raw: bytearray, at: int) -> None:
    """A bit of the batch's last byte (inside the CRC)."""
    size = struct.unpack_from(">i", raw, at + 8)[0] + 12
    raw[at + size - 1] ^= 0x01


def bad_magic(raw: bytearray, at: int) -> None:
    raw[at + 16] = 1


def bad_length(raw: bytearray, at: int) -> None:
    struct.pack_into(">i", raw, at + 8, 1 << 30)


DAMAGES = {"crc": flip_payload, "magic": bad_magic, "length": bad_length}


def damage_file(path: Path, damage: Damage, batch_number: int = 0) -> None:
    """Apply ``damage`` to the ``batch_number``-th batch of the log file at ``path``."""
    raw = bytearray(path.read_bytes())
    at = 0
    for _ in range(batch_number):
        at += struct.unpack_from(">i", raw, at + 8)[0] + 12
    damage(raw, at)
    with path.open("r+b") as f:  # in place: the broker's descriptor sees it
        f.write(raw)
