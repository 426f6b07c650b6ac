"""Secrets of every shape Charming redacts, and an app whose routes echo what they are given (issue 12, finding 6)."""

from __future__ import annotations

# (name, the text a caller or a route may put in an error, the part that must never come back)
SECRETS = [
    ("connection-string", "postgres://app:hunter2pass@db.internal:5432/x", "hunter2pass"),
    ("charming-token", "chm_0a1b2c3d_Qw3rTy7UiOp9AsDf2GhJk", "Qw3rTy7UiOp9AsDf2GhJk"),
    ("bearer", "Bearer abcdefghijklmnop", "abcdefghijklmnop"),
    ("hook-secret", "whsec_abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("password", "password=hunter2pass", "hunter2pass"),
    ("secret", "secret=s3kr1t-value", "s3kr1t-value"),
    ("api-key", "api_key=AKIAZZZ99", "AKIAZZZ99"),
    ("token", "token=tok-123-abc", "tok-123-abc"),
    ("high-entropy", "Zx8Qp2Lm9Rt4Vb7Nc1Kd6Hs3Jf5Gw0Ya", "Zx8Qp2Lm9Rt4Vb7Nc1Kd6Hs3Jf5Gw0Ya"),
]
SECRET_IDS = [name for name, _text, _secret in SECRETS]
SECRET_PARAMS = [(text, secret) for _name, text, secret in SECRETS]

LEAKY = {
    "format": 1,
    "name": "Leaky",
    "collections": {"items": {}},
    "routes": {
        "fail_with": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]},
            "output": {"type": "object"},
            "steps": [{"fail": {"when": "true", "message": "params.msg", "details": "{'note': params.msg}"}}],
        },
        "wants_a_number": {
            "kind": "mutation",
            "input": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "output": {"type": "object"},
            "steps": [{"return": "{}"}],
        },
    },
}
