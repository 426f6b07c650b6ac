"""What the API's views share: checking a body with a view's InputSerializer (refused as the domain's
InvalidInput), the checks a body read by hand shares with it (`body_shape_check`, `field_errors_refuse`), and the
fields their OutputSerializers need.

DRF ignores fields a serializer does not declare and words its errors per field; a caller of this
API gets one InvalidInput naming what to fix, with each problem's JSON path, as the MCP tools do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework import serializers

from apps_registry.exceptions import InvalidInput
from apps_registry.values import type_name


class StrictInputSerializer(serializers.Serializer):
    """A request body: a JSON object with only the declared fields.

    `example` (a body to show) and `takes` (its fields in words) word the refusals.
    """

    example: str = "{}"
    takes: str = ""


def input_validated(serializer_class: type[StrictInputSerializer], data: Any) -> dict[str, Any]:
    """The body's validated fields, or InvalidInput naming each problem with its JSON path."""
    body_shape_check(
        data, fields=serializer_class._declared_fields, example=serializer_class.example, takes=serializer_class.takes
    )
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        field_errors_refuse(
            [
                {"path": f"$.{name}", "message": str(message)}
                for name, messages in serializer.errors.items()
                for message in messages
            ]
        )
    validated: dict[str, Any] = dict(serializer.validated_data)
    return validated


def body_shape_check(data: Any, *, fields: Iterable[str], example: str, takes: str) -> None:
    """InvalidInput unless the body is a JSON object holding only `fields` (`example` and `takes` word it)."""
    if not isinstance(data, dict):
        raise InvalidInput(
            f"Send a JSON object like {example}.",
            errors=[{"path": "$", "message": f"expected an object, got {type_name(data)}"}],
        )
    unknown = sorted(set(data).difference(fields))
    if unknown:
        raise InvalidInput(
            f"Unknown field(s) {', '.join(repr(k) for k in unknown)}: {takes}",
            errors=[{"path": f"$.{key}", "message": "unknown field"} for key in unknown],
        )


def field_errors_refuse(errors: list[dict[str, str]]) -> None:
    """InvalidInput carrying each field's problem ({path, message}), its message their messages in turn."""
    if errors:
        raise InvalidInput(" ".join(e["message"] for e in errors), errors=errors)


class IsoDateTimeField(serializers.Field):
    """A timestamp as Python's isoformat() writes it (DRF's own field would turn +00:00 into Z)."""

    def to_representation(self, value: Any) -> str:
        return str(value.isoformat())
