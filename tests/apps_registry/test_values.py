"""The small value helpers every layer shares (apps_registry.values)."""

from __future__ import annotations

import uuid

import pytest

from apps_registry.values import clip, clip_repr, first_problems, json_repr, parse_uuid, type_name


def test_parse_uuid_reads_uuids_and_refuses_anything_else() -> None:
    value = uuid.uuid4()
    assert parse_uuid(value) is value
    assert parse_uuid(str(value)) == value
    assert parse_uuid(str(value).upper()) == value
    for bad in ("", "nope", "x" * 100_000, "1234\x00", None, 7, ["a"]):
        assert parse_uuid(bad) is None


def test_clip_bounds_text_and_marks_the_cut() -> None:
    assert clip("short", 10) == "short"
    assert clip("x" * 10, 10) == "x" * 10
    assert clip("x" * 11, 10) == "x" * 9 + "…"
    assert len(clip("y" * 100_000)) == 100
    assert clip_repr("abc") == "'abc'"
    assert clip_repr("z" * 500, 20) == repr("z" * 20) + "…"


@pytest.mark.parametrize(
    ("value", "name"),
    [({}, "object"), ([], "array"), ("", "string"), (1, "integer"), (1.5, "number"), (True, "boolean"), (None, "null")],
)
def test_type_name_uses_json_names(value: object, name: str) -> None:
    assert type_name(value) == name


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (3, "3"),
        (1.5, "1.5"),
        ([1, "a"], '[1, "a"]'),
        ({"a": None}, '{"a": null}'),
        ("report", "'report'"),
    ],
)
def test_json_repr_quotes_a_value_in_json_words_not_python_ones(value: object, shown: str) -> None:
    assert json_repr(value) == shown


def test_json_repr_clips_long_values() -> None:
    assert json_repr("z" * 500, 20) == repr("z" * 20) + "…"
    assert json_repr(list(range(1000)), 20) == "[0, 1, 2, 3, 4, 5, 6,…"


def test_first_problems_lists_three_and_counts_the_rest() -> None:
    problems = [{"path": f"$.a{i}", "message": "bad"} for i in range(5)]
    assert first_problems(problems) == "$.a0: bad; $.a1: bad; $.a2: bad (and 2 more)"
    assert first_problems(problems[:2]) == "$.a0: bad; $.a1: bad"


def test_oversized_ids_are_not_echoed_by_the_retention_services() -> None:
    from apps_registry.exceptions import NotFound
    from apps_registry.services.retention import _uuid

    with pytest.raises(NotFound) as exc:
        _uuid("q" * 100_000, "storage")
    assert len(exc.value.message) < 400
