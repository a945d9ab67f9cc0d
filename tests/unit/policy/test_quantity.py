from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.policy.model import parse_quantity
from webhook.policy.quantity import QuantityError, quantity_milli, quantity_value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("0", Fraction(0)),
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(1024**2)),
        ("2Gi", Fraction(2 * 1024**3)),
        ("1Ti", Fraction(1024**4)),
        ("1Pi", Fraction(1024**5)),
        ("1Ei", Fraction(1024**6)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1.5e-3", Fraction(3, 2000)),
        ("12n", Fraction(12, 10**9)),
        ("5u", Fraction(5, 10**6)),
        ("+2", Fraction(2)),
        ("-2", Fraction(-2)),
        (3, Fraction(3)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_quantity_is_parsed_exactly(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text", ["", "abc", "1.2.3", "1 Gi", "1KB", "1ki", "Gi", "1e", "--1", True]
)
def test_malformed_quantity_is_rejected(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("100m", 100, 1),
        ("0.1", 100, 1),
        ("1", 1000, 1),
        ("0.0001", 1, 1),
        ("2.5", 2500, 3),
        ("1Mi", 1024**2 * 1000, 1024**2),
        ("1500m", 1500, 2),
    ],
)
def test_milli_and_unit_values_round_up_like_resource_quantity(
    text: str, milli: int, value: int
) -> None:
    assert quantity_milli(text) == milli
    assert quantity_value(text) == value


@given(
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from(["", "k", "M", "G", "Ki", "Mi", "Gi", "m"]),
)
def test_integer_quantities_round_trip(n: int, suffix: str) -> None:
    mult = {"": 1, "k": 1000, "M": 10**6, "G": 10**9, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    expected = Fraction(n, 1000) if suffix == "m" else Fraction(n * mult[suffix])
    assert parse_quantity(f"{n}{suffix}") == expected
