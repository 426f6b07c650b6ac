"""The aggregate benchmark's data holds what its figures rely on: the month it filters has the same few hundred
records at every size (so an index can keep that cost flat), and `food` is about 8% of any app (so that filter's
matches grow with it). No figures are asserted (the benchmark prints them)."""

import sys
from collections import Counter
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import aggregate  # noqa: E402 (a script's module, found through the path above)


def in_month(rows):
    return [row for _id, row in rows if aggregate.MONTH[0] <= row["day"] < aggregate.MONTH[1]]


def test_the_filtered_month_holds_the_same_records_at_every_size():
    small, large = list(aggregate.records(1_000)), list(aggregate.records(20_000))
    assert len(in_month(small)) == 300
    assert in_month(small) == in_month(large)
    assert large[:1_000] == small


def test_food_is_about_eight_percent_and_amounts_have_two_fraction_digits():
    rows = [row for _id, row in aggregate.records(20_000)]
    shares = Counter(row["category"] for row in rows)
    assert len(shares) == 12
    assert 0.07 < shares["food"] / len(rows) < 0.09
    assert all(Decimal(str(row["amount"])).as_tuple().exponent >= -2 for row in rows)
    assert rows[-1]["day"] == "2021-06-10"  # 10 a day, going back from 2026-11-30
