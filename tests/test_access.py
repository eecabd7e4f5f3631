"""Who may read what: the rule, access lists as written, and where a bad one is refused."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from superbiz.access import (
    EVERYONE,
    AccessListError,
    Reader,
    decode_access,
    encode_access,
    may_read,
    parse_access,
)
from superbiz.config import Settings, load_settings
from superbiz.exceptions import ConfigError, DocumentError
from superbiz.knowledge.documents.document import parse_document
from superbiz.knowledge.kb.access_rules import AccessRules, domain_lists

PAYMENTS = Reader.of_groups("ann", ["payments"])


@pytest.mark.parametrize(
    ("document", "domain", "reader", "expected"),
    [
        (None, None, PAYMENTS, True),  # no list anywhere: everyone
        (None, ("hr",), PAYMENTS, False),  # the domain's list
        (("payments",), ("hr",), PAYMENTS, True),  # the document's own list wins
        (("sre",), None, PAYMENTS, False),  # a list in an open domain
        ((EVERYONE,), ("hr",), PAYMENTS, True),  # a public document in a restricted domain
        ((), None, PAYMENTS, False),  # no group at all (a legacy value that did not read)
        (("sre",), ("hr",), Reader.everyone(), True),  # the unrestricted reader
        (None, ("hr",), Reader("nobody", frozenset()), False),
    ],
)
def test_a_documents_own_list_wins_over_its_domains(
    document: tuple[str, ...] | None,
    domain: tuple[str, ...] | None,
    reader: Reader,
    expected: bool,
) -> None:
    assert may_read(reader, document, domain) is expected


def test_access_lists_read_as_written_and_round_trip() -> None:
    assert parse_access("payments，sre; payments") == ("payments", "sre")
    assert parse_access(["a", 2024, " b "]) == ("a", "2024", "b")
    groups = ("sre", "payments", "支付组")
    assert set(decode_access(encode_access(groups)) or ()) == set(groups)
    assert encode_access(groups) == encode_access(tuple(reversed(groups)))
    assert decode_access(encode_access(None)) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([], "names no group"),
        ("", "names no group"),
        (None, "must be a list of group names, got NoneType"),
        ({"groups": ["a"]}, "must be a list of group names, got dict"),
        ([["a"]], "is a list"),
        ([True], "is a bool"),
        (["x" * 200], "at most 128"),
        (["a\u200bb"], "control character"),
        ([f"g{i}" for i in range(65)], "at most 64"),
    ],
)
def test_a_bad_access_list_is_refused_with_its_reason(value: object, says: str) -> None:
    with pytest.raises(AccessListError, match=says):
        parse_access(value)


def test_a_readers_groups_are_checked_and_star_is_no_group() -> None:
    with pytest.raises(AccessListError, match="no group a reader can be in"):
        Reader.of_groups("x", ["*"])
    assert Reader.everyone().unrestricted and not PAYMENTS.unrestricted
    assert Reader.of_groups("a", ["p"]).key == Reader.of_groups("b", ["p"]).key


def test_frontmatter_access_is_read_and_a_bad_one_refuses_the_document() -> None:
    doc = parse_document(
        b"---\ntitle: Recon\naccess: [payments, sre]\n---\n# Recon\ntext\n",
        PurePosixPath("payment/recon.md"),
    )
    assert doc.access == ("payments", "sre") and "access" not in doc.extra
    assert parse_document(b"# Open\ntext\n", PurePosixPath("a.md")).access is None
    for bad in ("access: []", "access:", "access: {team: x}", "access: [[a]]"):
        with pytest.raises(DocumentError) as refused:
            parse_document(f"---\n{bad}\n---\n# T\nx\n".encode(), PurePosixPath("p/x.md"))
        assert "frontmatter field 'access'" in str(refused.value)
        assert refused.value.path == "p/x.md"


def test_access_domains_are_checked_and_keep_their_names(tmp_path: Path) -> None:
    config = tmp_path / "superbiz.yaml"
    config.write_text(
        "access:\n  domains:\n    payment-ops: [payments]\n    Payment_Team: payments, sre\n",
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SUPERBIZ_CONFIG", str(config))
        settings = load_settings()
    assert settings.access.domains == {
        "payment-ops": ("payments",),
        "Payment_Team": ("payments", "sre"),
    }
    # the knowledge base names domains lower-case, spaces as hyphens; an underscore stays
    assert domain_lists(settings.access.domains) == {
        "payment-ops": ("payments",),
        "payment_team": ("payments", "sre"),
    }
    with pytest.raises(ConfigError, match=r"access\.domains\.hr: names no group"):
        load_settings(access={"domains": {"hr": []}})
    with pytest.raises(ConfigError, match="both name the domain 'hr'"):
        domain_lists({"hr": ("a",), "HR": ("b",)})


def test_a_readers_visibility_filters_by_domain_and_by_admitted_lists() -> None:
    rules = AccessRules.of(
        [
            ("hr/leave.md", "hr", None),
            ("hr/holidays.md", "hr", ("*",)),
            ("pay/recon.md", "pay", ("payments",)),
            ("pay/refund.md", "pay", None),
            ("pay/legacy.md", "pay", ()),
        ],
        {"hr": ("hr-team",)},
    )
    view = rules.view(PAYMENTS)
    assert view.domains == {"hr", "pay"}  # hr holds a public document
    visibility = view.visibility
    assert visibility is not None
    assert visibility.hidden == {"hr/leave.md", "pay/legacy.md"}
    assert visibility.denied_domains == {"hr"}
    assert visibility.admitted_lists == {encode_access(("*",)), encode_access(("payments",))}
    assert visibility.admits_chunk("pay", "") and not visibility.admits_chunk("hr", "")
    # a list no row holds yet (a document being written) admits nobody
    assert not visibility.admits_chunk("pay", encode_access(("payments", "new")))
    assert rules.view(Reader.everyone()).visibility is None
    assert not rules.may_read(PAYMENTS, "gone.md") and rules.may_read(Reader.everyone(), "gone.md")
    assert Settings().access.domains == {}
