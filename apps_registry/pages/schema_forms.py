"""Forms from a route's input schema and views from its output schema, for the app page.

Plain Python, no Django forms: a schema becomes a tree of `SchemaField`s that the templates draw
(`templates/apps/_fields.html`) and that parse submitted values back into the route's params. The
form only turns text into JSON types (numbers, booleans, lists); every constraint (required, bounds,
lengths, patterns) is checked by the route engine, and its `invalid_input` paths are put back on
the fields they name. Shapes a form cannot express fall back to a JSON text area.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apps_registry.pages.results import CURRENCY_SYMBOLS, Cell, Column, ResultView, Row, cell, result_view
from apps_registry.pages.words import friendly_error, humanize
from apps_registry.routes.hints import LABEL, RECORD, UNIT

__all__ = [
    "Cell",
    "Column",
    "ResultView",
    "Row",
    "SchemaField",
    "SchemaForm",
    "cell",
    "errors_place",
    "field_place_detail",
    "form_parse",
    "humanize",
    "result_view",
    "schema_form",
]

# What each JSON Schema shape becomes; documented in docs/pages.md ("Forms").
PRIMITIVES = ("string", "number", "integer", "boolean")
TEXTAREA_FROM_LENGTH = 200  # strings allowed longer than this get a text area
MAX_DEPTH = 4  # nested objects deeper than this fall back to JSON
_REQUIRED = re.compile(r"""^["'](?P<name>[^"']+)["'] is a required property""")


def _type_of(schema: Mapping[str, Any]) -> str | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        types = [t for t in declared if t != "null"]
        if len(types) == 1 and isinstance(types[0], str):
            return types[0]
    return None


def _enum_of(schema: Mapping[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    if isinstance(values, list) and values and all(v is None or isinstance(v, (str, int, float, bool)) for v in values):
        return values
    return None


def encode_choice(value: Any) -> str:
    """How an enum member travels in a form: strings as themselves, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class SchemaField:
    """One input of a generated form (or a fieldset of inputs, for a nested object)."""

    name: str  # dotted path below the params object: "amount", "address.street"
    label: str
    widget: str  # text, textarea, number, date, datetime, email, checkbox, tristate, select, multiselect,
    #              list, json, fieldset, record (a picker of a collection's records)
    required: bool = False
    description: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)  # HTML constraint attributes (min, max, maxlength, ...)
    choices: list[tuple[str, str]] = field(default_factory=list)
    children: list[SchemaField] = field(default_factory=list)
    browser_required: bool = False  # `required` in HTML: required here and in every enclosing object
    item_type: str = ""  # for list: the items' JSON type
    hint: str = ""  # how to type the value ("comma-separated numbers", "JSON")
    prefix: str = ""  # prepended to `name` in the submitted data (query filter forms share one page)
    id_prefix: str = "f"
    value: Any = None  # what to show: the submitted text (or list of texts for multiselect)
    errors: list[str] = field(default_factory=list)
    schema: Mapping[str, Any] = field(default_factory=dict)
    collection: str = ""  # for record: the collection picked from, and the field its records are shown by
    label_field: str = ""
    search: bool = False  # for record: too many records for one list, so a search box narrows it
    search_url: str = ""

    @property
    def html_name(self) -> str:
        return self.prefix + self.name

    @property
    def id(self) -> str:
        return f"{self.id_prefix}-{re.sub(r'[^A-Za-z0-9_-]+', '-', self.name)}"

    @property
    def described_by(self) -> str:
        ids = []
        if self.description or self.hint:
            ids.append(f"{self.id}-help")
        if self.errors:
            ids.append(f"{self.id}-errors")
        return " ".join(ids)

    def walk(self) -> Iterable[SchemaField]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class SchemaForm:
    """A generated form: its fields, the errors that belong to no field, and the params once parsed."""

    fields: list[SchemaField]
    json_only: bool = False  # the whole input is one JSON text area
    errors: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def all_fields(self) -> list[SchemaField]:
        return [f for top in self.fields for f in top.walk()]

    @property
    def has_errors(self) -> bool:
        return bool(self.errors) or any(f.errors for f in self.all_fields())

    @property
    def is_empty(self) -> bool:
        return not self.fields

    def required_names(self) -> list[str]:
        return [f.name for f in self.fields if f.required]


def schema_form(
    schema: Any, *, id_prefix: str = "f", prefix: str = "", records: Mapping[str, str] | None = None
) -> SchemaForm:
    """The form for an input schema (an object schema's properties, in their order). `records` names the
    params known to hold a record's id (param -> collection, read from the route's steps): those, like the
    ones annotated `x-charming-record`, are pickers."""
    if not isinstance(schema, Mapping) or not schema:
        return SchemaForm(fields=[])
    properties = schema.get("properties")
    if _type_of(schema) in (None, "object") and isinstance(properties, Mapping) and not _needs_json(schema):
        required = set(schema.get("required") or [])
        records = records or {}
        fields = [
            _field(
                name,
                {**sub, RECORD: records[name]} if name in records and isinstance(sub, Mapping) else sub,
                required=name in required,
                depth=1,
                id_prefix=id_prefix,
                prefix=prefix,
            )
            for name, sub in properties.items()
        ]
        return SchemaForm(fields=fields)
    if _type_of(schema) == "object" and not properties and not _needs_json(schema):
        return SchemaForm(fields=[])
    whole = SchemaField(
        name="__json__",
        label="Input (JSON)",
        widget="json",
        required=True,
        hint="The whole input as one JSON object.",
        prefix=prefix,
        id_prefix=id_prefix,
        schema=schema,
    )
    return SchemaForm(fields=[whole], json_only=True)


def singular(noun: str) -> str:
    """`Expenses` -> `Expense`, `Categories` -> `Category`: a collection's name for one of its records."""
    if noun.endswith("ies") and len(noun) > 4:
        return noun[:-3] + "y"
    if noun.endswith(("sses", "shes", "ches", "xes")):
        return noun[:-2]
    if noun.endswith("s") and not noun.endswith("ss") and len(noun) > 2:
        return noun[:-1]
    return noun


def _needs_json(schema: Mapping[str, Any]) -> bool:
    # Combinators and references describe shapes a flat form cannot draw faithfully.
    return any(key in schema for key in ("oneOf", "anyOf", "allOf", "$ref", "if", "patternProperties", "not"))


def _field(
    name: str,
    schema: Any,
    *,
    required: bool,
    depth: int,
    id_prefix: str,
    prefix: str,
    parent: str = "",
    parent_required: bool = True,
) -> SchemaField:
    path = f"{parent}.{name}" if parent else name
    schema = schema if isinstance(schema, Mapping) else {}
    base = SchemaField(
        name=path,
        label=str(schema.get("title") or humanize(name)),
        widget="json",
        required=required,
        browser_required=required and parent_required,
        description=str(schema.get("description") or ""),
        prefix=prefix,
        id_prefix=id_prefix,
        schema=schema,
    )
    kind = _type_of(schema)
    enum = _enum_of(schema)
    if _needs_json(schema):
        base.hint = "JSON"
        return base
    if isinstance(schema.get(RECORD), str) and kind in (None, "string") and enum is None:
        base.widget = "record"
        base.collection = schema[RECORD]
        base.label_field = schema[LABEL] if isinstance(schema.get(LABEL), str) else ""
        if name == "id" and not schema.get("title"):
            base.label = singular(humanize(base.collection))
        return base
    if enum is not None:
        base.widget = "select"
        base.choices = [(encode_choice(v), str(v) if not isinstance(v, bool) else ("Yes" if v else "No")) for v in enum]
        return base
    if kind == "string":
        fmt = schema.get("format")
        base.widget = {"date": "date", "date-time": "datetime", "email": "email"}.get(str(fmt), "text")
        if base.widget == "datetime":
            base.hint = "Date and time, in UTC."
        if isinstance(schema.get("maxLength"), int):
            base.attrs["maxlength"] = schema["maxLength"]
            if base.widget == "text" and schema["maxLength"] > TEXTAREA_FROM_LENGTH:
                base.widget = "textarea"
        if isinstance(schema.get("minLength"), int) and schema["minLength"] > 0:
            base.attrs["minlength"] = schema["minLength"]
        return base
    if kind in ("number", "integer"):
        base.widget = "number"
        base.attrs.update(_number_attrs(schema, integer=kind == "integer"))
        base.hint = _bounds_hint(schema)
        unit = schema.get(UNIT)
        if isinstance(unit, str) and unit.strip():  # "Amount (€)"
            base.label += f" ({CURRENCY_SYMBOLS.get(unit.strip(), unit.strip())})"
        return base
    if kind == "boolean":
        # A required yes/no is a checkbox (unticked: false); an optional one may also be left unset.
        base.widget = "checkbox" if required else "tristate"
        base.choices = [("", "—"), ("true", "Yes"), ("false", "No")]
        return base
    if kind == "object" and isinstance(schema.get("properties"), Mapping) and depth < MAX_DEPTH:
        base.widget = "fieldset"
        inner_required = set(schema.get("required") or [])
        base.children = [
            _field(
                sub_name,
                sub,
                required=sub_name in inner_required,
                depth=depth + 1,
                id_prefix=id_prefix,
                prefix=prefix,
                parent=path,
                parent_required=base.browser_required,
            )
            for sub_name, sub in schema["properties"].items()
        ]
        return base
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        item_enum = _enum_of(items)
        item_kind = _type_of(items)
        if item_enum is not None and all(isinstance(v, str) for v in item_enum):
            base.widget = "multiselect"
            base.choices = [(v, v) for v in item_enum]
            return base
        if item_kind in ("string", "number", "integer") and not _needs_json(items):
            base.widget = "list"
            base.item_type = item_kind
            base.hint = "One per line." if item_kind == "string" else "Separate the numbers with commas."
            return base
    base.hint = "JSON"
    return base


def _number_attrs(schema: Mapping[str, Any], *, integer: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {"step": "1" if integer else "any"}
    if isinstance(schema.get("multipleOf"), (int, float)):
        attrs["step"] = schema["multipleOf"]
    for key, attr in (("minimum", "min"), ("maximum", "max")):
        if isinstance(schema.get(key), (int, float)) and not isinstance(schema.get(key), bool):
            attrs[attr] = schema[key]
    return attrs


def _bounds_hint(schema: Mapping[str, Any]) -> str:
    parts = []
    if isinstance(schema.get("exclusiveMinimum"), (int, float)):
        parts.append(f"more than {schema['exclusiveMinimum']}")
    if isinstance(schema.get("exclusiveMaximum"), (int, float)):
        parts.append(f"less than {schema['exclusiveMaximum']}")
    return ("Must be " + " and ".join(parts) + ".") if parts else ""


def form_parse(form: SchemaForm, data: Any) -> SchemaForm:
    """Read submitted `data` (a QueryDict) into `form.params`; text that is not of its type is a field error.

    An empty input is left out of the params (so the engine reports a missing required value).
    """
    form.params = {}
    for top in form.fields:
        present, value = _parse_field(top, data)
        if form.json_only and present:
            if isinstance(value, dict):
                form.params = value
            else:
                top.errors.append('Enter a JSON object, like {"name": "value"}.')
        elif present:
            form.params[top.name] = value
    return form


def _parse_field(spec: SchemaField, data: Any) -> tuple[bool, Any]:
    if spec.widget == "fieldset":
        inner: dict[str, Any] = {}
        for child in spec.children:
            present, value = _parse_field(child, data)
            if present:
                inner[child.name.rsplit(".", 1)[-1]] = value
        return (bool(inner) or spec.required), inner
    if spec.widget == "checkbox":
        spec.value = spec.html_name in data
        return True, spec.value
    if spec.widget == "multiselect":
        chosen = [v for v in data.getlist(spec.html_name) if v]
        spec.value = chosen
        return bool(chosen), chosen
    raw = data.get(spec.html_name, "")
    raw = raw if isinstance(raw, str) else ""
    spec.value = raw
    if raw.strip() == "":
        return False, None
    try:
        return True, _convert(spec, raw)
    except ValueError as error:
        spec.errors.append(str(error))
        return False, None


def _convert(spec: SchemaField, raw: str) -> Any:
    widget = spec.widget
    if widget in ("text", "textarea", "email", "date", "record"):
        return raw
    if widget == "datetime":
        # <input type=datetime-local> sends "2026-12-01T13:45" (no seconds, no zone): read it as UTC.
        text = raw.strip()
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", text):
            text += ":00"
        if not re.search(r"(Z|[+-]\d{2}:\d{2})$", text):
            text += "Z"
        return text
    if widget == "number":
        return _number(raw, integer=_type_of(spec.schema) == "integer")
    if widget == "tristate":
        if raw not in ("true", "false"):
            raise ValueError("Choose yes or no.")
        return raw == "true"
    if widget == "select":
        for member in _enum_of(spec.schema) or []:
            if encode_choice(member) == raw:
                return member
        raise ValueError("Choose one of the options.")
    if widget == "list":
        if spec.item_type == "string":
            return [line.strip() for line in raw.splitlines() if line.strip()]
        return [_number(part, integer=spec.item_type == "integer") for part in raw.split(",") if part.strip()]
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError("Enter valid JSON (strings in double quotes).") from None


def _number(raw: str, *, integer: bool) -> int | float:
    text = raw.strip()
    if integer:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"Enter a whole number, not “{text[:40]}”.") from None
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"Enter a number, not “{text[:40]}”.") from None
    if not math.isfinite(number):
        raise ValueError("Enter a finite number.")
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def errors_place(form: SchemaForm, errors: Iterable[Mapping[str, Any]] | None, *, fallback: str = "") -> None:
    """Put the engine's `invalid_input` errors (JSON paths like `$.amount`) on the fields they name."""
    by_name = {f.name: f for f in form.all_fields()}
    placed_any = False
    for error in errors or []:
        message = str(error.get("message") or "is not valid")
        target = _field_for_path(by_name, str(error.get("path") or "$"), message, json_only=form.json_only)
        if target is None:
            form.errors.append(friendly_error(message))
        else:
            target.errors.append(_friendly(message, target.schema))
        placed_any = True
    if not placed_any and fallback:
        form.errors.append(fallback)


def _field_for_path(
    by_name: Mapping[str, SchemaField], path: str, message: str, *, json_only: bool
) -> SchemaField | None:
    if json_only:
        return by_name.get("__json__")
    name = re.sub(r"\[\d+\]", "", path.removeprefix("$")).lstrip(".")
    missing = _REQUIRED.match(message)
    if missing:  # reported at the object that lacks the property
        candidate = f"{name}.{missing.group('name')}" if name else missing.group("name")
        if candidate in by_name:
            return by_name[candidate]
    while name:
        if name in by_name:
            return by_name[name]
        name = name.rpartition(".")[0]
    return None


def _friendly(message: str, schema: Mapping[str, Any] | None = None) -> str:
    return friendly_error(message, schema)


def field_place_detail(form: SchemaForm, details: Any) -> SchemaField | None:
    """The field a `handler_error`'s details name (`{"field": "amount"}`), when the author named one."""
    if not isinstance(details, Mapping) or not isinstance(details.get("field"), str):
        return None
    for spec in form.all_fields():
        if spec.name == details["field"]:
            return spec
    return None
