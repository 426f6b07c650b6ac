"""The floor mode's SQL capture: statements read back from a PostgreSQL log, and the pgbench script made of them.

No figures are asserted (benchmarks print them); these check that the replay runs the call's own statements.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import mcp_calls  # noqa: E402 (a script's module, found through the path above)

LOG = """\
2026-12-01 15:53:01.100 UTC [4100] LOG:  received SIGHUP, reloading configuration files
2026-12-01 15:53:01.101 UTC [4100] LOG:  parameter "log_statement" changed to "all"
2026-12-01 15:53:01.660 UTC [4242] LOG:  statement: SELECT set_config('TimeZone', 'UTC', false)
2026-12-01 15:53:01.661 UTC [4243] LOG:  statement: SELECT "token"."id" FROM "token" WHERE "key" = 'abc'
2026-12-01 15:53:01.662 UTC [4242] LOG:  statement: BEGIN
2026-12-01 15:53:01.663 UTC [4242] LOG:  execute <unnamed>: INSERT INTO "record" (record_id, data)
\tVALUES ('0f6c1a52-2d4e-4b8e-9d0a-3c1e2f4a5b6c', '{"at": "15:53:01"}');
2026-12-01 15:53:01.664 UTC [4242] LOG:  statement: COMMIT
"""


def test_statements_are_read_with_their_backend_and_continuation_lines():
    assert mcp_calls._statements_logged(LOG) == [
        (4242, "SELECT set_config('TimeZone', 'UTC', false)"),
        (4243, """SELECT "token"."id" FROM "token" WHERE "key" = 'abc'"""),
        (4242, "BEGIN"),
        (
            4242,
            'INSERT INTO "record" (record_id, data)\n'
            "\tVALUES ('0f6c1a52-2d4e-4b8e-9d0a-3c1e2f4a5b6c', '{\"at\": \"15:53:01\"}')",
        ),
        (4242, "COMMIT"),
    ]


def test_statements_sent_with_server_side_parameters_get_their_values_inline():
    log = (
        "2026-12-01 15:53:01.663 UTC [4242] LOG:  execute _pg3_0: SELECT 1 FROM t WHERE a = $1 AND b = $2\n"
        "\tAND c = $10 AND d IS NOT DISTINCT FROM $3\n"
        "2026-12-01 15:53:01.663 UTC [4242] DETAIL:  parameters: $1 = 'it''s, $2', $2 = '7', $3 = NULL, "
        + ", ".join(f"${n} = '{n}'" for n in range(4, 11))
        + "\n2026-12-01 15:53:01.664 UTC [4242] LOG:  statement: COMMIT\n"
    )
    assert mcp_calls._statements_logged(log) == [
        (4242, "SELECT 1 FROM t WHERE a = 'it''s, $2' AND b = '7'\n\tAND c = '10' AND d IS NOT DISTINCT FROM NULL"),
        (4242, "COMMIT"),
    ]


def test_the_replay_keeps_each_connection_together_and_inserts_a_fresh_record_id():
    script = mcp_calls._replay_script(
        mcp_calls._statements_logged(LOG), record_id="0f6c1a52-2d4e-4b8e-9d0a-3c1e2f4a5b6c"
    )
    assert script.splitlines() == [
        "\\set rid random(1, 1000000000000000)",
        "SELECT set_config('TimeZone', 'UTC', false);",
        "BEGIN;",
        'INSERT INTO "record" (record_id, data)',
        "\tVALUES ('replay-:rid', '{\"at\": \"15:53:01\"}');",
        "COMMIT;",
        """SELECT "token"."id" FROM "token" WHERE "key" = 'abc';""",
    ]
