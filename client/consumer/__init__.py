"""Consumers: the push consumer (:mod:`client.consumer.push`) and the lite pull consumer
(:mod:`client.consumer.lite_pull`), with the parts they share: queue allocation, rebalance, process queues and
offset stores."""
