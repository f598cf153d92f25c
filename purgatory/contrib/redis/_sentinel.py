"""Redis Sentinel: the bridge talks to whichever Redis the sentinels name as the primary.

A bridge given a ``redis+sentinel://`` URL (:func:`parse_sentinel_url`)::

    redis+sentinel://[[username]:password@]host[:port][,host[:port]...]/service_name[/db]

(the sentinels' addresses, port 26379 by default; the primary's name as the sentinels
know it, ``sentinel monitor <service_name> ...``; the credentials and the database of the
primary) reaches Redis through redis-py's asyncio Sentinel support: every connection
the side opens asks the sentinels for the primary's address first
(``Sentinel.discover_master``: ``SENTINEL MASTERS`` to each sentinel in turn, the first
that names a primary it does not consider down wins), then connects there.

Following a failover. When the primary dies, the side's connection fails as after a
restart of a single Redis, and the side retries on its schedule; while the sentinels
still name the dead primary the attempts are refused. The sentinels promote a replica,
and from the moment they name it (``+switch-master``) the next attempt, or the next
probe (every ``probe_ms``: the sentinels asked, then the named primary pinged), finds
it: the subscriber subscribes there and re-checks every watched key, the publisher
sends what it kept. A primary that is demoted while up (a manual ``SENTINEL FAILOVER``)
has its clients disconnected by the sentinels (``CLIENT KILL TYPE normal`` and
``pubsub``), and a command answered ``READONLY`` drops the connection too (redis-py):
either way the side reconnects to the new primary.

:class:`SentinelPrimary` holds one side's redis-py ``Sentinel``: its connections to
the sentinels stay open between attempts and probes (one query each, no connect), and
are closed with the side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import RedisError

from ._probe import answers

__all__ = ["SCHEME", "SentinelPrimary", "SentinelURL", "parse_sentinel_url"]

#: The scheme of a Sentinel URL
SCHEME = "redis+sentinel"
#: A sentinel's port when the URL gives none
SENTINEL_PORT = 26379


@dataclass(frozen=True, slots=True)
class SentinelURL:
    """What a ``redis+sentinel://`` URL says (see the module doc)."""

    sentinels: tuple[tuple[str, int], ...]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_sentinel_url(url: str) -> SentinelURL | None:
    """The Sentinel configuration of a ``redis+sentinel://`` URL; None for any other
    URL. ValueError, in one line, for a malformed one. O(len(url))."""
    prefix = SCHEME + "://"
    if not url.startswith(prefix):
        return None
    rest = url[len(prefix) :]
    if "?" in rest or "#" in rest:
        raise ValueError(f"a {SCHEME} URL takes no query or fragment: {url!r}")
    netloc, _, path = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, password = _credentials(userinfo)
    sentinels = tuple(_host_port(item, url) for item in hosts.split(","))
    name, _, db = path.partition("/")
    if not name:
        raise ValueError(f"a {SCHEME} URL names the primary's service: {SCHEME}://host:port/name")
    if db and not db.isdigit():
        raise ValueError(f"the database of a {SCHEME} URL is a number, not {db!r}")
    return SentinelURL(sentinels, unquote(name), int(db or 0), username, password)


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    if not userinfo:
        return None, None
    user, colon, password = userinfo.partition(":")
    return (unquote(user) or None), (unquote(password) if colon else None)


def _host_port(item: str, url: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if item.startswith("["):
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host or (port and not port.isdigit()):
        raise ValueError(f"a sentinel's address is host[:port], not {item!r} in {url!r}")
    return host, int(port or SENTINEL_PORT)


class SentinelPrimary:
    """One side's way to the primary: clients for it and probes of it, through one
    redis-py ``Sentinel`` (see the module doc).

    ``client_options`` go to the primary's connections (the URL's credentials and
    database over them); ``sentinel_options`` to the sentinels' (redis-py's
    ``sentinel_kwargs``: the sentinels' own credentials, TLS).
    """

    def __init__(
        self,
        url: SentinelURL,
        client_options: Mapping[str, Any],
        sentinel_options: Mapping[str, Any],
    ) -> None:
        self.url = url
        options = dict(client_options)
        options["db"] = url.db
        if url.username is not None:
            options["username"] = url.username
        if url.password is not None:
            options["password"] = url.password
        self._ping = not options.get("ssl", False)  # see _probe: no PING over TLS
        self._sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(url.sentinels), sentinel_kwargs=dict(sentinel_options), **options
        )

    def client(self) -> redis.asyncio.Redis:
        """A client whose connections go to the primary the sentinels name when each
        connects. O(1)."""
        client: redis.asyncio.Redis = self._sentinel.master_for(self.url.service_name)
        return client

    async def probe(self, timeout_ms: int) -> bool:
        """Do the sentinels name a primary, and does it answer a ``PING`` within
        ``timeout_ms``? (The sentinels' answers are bounded by their own socket
        timeouts.) Never raises for a network failure. O(sentinels)."""
        try:
            host, port = await self._sentinel.discover_master(self.url.service_name)
        except (RedisError, OSError):
            return False  # MasterNotFoundError included: no sentinel names a primary
        return await answers((str(host), int(port)), timeout_ms, ping=self._ping)

    async def aclose(self) -> None:
        """Close the connections to the sentinels. O(sentinels)."""
        for sentinel in self._sentinel.sentinels:
            try:
                await sentinel.aclose()
            except (RedisError, OSError):
                continue  # a sentinel that is gone already
