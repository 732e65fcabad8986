"""The README's producer + consumer example, taken from README.md itself and run against the embedded cluster.

The README block defines ``main(namesrv)`` and ends with ``print(anyio.run(main, "127.0.0.1:9876"))``; the test runs
everything but that last line, then awaits ``main`` against a cluster on port 0, under both backends.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.threaded_cluster import ThreadedCluster

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> Any:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    (code,) = [block for block in blocks if "demo-producer" in block]
    *body, last = code.rstrip().splitlines()
    assert last == 'print(anyio.run(main, "127.0.0.1:9876"))'
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(body), str(README), "exec"), namespace)
    return namespace["main"]


@pytest.mark.anyio
async def test_readme_example_sends_and_consumes(cluster: ThreadedCluster) -> None:
    main = readme_example()
    with anyio.fail_after(60):
        assert await main(cluster.namesrv_addr) == [b"hello rocketrio"]
