"""A guest book with a poll, as an owner makes it public: visitors may sign and vote (once per visitor, by
`caller.id`), only members may remove an entry. Used by the public apps' tests and their Chromium test."""

from __future__ import annotations

from typing import Any

GUEST_BOOK: dict[str, Any] = {
    "name": "Guest book",
    "description": "Leave a word for the wedding, and vote for the first dance.",
    "collections": {"entries": {}, "votes": {}},
    "routes": {
        "sign": {
            "kind": "mutation",
            "title": "Sign the guest book",
            "description": "Add an entry to the guest book.",
            "input": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 60},
                    "message": {"type": "string", "minLength": 1, "maxLength": 1000},
                },
                "required": ["name", "message"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "required": ["id"]},
            "steps": [
                {
                    "insert": {
                        "collection": "entries",
                        "value": "{'name': params.name, 'message': params.message, 'by': caller.id, "
                        "'role': caller.role, 'at': now}",
                    },
                    "as": "entry",
                },
                {"return": "entry"},
            ],
        },
        "vote": {
            "kind": "mutation",
            "title": "Vote",
            "description": "Vote for a song, once per visitor.",
            "input": {
                "type": "object",
                "properties": {"song": {"type": "string", "enum": ["Moon River", "At Last"]}},
                "required": ["song"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "required": ["id"]},
            "steps": [
                {"count": {"collection": "votes", "where": {"by": "caller.id"}}, "as": "mine"},
                {"fail": {"when": "mine > 0", "message": "'You have voted already.'"}},
                {"insert": {"collection": "votes", "value": "{'song': params.song, 'by': caller.id}"}, "as": "v"},
                {"return": "v"},
            ],
        },
        "remove_entry": {
            "kind": "mutation",
            "title": "Remove",
            "description": "Remove an entry.",
            "input": {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "required": ["deleted"]},
            "steps": [
                {"delete": {"collection": "entries", "id": "params.id"}, "as": "gone"},
                {"return": "{'deleted': gone.id}"},
            ],
        },
        "entries": {
            "kind": "query",
            "title": "Entries",
            "start": True,
            "columns": ["name", "message"],
            "row_actions": ["remove_entry"],
            "description": "The guest book, newest first.",
            "input": {"type": "object", "additionalProperties": False},
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "message": {"type": "string"}},
                    "required": ["id", "name"],
                },
            },
            "steps": [
                {"find": {"collection": "entries", "order_by": ["-at"], "limit": "50"}, "as": "found"},
                {"return": "found.map(e, {'id': e.id, 'name': e.name, 'message': e.message})"},
            ],
        },
        "whoami": {
            "kind": "query",
            "title": "Who am I",
            "description": "The caller as the route sees them.",
            "input": {"type": "object", "additionalProperties": False},
            "output": {"type": "object", "required": ["id", "role"]},
            "steps": [{"return": "{'id': caller.id, 'role': caller.role}"}],
        },
    },
}
