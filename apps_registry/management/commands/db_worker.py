"""`manage.py db_worker`: django-tasks-db's worker, which first queues again the tasks of schedules whose due time
passed while no worker ran (services/schedules.py: a worker killed mid-run leaves its due time to be run again)."""

from __future__ import annotations

from typing import Any

from django_tasks_db.management.commands.db_worker import Command as TaskWorker

from apps_registry.services.schedules import schedules_recover


class Command(TaskWorker):
    help = TaskWorker.help

    def handle(self, *args: Any, **options: Any) -> None:
        schedules_recover()
        super().handle(*args, **options)
