"""Optional integrations with third-party libraries, each behind its own extra.

Nothing here is imported by ``import purgatory``: import the module you need
(``purgatory.contrib.prometheus``: install ``aio-purgatory[prometheus]``;
``purgatory.contrib.redis``, key events between processes: ``aio-purgatory[redis]``).
"""

__all__ = ()
