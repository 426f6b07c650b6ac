"""Author tests with generated records: `{"generate": N, "like": {field: CEL over i}}` per collection, made when
the definition is checked (every problem with its path), bulk-inserted into each test's scratch storage."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps_registry.exceptions import InvalidDefinition, TestsFailed
from apps_registry.models import App, Record, Storage
from apps_registry.routes.compiler import check_definition
from apps_registry.routes.limits import Limits
from apps_registry.services.definitions import definition_dry_run, definition_save

pytestmark = pytest.mark.django_db

BOOKS = {"title": "'Book ' + string(i)", "year": "2000 + i % 25", "tags": "['a', 'b']"}

LIBRARY: dict[str, Any] = {
    "name": "Library",
    "collections": {"books": {}, "authors": {}},
    "routes": {
        "count_since": {
            "kind": "query",
            "input": {"type": "object", "properties": {"since": {"type": "integer"}}, "required": ["since"]},
            "output": {"type": "integer"},
            "steps": [
                {"count": {"collection": "books", "where": {"year": {"gte": "params.since"}}}, "as": "n"},
                {"return": "n"},
            ],
        },
        "first_books": {
            "kind": "query",
            "output": {"type": "array"},
            "steps": [{"find": {"collection": "books", "limit": "3"}, "as": "found"}, {"return": "found"}],
        },
        "add_book": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
            "output": {"type": "object"},
            "steps": [
                {"count": {"collection": "authors"}, "as": "authors"},
                {"fail": {"when": "authors == 0", "message": "'add an author first'"}},
                {"insert": {"collection": "books", "value": "{'title': params.title, 'year': 2026}"}, "as": "book"},
                {"return": "book"},
            ],
        },
    },
}


def library(*tests: Any) -> dict[str, Any]:
    definition = copy.deepcopy(LIBRARY)
    definition["tests"] = list(tests)
    return definition


def generated(count: int, like: Any = None, **extra: Any) -> dict[str, Any]:
    return {"generate": count, "like": BOOKS if like is None else like, **extra}


def problems_of(definition: dict[str, Any], limits: Limits | None = None) -> list[dict[str, Any]]:
    parts, problems = check_definition(definition, limits or Limits())
    assert parts is None
    return [p.as_dict() for p in problems]


def test_a_test_runs_against_two_thousand_generated_records_and_leaves_nothing_behind(user):
    definition = library(
        {
            "name": "counts the recent books",
            "route": "count_since",
            "params": {"since": 2020},
            "records": {"books": generated(2000)},
            "expect": {"value": 400},  # years 2020-2024, 80 books each
        },
        {
            "name": "a find without order_by sees them as generated",
            "route": "first_books",
            "records": {"books": generated(2000, {**BOOKS, "id": "'b' + string(i)"})},
            "expect": {
                "value": [
                    {"id": "b0", "title": "Book 0", "year": 2000, "tags": ["a", "b"]},
                    {"id": "b1", "title": "Book 1", "year": 2001},
                    {"id": "b2", "title": "Book 2"},
                ]
            },
        },
    )
    saved = definition_save(actor=user, definition=definition)
    assert [(r.name, r.passed, r.failures) for r in saved.tests] == [
        ("counts the recent books", True, []),
        ("a find without order_by sees them as generated", True, []),
    ]
    assert Record.objects.count() == 0
    assert Storage.objects.count() == 1  # the app's own storage only


def test_generated_and_literal_records_mix_across_collections_and_routes_write_after_them(user):
    definition = library(
        {
            "route": "add_book",
            "params": {"title": "New"},
            "records": {"authors": [{"id": "ann", "name": "Ann"}], "books": generated(3, {"id": "'b' + string(i)"})},
            "expect": {"value": {"title": "New"}},
            "records_after": {"books": [{"id": "b0"}, {"id": "b1"}, {"id": "b2"}, {"title": "New", "year": 2026}]},
        },
        {
            "route": "add_book",
            "params": {"title": "New"},
            "records": {"books": generated(3, {})},
            "expect": {"error": "handler_error", "message": "add an author first"},
        },
    )
    results = definition_dry_run(actor=user, definition=definition).tests
    assert [(r.passed, r.failures) for r in results] == [(True, []), (True, [])]


def test_generated_records_go_to_the_database_in_one_bulk_insert_per_collection(user):
    definition = library(
        {
            "route": "count_since",
            "params": {"since": 0},
            "records": {"books": generated(2000)},
            "expect": {"value": 2000},
        }
    )
    with CaptureQueriesContext(connection) as queries:
        results = definition_dry_run(actor=user, definition=definition).tests
    assert [r.passed for r in results] == [True]
    inserts = [q["sql"] for q in queries.captured_queries if 'INSERT INTO "apps_registry_record"' in q["sql"]]
    assert len(inserts) == 1  # Django logs an executemany once, as "N times: ..."
    assert inserts[0].startswith('2000 times: INSERT INTO "apps_registry_record"')


def test_a_definition_at_the_default_limits_checks_and_runs_in_a_few_seconds(user):
    """The time a save spends on generated records is bounded: 20,000 records (the default per definition), in
    four tests of 5,000 (the default per test). Measured here at about a second on SQLite; the bound is loose."""
    test = {"route": "count_since", "params": {"since": 2024}, "records": {"books": generated(5000)}}
    definition = library(*[{**test, "name": f"t{n}", "expect": {"value": 200}} for n in range(4)])
    started = time.monotonic()
    results = definition_dry_run(actor=user, definition=definition).tests
    assert [r.passed for r in results] == [True] * 4
    assert time.monotonic() - started < 30
    assert not App.objects.exists()


def test_a_failing_test_with_generated_records_is_reported_like_any_other(user):
    definition = library(
        {
            "name": "wrong",
            "route": "count_since",
            "params": {"since": 2000},
            "records": {"books": generated(50)},
            "expect": {"value": 7},
        }
    )
    with pytest.raises(TestsFailed) as exc:
        definition_save(actor=user, definition=definition)
    assert exc.value.kind == "tests_failed"
    assert exc.value.errors == [{"path": "tests[0]", "message": "expected the value 7, got 50"}]


BAD_TEMPLATES = [
    pytest.param(
        generated(True),
        [
            {
                "path": "tests[0].records.books.generate",
                "message": "must be a positive integer (how many records), got true",
            }
        ],
        id="count-boolean",
    ),
    pytest.param(
        generated(0),
        [
            {
                "path": "tests[0].records.books.generate",
                "message": "must be a positive integer (how many records), got 0",
            }
        ],
        id="count-zero",
    ),
    pytest.param(
        generated("10"),
        [
            {
                "path": "tests[0].records.books.generate",
                "message": "must be a positive integer (how many records), got '10'",
            }
        ],
        id="count-string",
    ),
    pytest.param(
        {"generate": 5},
        [
            {
                "path": "tests[0].records.books.like",
                "message": "required: an object mapping each field to a CEL expression over i (0, 1, ...), e.g. "
                '{"title": "\'Book \' + string(i)", "year": "2000 + i % 25"}',
            }
        ],
        id="like-missing",
    ),
    pytest.param(
        generated(5, ["i"]),
        [
            {
                "path": "tests[0].records.books.like",
                "message": "required: an object mapping each field to a CEL expression over i (0, 1, ...), e.g. "
                '{"title": "\'Book \' + string(i)", "year": "2000 + i % 25"}',
            }
        ],
        id="like-array",
    ),
    pytest.param(
        generated(5, size=1),
        [{"path": "tests[0].records.books", "message": "unknown key(s) size; generated records take: generate, like"}],
        id="unknown-key",
    ),
    pytest.param(
        generated(5, {"year": 2001, "done": None}),
        [
            {
                "path": "tests[0].records.books.like.year",
                "message": 'must be a CEL expression over i, as a string (e.g. "i * 2" or "\'x\'"), got 2001',
            },
            {
                "path": "tests[0].records.books.like.done",
                "message": 'must be a CEL expression over i, as a string (e.g. "i * 2" or "\'x\'"), got null',
            },
        ],
        id="value-not-a-string",
    ),
    pytest.param(
        generated(5, {"title": "'Book ' +"}),
        [
            {
                "path": "tests[0].records.books.like.title",
                "message": "syntax error at column 10: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', "
                "'!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
            }
        ],
        id="syntax-error",
    ),
    pytest.param(
        generated(5, {"title": "params.title", "n": "j + i"}),
        [
            {
                "path": "tests[0].records.books.like.title",
                "message": "unknown name(s) params; a generated record's expressions know only i (0, 1, ...)",
            },
            {
                "path": "tests[0].records.books.like.n",
                "message": "unknown name(s) j; a generated record's expressions know only i (0, 1, ...)",
            },
        ],
        id="unknown-names",
    ),
    pytest.param(
        generated(5, {"tags": "[1, 2].map(x, x + i)", "ok": "string(i).matches('1')"}),
        [
            {
                "path": "tests[0].records.books.like.tags",
                "message": "runs once for every generated record, so it may not use map, filter, all, exists, "
                "exists_one or matches",
            },
            {
                "path": "tests[0].records.books.like.ok",
                "message": "runs once for every generated record, so it may not use map, filter, all, exists, "
                "exists_one or matches",
            },
        ],
        id="comprehension-and-regex",
    ),
    pytest.param(
        generated(5, {"ratio": "10 / (i - 3)"}),
        [
            {
                "path": "tests[0].records.books.like.ratio",
                "message": "for i = 3, evaluating `10 / (i - 3)` failed: division by zero",
            }
        ],
        id="fails-for-one-i",
    ),
    pytest.param(
        generated(5, {"ratio": "1.0 / 0.0"}),
        [
            {
                "path": "tests[0].records.books.like.ratio",
                "message": "for i = 0, its value cannot be stored: An expression produced inf, which JSON cannot "
                "represent; check for a division of doubles by 0.0.",
            }
        ],
        id="not-json",
    ),
    pytest.param(
        generated(5, {"note": "'a\\x00b'"}),
        [
            {
                "path": "tests[0].records.books.like.note",
                "message": "for i = 0, its text contains a NUL character (U+0000) at index 1",
            }
        ],
        id="unstorable-text",
    ),
    pytest.param(
        generated(30, {"id": "'b' + string(i % 25)"}),
        [
            {
                "path": "tests[0].records.books.like.id",
                "message": "gives the id 'b0' for both i = 0 and i = 25; each record needs an id of its own "
                "(e.g. \"'b' + string(i)\")",
            }
        ],
        id="duplicate-ids",
    ),
    pytest.param(
        generated(3, {"id": "i"}),
        [
            {
                "path": "tests[0].records.books.like.id",
                "message": "must give a non-empty string of at most 200 characters (the record's id); for i = 0 "
                "it gives 0",
            }
        ],
        id="id-not-a-string",
    ),
]


@pytest.mark.parametrize(("records", "expected"), BAD_TEMPLATES)
def test_a_bad_template_is_a_problem_of_the_definition_with_its_path(records, expected):
    definition = library(
        {"route": "count_since", "params": {"since": 1}, "records": {"books": records}, "expect": {"value": 0}}
    )
    assert problems_of(definition) == expected


def test_records_after_lists_records_literally(user):
    definition = library(
        {
            "route": "add_book",
            "params": {"title": "x"},
            "expect": {"value": {}},
            "records_after": {"books": generated(2)},
        }
    )
    with pytest.raises(InvalidDefinition) as exc:
        definition_save(actor=user, definition=definition)
    assert exc.value.kind == "invalid_definition"
    assert exc.value.errors == [
        {
            "path": "tests[0].records_after.books",
            "message": "must be an array of records (objects): records_after lists them literally",
        }
    ]


def test_a_collection_that_is_neither_says_both_forms():
    definition = library(
        {"route": "count_since", "params": {"since": 1}, "records": {"books": 5}, "expect": {"value": 0}}
    )
    assert problems_of(definition) == [
        {
            "path": "tests[0].records.books",
            "message": 'must be an array of records (objects), or {"generate": N, "like": {"field": "<CEL over i>"}}',
        }
    ]


def test_the_limits_on_generated_records_are_problems_naming_the_limit():
    one = {"route": "count_since", "params": {"since": 1}, "expect": {"value": 0}}
    limits = Limits(test_generated_records=10, generated_records=25, generated_bytes=2000)
    assert problems_of(library({**one, "records": {"books": generated(11)}}), limits) == [
        {
            "path": "tests[0].records.books.generate",
            "message": "a test generates at most 10 records, got 11",
            "limit": "test_generated_records",
            "max": 10,
        }
    ]
    both = {"books": generated(6), "authors": generated(6, {})}
    assert problems_of(library({**one, "records": both}), limits) == [
        {
            "path": "tests[0].records",
            "message": "a test generates 12 records; the limit is 10",
            "limit": "test_generated_records",
            "max": 10,
        }
    ]
    three = [{**one, "records": {"books": generated(9, {})}}] * 3
    assert problems_of(library(*three), limits) == [
        {
            "path": "tests",
            "message": "the tests generate 27 records together; the limit is 25",
            "limit": "generated_records",
            "max": 25,
        }
    ]
    large = {"title": "'" + "x" * 300 + "' + string(i)"}
    assert problems_of(library({**one, "records": {"books": generated(10, large)}}), limits) == [
        {
            "path": "tests[0].records.books",
            "message": "the tests' generated records pass 2000 bytes of JSON together here (at i = 6); generate "
            "fewer or smaller records",
            "limit": "generated_bytes",
            "max": 2000,
        }
    ]
    wordy = {"title": "'Book ' + string(i)", "year": "2000 + i % 25"}  # 19 + 13 characters
    assert problems_of(
        library({**one, "records": {"books": generated(10, wordy)}}), Limits(generated_expression_chars=319)
    ) == [
        {
            "path": "tests",
            "message": "the tests' generated records evaluate 320 characters of CEL together (each field's expression "
            "once per record); the limit is 319: generate fewer records or write shorter expressions",
            "limit": "generated_expression_chars",
            "max": 319,
        }
    ]
    small_records = Limits(record_bytes=100)
    assert problems_of(library({**one, "records": {"books": generated(2, large)}}), small_records) == [
        {
            "path": "tests[0].records.books.like",
            "message": "for i = 0, the record would be 313 bytes of JSON; the limit is 100",
            "limit": "record_bytes",
            "max": 100,
        }
    ]


def test_limits_follow_the_settings(user, settings):
    settings.CHARMING_ROUTES_MAX_TEST_GENERATED_RECORDS = 3
    definition = library(
        {"route": "count_since", "params": {"since": 1}, "records": {"books": generated(4)}, "expect": {"value": 0}}
    )
    with pytest.raises(InvalidDefinition) as exc:
        definition_save(actor=user, definition=definition)
    assert exc.value.errors == [
        {
            "path": "tests[0].records.books.generate",
            "message": "a test generates at most 3 records, got 4",
            "limit": "test_generated_records",
            "max": 3,
        }
    ]


def test_the_worked_example_of_the_authoring_docs_passes(user):
    """docs/authoring.md, "Generated records": its test, run against LIBRARY's count_since."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "authoring.md").read_text()
    section = text.split("\n### Generated records\n", 1)[1]
    example = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    definition = library(example)
    definition["collections"]["authors"] = {}
    results = definition_dry_run(actor=user, definition=definition).tests
    assert [(r.name, r.passed, r.failures) for r in results] == [("counts the recent books among 2000", True, [])]
