"""Message semantics through the broker and our client: retries and DLQ, delay levels, timers, transactions,
filters, ordering."""
