"""The REST API's JSON parser: DRF's, with the body size bounded.

DRF's JSONParser reads the request stream itself, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE (which
guards `request.body` and form data) never applies to it: a body of any size was read and parsed.
This parser refuses a body over that setting with 413 before parsing it, reading at most one byte
more than the limit even when the client sends no (or a false) Content-Length.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"
    default_detail = "The request body is too large."


class LimitedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None:
            request = (parser_context or {}).get("request")
            meta = getattr(request, "META", {})
            try:
                declared = int(meta.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = 0
            body = b"" if declared > limit else stream.read(limit + 1)
            if declared > limit or len(body) > limit:
                raise RequestTooLarge(
                    f"The request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); send less data."
                )
            stream = io.BytesIO(body)
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
