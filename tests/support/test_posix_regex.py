"""RE2 patterns rewritten to POSIX extended syntax, refused where POSIX has no equivalent,
and matched whole by the C library's regexec."""

import pytest

from ember.errors import OpNotSupportedError
from ember.support.posix_regex import check, from_re2, full_match


@pytest.mark.parametrize(
    ("re2", "posix"),
    [
        (r"www\.[\w.-]+\.com", r"www\.[[:alnum:]_.-]+\.com"),
        (r"[\w.\-]{0,25}", r"[[:alnum:]_.-]{0,25}"),
        (r"\d+\s\D", r"[[:digit:]]+[[:space:]][^[:digit:]]"),
        (r"(?:ab)+?c*?", r"(ab)+c*"),
        (r"[]a]", r"[]a]"),
        (r"[^\]x]", r"[^]x]"),
        (r"\bword\b", r"\bword\b"),
    ],
)
def test_rewrites(re2: str, posix: str) -> None:
    assert from_re2(re2) == posix
    check(posix)


@pytest.mark.parametrize("pattern", [r"\pL", r"(a)\1", r"(?i)abc", r"[\W]", r"[ab"])
def test_refuses_what_posix_cannot_say(pattern: str) -> None:
    with pytest.raises(OpNotSupportedError, match="POSIX"):
        from_re2(pattern)


def test_check_names_regcomps_complaint() -> None:
    with pytest.raises(OpNotSupportedError, match="regcomp"):
        check("a(")


def test_full_match_is_whole_string() -> None:
    pattern = from_re2(r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)")
    got = full_match(pattern, ["account@gmail.com", "account@hotmail.com", " a@yahoo.com", ""])
    assert got.tolist() == [True, False, True, False]
    assert full_match("a|ab", ["ab", "a", "abc"]).tolist() == [True, True, False]
