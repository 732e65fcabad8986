"""White-address ranges load exactly where RocketMQ's ``RemoteAddressStrategyFactory.RangeRemoteAddressStrategy``
constructor does. IPv4 ranges need exactly four parts (``AclUtils.verify`` -> ``isScope``: ``strArray.length != 4``
raises "Netaddress examine scope Exception"): a shorter or longer one fails its file's load, so it white-lists nothing
(such patterns white-listed whole /8 or /16 networks before). IPv6 ranges are read as RocketMQ reads them: a ``::``
before the range is expanded as ``AclUtils.v6ipProcess`` does (such patterns failed their whole file's load before),
and ``AclUtils.IPv6AddressCheck``'s shapes are refused. A range RocketMQ builds that can match nothing loads (it
failed its whole file before) and answers as RocketMQ's ``match``: false, or, where that throws, a refusal of the
request with the Java exception. Numbers read as ``Integer.parseInt`` reads them. Found by reviews."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.acl.manager import AclDenied, AclFiles, AclManager
from broker.acl.plain_config import Account
from broker.acl.remote_address import AddressPatternError, address_matcher
from broker.embedded import EmbeddedCluster
from remoting.client import RemotingClient
from remoting.codec.acl_signing import SessionCredentials, sign
from remoting.codec.codes import RequestCode, ResponseCode
from remoting.codec.command import RemotingCommand, request
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


def _manager_white_listing(home: Path, pattern: str) -> AclManager:
    """Load a plain_acl.yml of an account white-listed by ``pattern`` and another one; both must load."""
    acl_file = home / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir(parents=True)
    acl_file.write_text(
        f"accounts:\n  - {{accessKey: white-account, secretKey: white-secret, whiteRemoteAddress: '{pattern}'}}\n"
        "  - {accessKey: other-account, secretKey: other-secret}\n"
    )
    manager = AclManager(AclFiles(home))
    manager.load()
    loaded = manager.account("white-account") is not None and manager.account("other-account") is not None
    assert loaded, f"{pattern!r} failed the file"
    return manager


def _account_white_listed_by(home: Path, pattern: str) -> Account:
    account = _manager_white_listing(home, pattern).account("white-account")
    assert account is not None
    return account


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
    account = _account_white_listed_by(tmp_path, pattern)
    assert all(account.white(ip) for ip in matching)
    assert not any(account.white(ip) for ip in not_matching)


@pytest.mark.parametrize(
    "pattern", ["1050:*:5", "1:2:3-4:5", "1-2:*", "1:2:3-*", "1:2:1-10000", "1:zz:3:*", "1.zz.3.*", "1.2.*.4.5"]
)
def test_ranges_rocketmq_refuses_are_refused(pattern: str) -> None:
    """Where ``RangeRemoteAddressStrategy``'s constructor throws: ``*`` not last, ``-`` outside the last group or the
    one before a final ``*`` (``AclUtils.IPv6AddressCheck``); no group before those two (``v6ipProcess``'s
    ``substring``); a range that does not parse or passes ``ffff``; a part before the range's but the last not a number
    in scope, or other than four IPv4 parts (``AclUtils.verify``)."""
    with pytest.raises(AddressPatternError, match="Exception"):
        address_matcher(pattern)


@pytest.mark.parametrize(
    "pattern",
    [
        "1::zz:*",  # AclUtils.verify checks only the groups before the range's but the last; the head has 00ZZ
        "*.*.1.10",  # the head is "*."
        "1:2:3:4:5:6:7:8:9:*",  # a head longer than any address
    ],
)
def test_ranges_rocketmq_builds_but_that_match_nothing_load_and_match_nothing(
    tmp_path: Path, pattern: str, caplog: pytest.LogCaptureFixture
) -> None:
    """RangeRemoteAddressStrategy (4.9.8) builds these without an exception, so their file loads and its other
    accounts work; they failed the whole plain_acl.yml before (at a broker start every account in it was lost). Its
    ``match`` answers false for every address, and the load says so."""
    account = _account_white_listed_by(tmp_path, pattern)
    addresses = ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:9", "::1", "::5", "1.2.3.4", "1.2.3.0", "1.2.3.5", "9.1.1.10"]
    assert not any(account.white(ip) for ip in addresses)
    assert f"white address {pattern} loads but matches no address" in caplog.text


def _check(manager: AclManager, ip: str) -> None:
    manager.check(ip, "white-account", lambda secret: secret == "white-secret", RequestCode.SEND_MESSAGE, {})


_NPE = "java.lang.NullPointerException, "
_OUT_OF_RANGE = "java.lang.StringIndexOutOfBoundsException: "


@pytest.mark.parametrize(
    ("pattern", "throwing", "unmatched", "java_text"),
    [
        # no range after the first part: RocketMQ's head stays null, and startsWith(null) throws for every address
        ("::1-200", ["::1", "1.2.3.4"], [], _NPE),
        ("1.2.3.4*", ["1.2.3.4", "::5"], [], _NPE),
        ("1.2.3.0-0", ["1.2.3.0", "127.0.0.1"], [], _NPE),
        ("1.2.3.4.*", ["9.1.1.10"], [], _NPE),
        # eight groups before the range: the group after them is past the end of the one address they are
        ("1:2:3:4:5:6:7:8:*", ["1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:9", "1.2.3.4"], _OUT_OF_RANGE),
        ("1:2:3:4:5:6:7:8:1-2", ["1:2:3:4:5:6:7:8"], ["1:2:3:4:5:6:7:9", "::1"], _OUT_OF_RANGE),
        # an empty head: RocketMQ reads the first two octets of an IPv4 address as the range's number
        (
            ":1-2:*",
            ["1.2.3.4"],
            ["::1", "1:2:3:4:5:6:7:8"],
            'java.lang.NumberFormatException: For input string: "1.2", ',
        ),
    ],
)
def test_ranges_whose_rocketmq_match_throws_refuse_every_request_checked_against_them(
    tmp_path: Path, pattern: str, throwing: list[str], unmatched: list[str], java_text: str
) -> None:
    """Where ``RangeRemoteAddressStrategy.match`` throws, the exception leaves ``PlainPermissionManager.validate``:
    the request is refused (SYSTEM_ERROR with that exception as remark) whatever its signature, not checked on. The
    account's other addresses match nothing (``:1-2:*``: RocketMQ white-lists every IPv6 address, ours none)."""
    manager = _manager_white_listing(tmp_path, pattern)
    for ip in throwing:
        with pytest.raises(AclDenied) as refused:
            _check(manager, ip)
        assert refused.value.remark.startswith(java_text), refused.value.remark
    account = manager.account("white-account")
    assert account is not None and not any(account.white(ip) for ip in unmatched)


def test_range_numbers_are_read_as_java_parse_int_reads_them() -> None:
    """``Integer.parseInt`` takes any Unicode decimal digit, and in base 16 the fullwidth ``a``-``f`` too
    (``Character.digit``): RocketMQ builds these ranges, so their file loads."""
    decimal = address_matcher("1.2.3.\u0661-5")  # ARABIC-INDIC DIGIT ONE
    assert decimal("1.2.3.3") and not decimal("1.2.3.9")
    hexadecimal = address_matcher("1:2:3:4:5:6:7:\uff21-\uff46")  # FULLWIDTH A, FULLWIDTH SMALL F
    assert hexadecimal("1:2:3:4:5:6:7:c") and not hexadecimal("1:2:3:4:5:6:7:9")


async def _create_topic_under(
    tmp_path: Path, acl: str, topic: str, credentials: SessionCredentials
) -> tuple[RemotingCommand, bool]:
    """The answer to a signed UPDATE_AND_CREATE_TOPIC of ``topic`` by a broker whose ``plain_acl.yml`` is ``acl``,
    and whether the topic was created."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(acl)
    async with EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(home), **SMALL_STORE) as cluster:
        fields = {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": "1",
            "writeQueueNums": "1",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
        signed = sign(request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), credentials)
        async with RemotingClient() as client:
            answer = await client.invoke(cluster.broker_addr, signed, 5)
        return answer, cluster.controller.context.topics.get(topic) is not None


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
    credentials = SessionCredentials("loose-white", "not-the-secret")
    answer, created = await _create_topic_under(tmp_path, ACL, "Evil", credentials)
    assert not created, "topic created by a wrongly signed request"
    assert answer.code == ResponseCode.SYSTEM_ERROR and "AclException" in (answer.remark or ""), answer


HEADLESS_GLOBAL_WHITE = """\
globalWhiteRemoteAddresses:
  - 10.9.9.9
  - 127.0.0.1*
accounts:
  - accessKey: admin-key
    secretKey: 12345678
    admin: true
"""


async def test_a_global_white_range_rocketmq_builds_without_a_head_refuses_a_correctly_signed_request(
    tmp_path: Path,
) -> None:
    """``127.0.0.1*`` has no range, so RocketMQ's match of it throws (NullPointerException) for a client the entries
    before it did not match: the broker answers SYSTEM_ERROR with that exception, whatever the signature."""
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(HEADLESS_GLOBAL_WHITE)
    async with EmbeddedCluster(tmp_path / "c", acl_enable=True, rocketmq_home=str(home), **SMALL_STORE) as cluster:
        admin = SessionCredentials("admin-key", "12345678")
        fields = {"topic": "Created", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
        async with RemotingClient() as client:
            answer = await client.invoke(
                cluster.broker_addr, sign(request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), admin), 5
            )
        assert answer.code == ResponseCode.SYSTEM_ERROR, answer
        assert (answer.remark or "").startswith("java.lang.NullPointerException, "), answer.remark
        assert cluster.controller.context.topics.get("Created") is None


@pytest.mark.parametrize("pattern", ["192.168.1.1-" + "9" * 5000, "192.168.1-" + "1" * 5000 + ".*"])
def test_a_bound_of_thousands_of_digits_is_refused_as_rocketmq_refuses_it(pattern: str) -> None:
    """Integer.parseInt throws past int's range: a bound of 5,000 digits is a pattern RocketMQ refuses
    (AddressPatternError), not Python's digit-limit ValueError."""
    with pytest.raises(AddressPatternError):
        address_matcher(pattern)


def test_thousands_of_leading_zeros_before_a_bound_are_read_as_java_reads_them() -> None:
    """Integer.parseInt takes any number of leading zeros: 5,000 zeros before a 1 are a bound of 1."""
    matcher = address_matcher("192.168.1." + "0" * 5000 + "1-5")
    assert matcher("192.168.1.3") and not matcher("192.168.1.7")


@pytest.mark.parametrize("zero", ["\uff10", "\u0660"])  # FULLWIDTH DIGIT ZERO, ARABIC-INDIC DIGIT ZERO
def test_leading_non_ascii_zeros_before_a_bound_are_read_as_java_reads_them(zero: str) -> None:
    """``Character.digit`` reads any Unicode decimal zero as 0, so ``Integer.parseInt`` takes any number of them before
    a bound: twelve of them before a 1 are a bound of 1, not a number past ``int``'s range."""
    matcher = address_matcher("192.168.1." + zero * 12 + "1-5")
    assert matcher("192.168.1.3") and not matcher("192.168.1.7")
    hexadecimal = address_matcher("1:2:3:4:5:6:7:" + zero * 12 + "a-f")
    assert hexadecimal("1:2:3:4:5:6:7:c") and not hexadecimal("1:2:3:4:5:6:7:9")


LISTED_WHITE = """\
accounts:
  - accessKey: listed-key
    secretKey: 12345678
    whiteRemoteAddress: 10.9.9.9,10.9.9.8,
    admin: true
"""


@pytest.mark.parametrize("pattern", ["10.9.9.9,10.9.9.8,", ",10.9.9.9", "10.9.9.9,,10.9.9.8"])
def test_an_address_list_with_an_empty_item_loads_as_string_utils_split_drops_it(pattern: str) -> None:
    """``RemoteAddressStrategyFactory`` splits a list with ``StringUtils.split(remoteAddr, ",")``, which drops empty
    items: a trailing, leading or doubled comma still loads (ours refused the pattern, failing its file)."""
    match = address_matcher(pattern)
    assert match("10.9.9.9") and not match("10.9.9.7")


async def test_an_account_whose_address_list_ends_with_a_comma_is_known(tmp_path: Path) -> None:
    """The file of an account white-listing ``10.9.9.9,10.9.9.8,`` loads, as in RocketMQ: a correctly signed request
    of the account from elsewhere is checked as usual and admitted (ours refused the file: "No acl config")."""
    credentials = SessionCredentials("listed-key", "12345678")
    answer, created = await _create_topic_under(tmp_path, LISTED_WHITE, "Listed", credentials)
    assert answer.code == ResponseCode.SUCCESS, answer
    assert created


@pytest.mark.parametrize("pattern", [" *", "* ", " 127.0.0.1", "127.0.0.1 ", "127.0.0.1, 10.0.0.1", "192.168.1.{1, 2}"])
def test_blanks_around_an_address_are_refused_as_rocketmq_refuses_them(pattern: str) -> None:
    """RocketMQ compares ``*`` exactly and validates each address of a list or a single address untrimmed
    (``RemoteAddressStrategyFactory``; ``InetAddressValidator`` refuses a blank), so these fail their file's load
    (``" *"`` reaches ``RangeRemoteAddressStrategy``, whose ``analysis(strArray, 1)`` runs past its one part)."""
    with pytest.raises(AddressPatternError):
        address_matcher(pattern)


@pytest.mark.parametrize("pattern", [" 10.0.0.*", "10.0.0.* ", "10.0.0.1-5 "])
def test_blanks_around_a_range_are_read_as_rocketmq_trims_its_parts(pattern: str) -> None:
    """``RangeRemoteAddressStrategy`` trims each part it reads (``analysis``, ``AclUtils.isScope``), so a blank around
    a range loads."""
    match = address_matcher(pattern)
    assert match("10.0.0.1") and not match("10.0.1.1")


QUOTED_STAR = """\
accounts:
  - accessKey: spaced-star
    secretKey: 12345678
    whiteRemoteAddress: ' *'
    admin: true
"""


async def test_a_quoted_star_with_a_blank_does_not_white_list_every_address(tmp_path: Path) -> None:
    """``' *'`` is no match-all pattern in RocketMQ (the comparison is exact): its file fails to load, so a wrongly
    signed admin request with the account's key is refused (ours trimmed it to ``*``: every address white-listed,
    nothing signed needed)."""
    credentials = SessionCredentials("spaced-star", "not-the-secret")
    answer, created = await _create_topic_under(tmp_path, QUOTED_STAR, "Starred", credentials)
    assert not created, "topic created by a wrongly signed request"
    assert answer.code == ResponseCode.SYSTEM_ERROR and "No acl config for spaced-star" in (answer.remark or "")
