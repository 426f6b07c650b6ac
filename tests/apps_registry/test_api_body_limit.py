"""LimitedJSONParser bounds the body even when Content-Length is missing or understated: it reads
at most one byte over DATA_UPLOAD_MAX_MEMORY_SIZE from the stream and refuses with 413."""

from __future__ import annotations

import io
import json
import re
from types import SimpleNamespace

import pytest
from rest_framework.exceptions import ParseError

from apps_registry.api.parsers import LimitedJSONParser, RequestTooLarge


class CountingStream(io.BytesIO):
    """A body stream that records how many bytes the parser asked for."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.bytes_read += len(chunk)
        return chunk


def parse(body: bytes, meta: dict) -> tuple[object, CountingStream]:
    stream = CountingStream(body)
    context = {"request": SimpleNamespace(META=meta)}
    return LimitedJSONParser().parse(stream, "application/json", context), stream


BIG = json.dumps({"s": "x" * 10_000}).encode()


def too_large(limit: int) -> str:
    """The `match=` for RequestTooLarge's message at this limit."""
    return re.escape(f"The request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); send less data.")


@pytest.mark.parametrize(
    "meta",
    [{}, {"CONTENT_LENGTH": ""}, {"CONTENT_LENGTH": "10"}, {"CONTENT_LENGTH": "0"}, {"CONTENT_LENGTH": "junk"}],
    ids=["absent", "empty", "understated", "zero", "not-a-number"],
)
def test_a_body_over_the_limit_is_refused_without_a_truthful_content_length(settings, meta):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    stream = CountingStream(BIG)
    with pytest.raises(RequestTooLarge) as exc:
        LimitedJSONParser().parse(stream, "application/json", {"request": SimpleNamespace(META=meta)})
    assert exc.value.status_code == 413
    assert exc.value.get_codes() == "request_too_large"
    assert str(exc.value.detail) == (
        "The request body is larger than 1000 bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); send less data."
    )
    assert stream.bytes_read == 1001  # at most one byte over the limit, never the whole body


def test_a_declared_length_over_the_limit_is_refused_without_reading(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    stream = CountingStream(BIG)
    with pytest.raises(RequestTooLarge, match=too_large(1000)):
        LimitedJSONParser().parse(
            stream, "application/json", {"request": SimpleNamespace(META={"CONTENT_LENGTH": str(len(BIG))})}
        )
    assert stream.bytes_read == 0


def test_a_body_exactly_at_the_limit_is_parsed_without_content_length(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(BIG)
    parsed, stream = parse(BIG, {})
    assert parsed == {"s": "x" * 10_000}
    assert stream.bytes_read == len(BIG)


def test_one_byte_over_the_limit_is_refused_without_content_length(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(BIG) - 1
    with pytest.raises(RequestTooLarge, match=too_large(len(BIG) - 1)):
        parse(BIG, {})


def test_without_a_context_the_limit_still_applies(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    with pytest.raises(RequestTooLarge, match=too_large(1000)):
        LimitedJSONParser().parse(CountingStream(BIG), "application/json", None)


def test_a_small_body_with_no_content_length_is_parsed(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    parsed, _ = parse(b'{"a": [1, 2]}', {})
    assert parsed == {"a": [1, 2]}


def test_invalid_json_under_the_limit_is_still_a_parse_error(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    with pytest.raises(ParseError, match="^JSON parse error - "):
        parse(b'{"a": ', {})


def test_no_limit_reads_the_whole_body(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    parsed, _ = parse(BIG, {})
    assert parsed == {"s": "x" * 10_000}
