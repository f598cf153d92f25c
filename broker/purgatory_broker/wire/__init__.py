"""A Kafka-wire example broker: unmodified Kafka clients produce and consume through the
purgatory.

    purgatory-broker-wire --port 9092 --partitions 3 --follower-lag-ms 20

(or ``python -m purgatory_broker.wire``; with the ``kafka`` extra installed). Every acks=all
produce waits in a DelayedProduce until the simulated followers replicate it
(or answers REQUEST_TIMED_OUT when the request's timeout passes); every
long-poll fetch waits in a DelayedFetch until the high watermark brings
``min_bytes`` (or ``max_wait`` passes). Group consumers join, sync, heartbeat and
commit through the broker's group coordinator: rebalances wait in its join
purgatory, sessions in its heartbeat purgatory.

Modules, one job each:

* :mod:`._codec`: kafka-python's ``kafka.protocol`` classes, the supported
  versions, frame helpers;
* :mod:`._handlers`: the server logic, one synchronous handler per API over
  :class:`purgatory_broker.broker.Broker` (its simulated followers and ISR check are
  :class:`purgatory_broker.broker.Followers`, the simulation's);
* :mod:`._groups`: the consumer-group APIs over
  :class:`purgatory_broker.broker.GroupCoordinator` (FindCoordinator names this broker);
* :mod:`._idempotence`: producer ids and the dedupe of retried batches;
* :mod:`._shortage`: running out of file descriptors, logged once per shortage;
* :mod:`._accept`: the accept loop, which pauses while descriptors are short;
* :mod:`._connection`: one connection: replies in request order, bad input
  closes only it; idle, frame-wait and back-pressure limits;
* :mod:`._server`: the broker, its listener, connections and timer;
* :mod:`._thread`: the broker on its own loop in a thread, for blocking clients.
"""

from ._codec import SUPPORTED_APIS, ApiSpec
from ._config import DEFAULT_PORT, WireConfig
from ._connection import WireStats
from ._handlers import TOPIC_NAME, CloseConnection, RequestHandler
from ._idempotence import ProducerIdAllocator, ProducerStateTable
from ._server import KafkaWireBroker
from ._thread import BrokerThread

__all__ = [
    "DEFAULT_PORT",
    "SUPPORTED_APIS",
    "TOPIC_NAME",
    "ApiSpec",
    "BrokerThread",
    "CloseConnection",
    "KafkaWireBroker",
    "ProducerIdAllocator",
    "ProducerStateTable",
    "RequestHandler",
    "WireConfig",
    "WireStats",
]
