"""What the API's views share: checking a body with a view's InputSerializer (refused as the domain's
InvalidInput), and the fields their OutputSerializers need.

DRF ignores fields a serializer does not declare and words its errors per field; a caller of this
API gets one InvalidInput naming what to fix, with each problem's JSON path, as the MCP tools do.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps_registry.exceptions import InvalidInput
from apps_registry.values import json_repr, type_name


class StrictInputSerializer(serializers.Serializer):
    """A request body: a JSON object with only the declared fields.

    `example` (a body to show) and `takes` (its fields in words) word the refusals.
    """

    example: str = "{}"
    takes: str = ""


def input_validated(serializer_class: type[StrictInputSerializer], data: Any) -> dict[str, Any]:
    """The body's validated fields, or InvalidInput naming each problem with its JSON path."""
    if not isinstance(data, dict):
        raise InvalidInput(
            f"Send a JSON object like {serializer_class.example}.",
            errors=[{"path": "$", "message": f"expected an object, got {type_name(data)}"}],
        )
    serializer = serializer_class(data=data)
    unknown = sorted(set(data) - set(serializer.fields))
    if unknown:
        raise InvalidInput(
            f"Unknown field(s) {', '.join(repr(k) for k in unknown)}: {serializer_class.takes}",
            errors=[{"path": f"$.{key}", "message": "unknown field"} for key in unknown],
        )
    if not serializer.is_valid():
        errors = [
            {"path": f"$.{name}", "message": str(message)}
            for name, messages in serializer.errors.items()
            for message in messages
        ]
        raise InvalidInput(" ".join(e["message"] for e in errors), errors=errors)
    validated: dict[str, Any] = dict(serializer.validated_data)
    return validated


class JsonObjectField(serializers.DictField):
    """A JSON object; anything else is refused naming its JSON type (array, string, ...), not Python's."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            self.fail("not_a_dict", input_type=type_name(data))
        return super().to_internal_value(data)


class JsonChoiceField(serializers.ChoiceField):
    """A choice whose refusal quotes the value as JSON (`got true`, `got 5`), not as Python's repr."""

    def fail(self, key: str, **kwargs: Any) -> Any:
        if "input" in kwargs:
            kwargs["input"] = json_repr(kwargs["input"])
        return super().fail(key, **kwargs)


class IsoDateTimeField(serializers.Field):
    """A timestamp as Python's isoformat() writes it (DRF's own field would turn +00:00 into Z)."""

    def to_representation(self, value: Any) -> str:
        return str(value.isoformat())
