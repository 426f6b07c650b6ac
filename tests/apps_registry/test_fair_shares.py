"""Fair shares of the expensive shared work (issue 22): one account holds at most its share of a process's CEL
worker processes and of the service's test runs (saves and checks, across processes: the database), and is refused
at once with rate_limited and a retry hint beyond it, while other accounts' calls go on; a save's tests together
take at most `test_seconds`."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connections

from apps_registry.exceptions import RateLimited
from apps_registry.models import RateBudget
from apps_registry.routes import celworker, library
from apps_registry.services.definitions import app_definition_save, definition_dry_run
from apps_registry.services.rate_limits import LeaseRefused, author_tests_lease, concurrency_lease
from apps_registry.services.routes import route_run
from tests.factories import UserFactory

# 8,100 replacements in a 1,000-character string: about half a second of CEL in a worker process, within the
# iteration budget (RE2 regexes are linear, so no pattern is slow).
_NINETY = "[" + ", ".join(str(i) for i in range(90)) + "]"
SLOW_MATCH = f"{_NINETY}.map(a, {_NINETY}.map(b, params.s.replace('a', 'bb').size())).size() == 0"
SLOW_TEXT = "a" * 1000


def slow_definition(tests: int = 0) -> dict[str, Any]:
    route = {
        "kind": "query",
        "input": {"type": "object", "properties": {"s": {"type": "string"}}},
        "steps": [{"return": SLOW_MATCH}],
    }
    definition: dict[str, Any] = {"name": "Slow", "routes": {"slow": route}}
    if tests:
        definition["tests"] = [
            {"name": f"t{i}", "route": "slow", "params": {"s": SLOW_TEXT}, "expect": {"value": False}}
            for i in range(tests)
        ]
    return definition


def slow_call(user, app) -> Any:
    return route_run(actor=user, app_id=app.id, op="slow", params={"s": SLOW_TEXT}, kind="query").value


class Background(threading.Thread):
    """Runs `work` on a thread (its own database connection), keeping what it returned or raised."""

    def __init__(self, work) -> None:
        super().__init__(daemon=True)
        self.work, self.result, self.error = work, None, None

    def run(self) -> None:
        try:
            self.result = self.work()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error
        finally:
            connections.close_all()


def wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# --- CEL worker processes: per account, per process ---


@pytest.mark.django_db(transaction=True)
def test_an_account_holding_its_cel_worker_share_is_refused_at_once_and_another_account_is_not(settings):
    settings.CHARMING_CEL_WORKERS_PER_USER = 1
    settings.CHARMING_ROUTES_MAX_CEL_MS = 10_000  # room for the slow expression on a busy machine
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    alices = app_definition_save(actor=alice, definition=slow_definition())
    bobs = app_definition_save(actor=bob, definition=slow_definition())
    celworker.prestart(2)
    first = Background(lambda: slow_call(alice, alices))
    first.start()
    wait_until(lambda: celworker._held.get(str(alice.pk)) == 1)

    started = time.monotonic()
    with pytest.raises(RateLimited) as refused:
        slow_call(alice, alices)
    refused_in = time.monotonic() - started
    bobs_value = slow_call(bob, bobs)  # the other worker process is bob's to use meanwhile
    first.join(timeout=30)

    assert refused_in < 0.5, f"refused after {refused_in:.2f} s"
    assert refused.value.kind == "rate_limited" and refused.value.retry_after_seconds == 1
    assert refused.value.message == (
        "Route 'slow' steps[0].return: this expression needs a CEL worker process, and your calls already hold 1 of "
        f"this server's {celworker.MAX_RUNNING} (the most one account may hold at once, so others' calls are not kept "
        "waiting). Nothing was saved; try again in 1 second."
    )
    assert refused.value.details == {
        "limit": "cel_workers",
        "max": 1,
        "route": "slow",
        "step": "steps[0].return",
        "retry_after_seconds": 1,
    }
    assert bobs_value is False and first.error is None and first.result is False
    assert celworker._held == {}  # every share given back


def test_the_share_is_given_back_whatever_the_evaluation_did():
    with celworker.share("someone", 1):
        with pytest.raises(library.EvaluationError):
            celworker.evaluate("1 + 'a'", {}, 5.0)
        assert celworker.evaluate("[1, 2].map(x, x * 2)", {}, 5.0) == [2, 4]
    assert celworker._held == {}


# --- test runs: per account, across processes ---


@pytest.mark.django_db
def test_a_lease_has_its_places_and_frees_one_when_its_holder_ends():
    with concurrency_lease(key="k", slots=2, seconds=30), concurrency_lease(key="k", slots=2, seconds=30):
        with pytest.raises(LeaseRefused) as refused, concurrency_lease(key="k", slots=2, seconds=30):
            pass
        assert 29 < refused.value.wait <= 30
    with concurrency_lease(key="k", slots=1, seconds=30):
        assert RateBudget.objects.filter(key="lease:k:0").count() == 1
    assert not RateBudget.objects.filter(key__startswith="lease:").exists()


@pytest.mark.django_db
def test_a_lease_left_by_a_process_that_died_frees_its_place_when_it_runs_out():
    RateBudget.objects.create(key="lease:k:0", tat=time.time() - 1)  # its holder died a while ago
    with concurrency_lease(key="k", slots=1, seconds=30):
        assert RateBudget.objects.get(key="lease:k:0").tat > time.time()


@pytest.mark.django_db(transaction=True)
def test_an_account_running_tests_elsewhere_is_refused_another_run_at_once_and_others_are_not(settings):
    # The slow test's evaluation runs demoted: on a loaded machine it may need more than the default 1 s of CEL.
    settings.CHARMING_ROUTES_MAX_CEL_MS = 10_000
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    holding, release = threading.Event(), threading.Event()

    def other_process() -> None:  # a save on another connection (another process), its tests under way
        with author_tests_lease(user_id=alice.pk, seconds=60):
            holding.set()
            release.wait(30)

    elsewhere = Background(other_process)
    elsewhere.start()
    assert holding.wait(10)
    try:
        started = time.monotonic()
        with pytest.raises(RateLimited) as refused:
            definition_dry_run(actor=alice, definition=slow_definition(tests=1))
        refused_in = time.monotonic() - started
        bobs = definition_dry_run(actor=bob, definition=slow_definition(tests=1))
    finally:
        release.set()
        elsewhere.join(timeout=30)
    alices = definition_dry_run(actor=alice, definition=slow_definition(tests=1))  # once the other run ended

    assert refused_in < 0.5
    assert refused.value.message == (
        "Your account is already running the tests of a save or check (the most one account runs at once, so that "
        "every account gets its turn). Nothing ran; try again in 5 seconds, once it has finished."
    )
    assert refused.value.details == {
        "limit": "test_runs",
        "max": 1,
        "setting": "CHARMING_TEST_RUNS_PER_USER",
        "retry_after_seconds": 5,
    }
    assert [t.passed for t in bobs.tests] == [True], bobs.tests
    assert [t.passed for t in alices.tests] == [True], alices.tests


# --- a save's tests take test_seconds together at most ---


@pytest.mark.django_db
def test_fifty_slow_tests_stop_at_the_definitions_test_time_and_the_rest_are_not_run(user, settings):
    settings.CHARMING_ROUTES_MAX_TEST_SECONDS = 2
    celworker.prestart(1)

    started = time.monotonic()
    checked = definition_dry_run(actor=user, definition=slow_definition(tests=50))
    took = time.monotonic() - started

    # 2 s of tests, then at most the one under way (its CEL time is what was left), on a busy machine; 50 such
    # tests took 25 s or more before.
    assert took < 5, f"the check took {took:.1f} s"
    ran = [t for t in checked.tests if t.got.get("error") != "not_run"]
    not_run = [t for t in checked.tests if t.got.get("error") == "not_run"]
    assert 1 <= len(ran) < 12 and len(ran) + len(not_run) == 50
    assert [t.name for t in checked.tests[: len(ran)]] == [t.name for t in ran]  # in order: the rest after the stop
    first = not_run[0]
    assert not first.passed
    assert first.failures[0].startswith("not run: the tests before it took ")
    assert first.failures[0].endswith(
        "s, and a definition's tests may take 2 s together (test_seconds, CHARMING_ROUTES_MAX_TEST_SECONDS); make "
        "the slow ones faster (smaller generated records or comprehensions) or test less in one definition"
    )


# --- long evaluations yield the CPU; their children keep serving their owner ---


def test_a_long_evaluation_is_demoted_and_its_child_serves_its_owner_not_others():
    import os

    celworker._shutdown()  # no children left by earlier tests (demoted ones among them)
    celworker.prestart(2)
    with celworker.share("greedy", 1):
        celworker.evaluate(SLOW_MATCH, {"params": {"s": SLOW_TEXT}}, 10.0)
    demoted = [child for child in celworker._idle if child.demoted]
    assert demoted, "the long evaluation's child went back to the pool, demoted"
    assert os.getpriority(os.PRIO_PROCESS, demoted[0].process.pid) >= celworker.DEMOTED_NICE
    assert "greedy" in celworker._slow_owners

    celworker.prestart(3)  # a child never demoted beside it
    theirs, others = celworker._take("greedy"), celworker._take("someone else")
    assert theirs is not None and theirs.demoted
    assert others is not None and not others.demoted
    celworker._idle.extend([theirs, others])


def test_a_demoted_child_killed_at_its_deadline_is_replaced_demoted_for_its_owner_and_others_never_run_demoted():
    import os

    celworker._shutdown()
    celworker._slow_owners.clear()
    with celworker.share("greedy", 1), pytest.raises(celworker.Deadline):  # demoted at 50 ms, killed at 0.5 s
        celworker.evaluate(SLOW_MATCH, {"params": {"s": SLOW_TEXT * 4}}, 0.5)
    assert "greedy" in celworker._slow_owners, "an owner whose evaluation ran to its deadline ran long"
    (replacement,) = celworker._idle
    assert replacement.demoted
    assert os.getpriority(os.PRIO_PROCESS, replacement.process.pid) >= celworker.DEMOTED_NICE
    assert celworker._take("someone else") is None  # another account starts a fresh child rather than run demoted
    assert replacement.process.poll() is not None and not celworker._idle  # the demoted one made room for it
    with celworker.share("greedy", 1), pytest.raises(celworker.Deadline):
        celworker.evaluate(SLOW_MATCH, {"params": {"s": SLOW_TEXT * 4}}, 0.5)
    (replacement,) = celworker._idle

    celworker.prestart(2)  # a child never demoted beside it
    theirs, others = celworker._take("greedy"), celworker._take("someone else")
    assert theirs is replacement
    assert others is not None and not others.demoted
    celworker._idle.extend([theirs, others])


def test_a_killed_child_is_replaced_so_the_next_caller_does_not_wait_for_one_to_start():
    with pytest.raises(celworker.Deadline):
        celworker.evaluate(SLOW_MATCH, {"params": {"s": SLOW_TEXT * 4}}, 0.05)
    assert len(celworker._idle) >= 1
    assert all(child.process.poll() is None for child in celworker._idle)
