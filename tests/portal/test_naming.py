import pytest

from portal.naming import dns_name


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("gpu-portal", "urgent"), "gpu-portal-urgent"),
        (("Team_A", "h100"), "team-a-h100"),
        (("", "x"), "x"),
    ],
)
def test_dns_name_joins_and_sanitises(parts, expected):
    assert dns_name(*parts) == expected


def test_long_names_are_truncated_with_a_stable_hash_suffix():
    long_a = dns_name("q", "a" * 80)
    long_b = dns_name("q", "a" * 79 + "b")
    assert len(long_a) == 63 and len(long_b) == 63
    assert long_a != long_b
    assert long_a == dns_name("q", "a" * 80)
