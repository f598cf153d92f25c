"""The encoding of key events: one channel, one message per key.

Every bridge of a deployment subscribes to one channel (``channel``, default
:data:`DEFAULT_CHANNEL`; one per purgatory kind, e.g. ``"watch:keys"``), and a message
is one key:

=====================================  =================================================
key                                    message bytes
=====================================  =================================================
``str`` (and its subclasses)           ``b"s"`` + the key in UTF-8
``bytes`` (and its subclasses)         ``b"b"`` + the key
:class:`~purgatory.TopicPartition`     ``b"t"`` + the partition in ASCII decimal + ``b":"``
                                       + the topic in UTF-8 (``TopicPartition("t", 3)``:
                                       ``b"t3:t"``)
=====================================  =================================================

Keys decode as plain ``str``, ``bytes`` and ``TopicPartition``, so a subclass key must
hash and compare equal to its plain value (``enum.StrEnum`` members do). Any other key
(an ``int``, a tuple) is refused with ``TypeError`` before anything is sent. A message
that decodes to nothing (another producer on the channel) is dropped by the subscriber.
One channel for every key keeps Redis's work per event at one channel lookup and one
write per subscriber (``PUBLISH`` is O(subscribers)), with no ``PSUBSCRIBE`` pattern
matching and no subscription churn as keys come and go.
"""

from __future__ import annotations

from collections.abc import Hashable

from purgatory import TopicPartition

__all__ = ["DEFAULT_CHANNEL", "decode_key", "encode_key"]

#: The channel bridges use unless told otherwise.
DEFAULT_CHANNEL = "purgatory:key-events"

_STR, _BYTES, _TP = b"s"[0], b"b"[0], b"t"[0]


def encode_key(key: Hashable) -> bytes:
    """The message announcing ``key`` (see the table of this module). O(len(key)).

    TypeError for a key that is not ``str``, ``bytes`` or ``TopicPartition``;
    UnicodeEncodeError for a ``str`` with lone surrogates.
    """
    if isinstance(key, str):
        return b"s" + key.encode()
    if isinstance(key, bytes):
        return b"b" + key
    if isinstance(key, TopicPartition):
        return b"t%d:%s" % (key.partition, key.topic.encode())
    raise TypeError(
        f"key {key!r} of type {type(key).__name__} cannot cross processes: "
        "use a str, bytes or TopicPartition key"
    )


def decode_key(data: bytes) -> Hashable:
    """The key a message announces: the inverse of :func:`encode_key`. O(len(data)).

    ValueError (UnicodeDecodeError included) for bytes no ``encode_key`` produces.
    """
    if not data:
        raise ValueError("empty key event")
    tag = data[0]
    if tag == _STR:
        return data[1:].decode()
    if tag == _BYTES:
        return data[1:]
    if tag == _TP:
        partition, sep, topic = data[1:].partition(b":")
        if not sep:
            raise ValueError(f"topic-partition event without ':': {data[:40]!r}")
        return TopicPartition(topic.decode(), int(partition))
    raise ValueError(f"unknown key event tag {data[:1]!r}")
