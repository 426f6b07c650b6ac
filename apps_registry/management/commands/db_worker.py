"""`manage.py db_worker`: django-tasks-db's worker, which also keeps schedules running when their tasks are lost
(services/schedules.py): as it starts, and every CHARMING_SCHEDULE_SWEEP_SECONDS while it runs (a thread of its
own), it queues again the task of every schedule whose due time passed with no task waiting or running for it (a
worker killed mid-run, a task that failed)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django_tasks_db.management.commands.db_worker import Command as TaskWorker

from apps_registry.services.schedules import schedules_recover

logger = logging.getLogger(__name__)


def _sweep_forever(every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        close_old_connections()
        try:
            schedules_recover()
        except Exception:  # the database away for a moment: the next sweep tries again
            logger.exception("schedules: the sweep for lost tasks failed")
        finally:
            connection.close()


class Command(TaskWorker):
    help = TaskWorker.help

    def handle(self, *args: Any, **options: Any) -> None:
        schedules_recover()
        stop = threading.Event()
        sweeper = threading.Thread(
            target=_sweep_forever, args=(settings.CHARMING_SCHEDULE_SWEEP_SECONDS, stop), daemon=True
        )
        sweeper.start()
        try:
            super().handle(*args, **options)
        finally:
            stop.set()
