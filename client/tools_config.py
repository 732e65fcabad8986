"""``conf/tools.yml``: the keys RocketMQ's ``mqadmin`` signs with (``acl/src/main/java/org/apache/rocketmq/acl/common/
AclUtils.java``, ``getAclRPCHook``): lower-case ``accessKey`` and ``secretKey`` under ``$ROCKETMQ_HOME/conf``. A file
that is missing, unreadable, not YAML, or without both keys means "do not sign"; nothing here raises."""

from __future__ import annotations

import logging
from pathlib import Path

import yaml

log = logging.getLogger(__name__)


def tools_credentials(home: str) -> tuple[str, str] | None:
    """``(accessKey, secretKey)`` from ``<home>/conf/tools.yml``, or None."""
    if not home:
        return None
    path = Path(home).expanduser() / "conf" / "tools.yml"
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
    if not isinstance(document, dict):
        return None
    access_key, secret_key = document.get("accessKey"), document.get("secretKey")
    if access_key is None or secret_key is None or not str(access_key).strip() or not str(secret_key).strip():
        return None
    return str(access_key), str(secret_key)
