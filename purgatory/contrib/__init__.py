"""Optional integrations with third-party libraries, each behind its own extra.

Nothing here is imported by ``import purgatory``: import the module you need
(``purgatory.contrib.prometheus``: install ``aio-purgatory[prometheus]``).
"""

__all__ = ()
