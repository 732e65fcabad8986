"""Run by test_tls.py in a child process: the official 5.x client with ``tls_enable=True`` sends and receives one
message. gRPC reads its trusted roots from ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (set by the test to its self-signed
certificate) once per process, hence the child. Prints the received body."""

from __future__ import annotations

import sys

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Producer, SimpleConsumer

from tests.proxy.official import make_message


def main(endpoint: str) -> None:
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
    producer = Producer(config, ("Tls",), tls_enable=True)
    producer.startup()
    receipt = producer.send(make_message("Tls", b"over tls"))
    consumer = SimpleConsumer(config, "G-tls", {"Tls": FilterExpression()}, await_duration=5, tls_enable=True)
    consumer.startup()
    got = []
    for _ in range(5):
        got += consumer.receive(16, 15)
        if got:
            break
    for msg in got:
        consumer.ack(msg)
    consumer.shutdown()
    producer.shutdown()
    print("RESULT", receipt.message_id, *(m.body.decode() for m in got), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
