"""purgatory-broker: a Kafka broker's core built on the purgatory library, and its apps.

The distribution ``purgatory-broker`` holds what ``aio-purgatory`` (the library,
package :mod:`purgatory`) does not: an application over its public API. Each
part is a package of its own:

* :mod:`purgatory_broker.broker`: the broker's core (Kafka's ReplicaManager, one
  broker: partitions, logs on disk, DelayedProduce and DelayedFetch, consumer
  groups), with its storage in :mod:`purgatory_broker.broker.storage`;
* :mod:`purgatory_broker.sim`: the broker simulation (the README's main job);
* :mod:`purgatory_broker.wire`: the Kafka-wire broker real clients talk to
  (``python -m purgatory_broker.wire``);
* :mod:`purgatory_broker.analytics`: the Spark pipeline over the traces;
* :mod:`purgatory_broker.tracing`: the trace schema the broker writes and the
  pipeline reads; :mod:`purgatory_broker.cli`: what its command lines share.

Its programs are console scripts too (``pyproject.toml``): ``purgatory-broker-simulate``
(the simulation), ``purgatory-broker-wire`` (the wire broker) and
``purgatory-broker-analytics`` (the pipeline), each also ``python -m`` its package; their
usage and error lines name them as they were started (:func:`.cli.program_name`).
``__version__`` is the distribution's
version, which moves with the library's: it requires ``aio-purgatory~=`` its own
version (``broker_tests/test_release.py`` checks both).

Unix only: the logs read and write with ``os.pread``/``os.pwrite`` and the
programs install signal handlers. Importing this package first applies
``PURGATORY_NO_EXTENSIONS`` to its own compiled modules (:mod:`._loading`).
"""

from . import _loading  # noqa: F401 - first: PURGATORY_NO_EXTENSIONS picks the pure modules
from ._version import __version__

__all__ = ["__version__"]
