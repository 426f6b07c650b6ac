from __future__ import annotations

import pytest
from django.db import connection

from tests.factories import StaffFactory, UserFactory


@pytest.fixture
def user(db):
    return UserFactory(username="alice")


@pytest.fixture
def other_user(db):
    return UserFactory(username="bob")


@pytest.fixture
def staff(db):
    return StaffFactory(username="staffer")


def pytest_collection_modifyitems(config, items):
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (row locks and truly concurrent transactions); set DATABASE_URL")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)
