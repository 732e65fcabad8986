"""One-command comparison of rocketrio against real brokers on this machine: ``python -m bench.compare``."""
