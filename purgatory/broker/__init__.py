"""A broker's core built on the purgatory: partition logs with Kafka's offset index,
replication with an ISR and a high watermark, DelayedProduce and DelayedFetch, and
the traces of every delayed operation."""
