"""Producer and consumer load tools modelled on RocketMQ's benchmark (``python -m bench.load.producer|consumer``).

Both print a live view every second (TPS, average/p50/p99/max response time, failures) and a final JSON summary
with environment facts; ``--profile`` records the broker process with py-spy for the measured window. A run in which
no message succeeded exits 1 (its summary carries ``error``): it measured nothing.
"""
