"""IPv4 range patterns need exactly four parts, as in RocketMQ (``RemoteAddressStrategyFactory``'s
``RangeRemoteAddressStrategy`` -> ``AclUtils.verify`` -> ``isScope``: ``strArray.length != 4`` raises "Netaddress
examine scope Exception"): a shorter or longer one fails its file's load, so it white-lists nothing (such patterns
white-listed whole /8 or /16 networks before). IPv6 ranges are read as ``RangeRemoteAddressStrategy`` reads them: a
``::`` before the range is expanded as ``AclUtils.v6ipProcess`` does (such patterns failed their whole file's load
before), and ``AclUtils.IPv6AddressCheck``'s shapes are refused. Found by reviews."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.acl.manager import AclFiles, AclManager
from broker.acl.remote_address import AddressPatternError, address_matcher
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import request
from tests.conftest import SMALL_STORE


@pytest.mark.parametrize("pattern", ["192.168.*", "192.*", "127.0.*", "1.2.3.4-5.6", "10.*.*.*.*"])
def test_range_patterns_without_four_parts_are_refused(pattern: str) -> None:
    with pytest.raises(AddressPatternError, match="Netaddress examine scope Exception"):
        address_matcher(pattern)


@pytest.mark.parametrize(
    ("pattern", "ip"),
    [("10.*.*.*", "10.9.8.7"), ("192.168.1-3.*", "192.168.2.1"), ("1050:0:0:0:5:600:300c:*", "1050::5:600:300c:1")],
)
def test_four_part_and_ipv6_ranges_still_match(pattern: str, ip: str) -> None:
    assert address_matcher(pattern)(ip)


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("1050::5:600:300c:*", ["1050:0:0:0:5:600:300c:1"], ["1050:0:0:0:5:600:300d:1", "1050::600:300c:1"]),
        # AclUtils.IPv6AddressCheck's own comment: 'format like "2::ac5:78:1-200:*" ... is legal'
        ("2::ac5:78:1-200:*", ["2:0:0:0:ac5:78:100:1", "2::ac5:78:1:ffff"], ["2:0:0:0:ac5:78:201:1"]),
        ("::5:*", ["::5:7"], ["::6:7"]),
    ],
)
def test_ipv6_ranges_written_with_double_colon_load_and_match_as_in_rocketmq(
    tmp_path: Path, pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir(parents=True)
    acl_file.write_text(
        f"accounts:\n  - {{accessKey: v6-account, secretKey: v6-secret, whiteRemoteAddress: '{pattern}'}}\n"
        "  - {accessKey: other-account, secretKey: other-secret}\n"
    )
    manager = AclManager(AclFiles(tmp_path))
    manager.load()
    account = manager.account("v6-account")
    assert account is not None, "the whole plain_acl.yml failed to load"
    assert all(account.white(ip) for ip in matching)
    assert not any(account.white(ip) for ip in not_matching)


@pytest.mark.parametrize("pattern", ["1050:*:5", "1:2:3-4:5", "1-2:*", "::1-200", "1:2:3:4:5:6:7:8:*", "1::zz:*"])
def test_ipv6_ranges_rocketmq_refuses_are_refused(pattern: str) -> None:
    """``*`` not last, ``-`` outside the last group (or the one before a final ``*``), no group before the range, a
    head of eight groups or not hexadecimal."""
    with pytest.raises(AddressPatternError, match="Exception"):
        address_matcher(pattern)


ACL = """\
accounts:
  - accessKey: admin-key
    secretKey: 12345678
    admin: true
  - accessKey: loose-white
    secretKey: 12345678
    whiteRemoteAddress: 127.0.*
    admin: true
"""


async def test_a_short_range_pattern_does_not_white_list_the_loopback_network(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    async with EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(home), **SMALL_STORE) as cluster:
        wrong = SessionCredentials("loose-white", "not-the-secret")
        fields = {
            "topic": "Evil",
            "defaultTopic": "TBW102",
            "readQueueNums": "1",
            "writeQueueNums": "1",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
        async with RemotingClient() as client:
            answer = await client.invoke(
                cluster.broker_addr, sign(request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), wrong), 5
            )
        assert cluster.controller.context.topics.get("Evil") is None, "topic created by a wrongly signed request"
        assert answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or ""), answer
