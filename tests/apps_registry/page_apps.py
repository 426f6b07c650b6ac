"""An app whose results are nested (a month report: totals, a table per category, expenses with a list of
tags and a split between people) and drawn as charts (totals by month as bars, by day as a line), with a
hidden collection: the app page's renderers and the browser tests draw it beside the examples."""

from __future__ import annotations

from typing import Any

EUR = {"type": "number", "x-charming-unit": "EUR"}

SPENDING: dict[str, Any] = {
    "name": "Spending",
    "description": "Where the money goes, month by month.",
    "collections": {"expenses": {"indexes": [["day"]]}, "expense_tags": {"hidden": True}},
    "routes": {
        "add_expense": {
            "kind": "mutation",
            "title": "Add an expense",
            "help": "What you paid, for what, and on which day.",
            "description": "Record one expense. `day` is an ISO date; `split` lists who shares it.",
            "input": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0, "x-charming-unit": "EUR"},
                    "category": {"type": "string", "minLength": 1, "maxLength": 40},
                    "day": {"type": "string", "format": "date"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["amount", "category", "day"],
                "additionalProperties": False,
            },
            "output": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "amount": EUR, "category": {"type": "string"}},
                "required": ["id", "amount"],
            },
            "steps": [
                {
                    "insert": {
                        "collection": "expenses",
                        "value": "{'amount': params.amount, 'category': params.category, 'day': params.day, "
                        "'tags': has(params.tags) ? params.tags : [], "
                        "'split': [{'who': 'me', 'share': 1.0}], 'paid': true}",
                    },
                    "as": "e",
                },
                {"insert": {"collection": "expense_tags", "value": "{'expense': e.id}"}},
                {"return": "{'id': e.id, 'amount': e.amount, 'category': e.category}"},
            ],
        },
        "forget_expense": {
            "kind": "mutation",
            "title": "Forget",
            "description": "Delete one expense.",
            "input": {
                "type": "object",
                "properties": {
                    "expense": {"type": "string", "x-charming-record": "expenses", "x-charming-label": "category"}
                },
                "required": ["expense"],
                "additionalProperties": False,
            },
            "output": {"type": "object", "properties": {"deleted": {"type": "boolean"}}},
            "steps": [
                {"delete": {"collection": "expenses", "id": "params.expense"}},
                {"return": "{'deleted': true}"},
            ],
        },
        "by_month": {
            "kind": "query",
            "title": "Spent by month",
            "view": "chart",
            "chart": {"type": "bar", "x": "month", "y": "total"},
            "help": "Each month's total.",
            "description": "Totals by month, oldest first: aggregate rows.",
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"month": {"type": "string"}, "total": EUR, "n": {"type": "integer"}},
                },
            },
            "steps": [
                {
                    "aggregate": {
                        "collection": "expenses",
                        "group_by": {"month": {"bucket": "month", "field": "day"}},
                        "values": {"total": {"sum": "amount"}, "n": {"count": True}},
                        "order_by": "month",
                        "limit": "24",
                    },
                    "as": "rows",
                },
                {"return": "rows"},
            ],
        },
        "by_day": {
            "kind": "query",
            "title": "Spent by day",
            "view": "chart",
            "chart": {"type": "line", "x": "day", "y": ["total", "average"]},
            "description": "Totals by day.",
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"day": {"type": "string", "format": "date"}, "total": EUR, "average": EUR},
                },
            },
            "steps": [
                {
                    "aggregate": {
                        "collection": "expenses",
                        "group_by": {"day": "day"},
                        "values": {"total": {"sum": "amount"}, "average": {"avg": "amount"}},
                        "order_by": "day",
                        "limit": "60",
                    },
                    "as": "rows",
                },
                {"return": "rows"},
            ],
        },
        "month_report": {
            "kind": "query",
            "title": "Month report",
            "start": True,
            "row_actions": [{"route": "forget_expense", "param": "expense"}],
            "description": "One month: its total, totals per category and every expense; pass `month` as YYYY-MM.",
            "input": {
                "type": "object",
                "properties": {
                    "month": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$", "description": "Like 2026-11"}
                },
                "additionalProperties": False,
            },
            "output": {
                "type": "object",
                "properties": {
                    "month": {"type": "string"},
                    "total": EUR,
                    "categories": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"category": {"type": "string"}, "total": EUR, "n": {"type": "integer"}},
                        },
                    },
                    "expenses": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "day": {"type": "string", "format": "date"},
                                "category": {"type": "string"},
                                "amount": EUR,
                                "paid": {"type": "boolean"},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "split": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {"who": {"type": "string"}, "share": {"type": "number"}},
                                    },
                                },
                            },
                        },
                    },
                },
            },
            "steps": [
                {"let": "has(params.month) ? params.month : '2026-11'", "as": "month"},
                {
                    "aggregate": {
                        "collection": "expenses",
                        "where": {"day": {"gte": "month + '-01'", "lte": "month + '-31'"}},
                        "group_by": {"category": "category"},
                        "values": {"total": {"sum": "amount"}, "n": {"count": True}},
                        "order_by": "-total",
                        "limit": "50",
                    },
                    "as": "categories",
                },
                {
                    "find": {
                        "collection": "expenses",
                        "where": {"day": {"gte": "month + '-01'", "lte": "month + '-31'"}},
                        "order_by": "day",
                        "limit": "100",
                    },
                    "as": "expenses",
                },
                {
                    "sum": {
                        "collection": "expenses",
                        "field": "amount",
                        "where": {"day": {"gte": "month + '-01'", "lte": "month + '-31'"}},
                    },
                    "as": "total",
                },
                {"return": "{'month': month, 'total': total, 'categories': categories, 'expenses': expenses}"},
            ],
        },
    },
}

SPENDING_EXPENSES = [
    {"amount": 700, "category": "rent", "day": "2026-11-01", "tags": ["home"]},
    {"amount": 42.5, "category": "food", "day": "2026-11-03", "tags": ["market", "weekly"]},
    {"amount": 18.2, "category": "food", "day": "2026-11-09"},
    {"amount": 64.0, "category": "travel", "day": "2026-11-12", "tags": ["train"]},
    {"amount": 700, "category": "rent", "day": "2026-10-01"},
    {"amount": 55.75, "category": "food", "day": "2026-10-15"},
    {"amount": 700, "category": "rent", "day": "2026-09-01"},
    {"amount": 12.0, "category": "food", "day": "2026-09-20"},
]
