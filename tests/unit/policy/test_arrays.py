import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from webhook.policy.arrays import MAX_TABLE, member_mask
from webhook.policy.model import AffinityTerm, WeightedAffinityTerm
from webhook.policy.selectors import LabelSelector
from webhook.policy.term_index import TermTable

ints = st.integers(min_value=-3, max_value=60)


@given(st.lists(ints, max_size=80), st.sets(ints, max_size=8))
def test_member_mask_answers_as_np_isin(values: list[int], wanted: set[int]) -> None:
    arr = np.array(values, dtype=np.int64)
    assert member_mask(arr, wanted).tolist() == np.isin(arr, list(wanted)).tolist()


def test_member_mask_over_a_range_too_wide_for_a_table() -> None:
    arr = np.array([0, MAX_TABLE * 4, 7], dtype=np.int64)
    assert member_mask(arr, [MAX_TABLE * 4, 7]).tolist() == [False, True, True]


def _term(selector: dict[str, object]) -> AffinityTerm:
    return AffinityTerm(
        frozenset({"ns"}), LabelSelector(nothing=True), LabelSelector.parse(selector), "zone"
    )


labels = st.dictionaries(st.sampled_from("abc"), st.sampled_from("xyz"), max_size=3)
selectors = st.one_of(
    st.builds(lambda m: {"matchLabels": m}, labels),
    st.builds(
        lambda k, vs, op: {"matchExpressions": [{"key": k, "operator": op, "values": vs}]},
        st.sampled_from("abc"),
        st.lists(st.sampled_from("xyz"), min_size=1, max_size=2, unique=True),
        st.sampled_from(["In", "NotIn"]),
    ),
)


@given(st.lists(selectors, max_size=12), labels, st.data())
def test_term_table_offers_every_term_that_selects_the_pod(
    chosen: list[dict[str, object]], pod_labels: dict[str, str], data: st.DataObject
) -> None:
    table: TermTable[AffinityTerm] = TermTable()
    terms = [_term(s) for s in chosen]
    for i, t in enumerate(terms):
        table.count(t, f"node-{i % 3}", 1)
    removed = data.draw(st.sets(st.integers(0, max(0, len(terms) - 1)), max_size=4))
    for i in removed:
        if i < len(terms):
            table.count(terms[i], f"node-{i % 3}", -1)
    everything = {t for t, _ in table.items()}
    offered = [t for t, _ in table.selecting(pod_labels)]
    assert len(offered) == len(set(offered))  # no term twice
    assert set(offered) <= everything
    selecting = {t for t in everything if t.matches("ns", pod_labels, {})}
    assert selecting <= set(offered)


def test_term_table_forgets_a_term_once_no_pod_carries_it() -> None:
    table: TermTable[WeightedAffinityTerm] = TermTable()
    term = WeightedAffinityTerm(_term({"matchLabels": {"a": "x"}}), 5)
    table.count(term, "n1", 1)
    table.count(term, "n1", 1)
    table.count(term, "n1", -1)
    assert table.get(term) == {"n1": 1}
    assert [t for t, _ in table.selecting({"a": "x"})] == [term]
    table.count(term, "n1", -1)
    assert not table and table.get(term) is None
    assert list(table.selecting({"a": "x"})) == []


@given(
    st.lists(
        st.tuples(*[st.integers(0, 64_000)] * 4, st.integers(0, 8_000), st.integers(0, 8_000)),
        min_size=1,
        max_size=40,
    )
)
def test_two_resource_balance_is_the_general_balance(
    rows: list[tuple[int, int, int, int, int, int]],
) -> None:
    from webhook.policy.plugins.node_resources_balanced_allocation import (
        _Balance,
        _balance_gain_of_two,
    )

    a1, a2, b1, b2, p1, p2 = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    general = _Balance([a1, a2])
    expected = general([b1 + p1, b2 + p2]) - general([b1, b2])
    assert _balance_gain_of_two(b1 + p1, b2 + p2, b1, b2, a1, a2).tolist() == expected.tolist()
