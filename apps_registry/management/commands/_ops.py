"""Shared by the operator commands (purge_storage, restore_storage, purge_app); not a command itself."""

from __future__ import annotations

import shutil
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from tqdm import tqdm

from apps_registry.selectors import StorageUsage

# Exit codes, shared by the commands and documented in their help and docs/operations.md
# (0, done, is Django's own).
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Without a terminal, a progress line at most this often.
PROGRESS_LINE_SECONDS = 2.0

EXIT_CODES_HELP = (
    "Exit codes: 0 done (or nothing to do); 1 an error, a refusal or a declined confirmation (nothing more "
    "was changed); 2 bad usage (unknown option, malformed id or number); 130 interrupted (Ctrl-C): "
    "re-run the same command to resume."
)


class OpsCommand(BaseCommand):
    """An operator command: Ctrl-C anywhere ends it with exit code 130 and a hint, never a traceback."""

    interrupted_hint = "Re-run the same command to resume."

    def execute(self, *args: Any, **options: Any) -> str | None:
        try:
            return super().execute(*args, **options)
        except KeyboardInterrupt:
            raise interrupted(self.interrupted_hint) from None


class Progress:
    """Batch progress: a tqdm bar on a terminal, plain lines (every PROGRESS_LINE_SECONDS at most) otherwise."""

    def __init__(self, stdout: OutputWrapper, *, label: str, total: int) -> None:
        self.stdout = stdout
        self.label = label
        self.last_line = time.monotonic()
        self.bar: Any = None
        if stdout.isatty():
            # A pty that reports a 0x0 size would make tqdm draw nothing: pass a size, with a fallback.
            size = shutil.get_terminal_size((100, 20))
            self.bar = tqdm(
                total=total,
                desc=label,
                unit="rec",
                file=stdout._out,
                ncols=min(size.columns or 100, 120),
                nrows=size.lines or 20,
                leave=True,
            )

    def __call__(self, done: int, total: int) -> None:
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            return
        now = time.monotonic()
        if now - self.last_line >= PROGRESS_LINE_SECONDS:
            self.stdout.write(f"  {self.label}: {done}/{total} records deleted")
            self.last_line = now

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def confirm(question: str) -> bool:
    """Ask on the terminal; anything but 'yes' (or no terminal at all) is a no."""
    try:
        answer = input(f"{question} Type 'yes' to continue: ")
    except (EOFError, OSError):
        return False
    return answer.strip().lower() == "yes"


def declined() -> CommandError:
    return CommandError("Not confirmed: nothing was deleted. Answer 'yes', or pass --yes to skip the question.")


def interrupted(hint: str) -> CommandError:
    return CommandError(f"Interrupted. {hint}", returncode=EXIT_INTERRUPTED)


def add_batch_size_argument(parser: Any, default: int) -> None:
    parser.add_argument(
        "--batch-size",
        type=int,
        default=default,
        metavar="N",
        help=f"Records deleted per transaction (default {default}).",
    )


def positive_batch_size(value: int) -> int:
    if value < 1:
        raise CommandError(f"--batch-size must be a positive number of records, got {value}.", returncode=EXIT_USAGE)
    return value


def human_size(size: int) -> str:
    amount = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


def describe_storage(usage: StorageUsage) -> str:
    """One line per retained storage: its id, the app it belonged to, owner, records and size."""
    storage = usage.storage
    detached = f"{storage.detached_at:%Y-%m-%d %H:%M} UTC" if storage.detached_at else "attached"
    return (
        f"storage {storage.id}  app '{storage.app_name}' ({storage.app_uuid})  owner {storage.owner_name}  "
        f"{usage.records} records  {human_size(usage.size)}  detached {detached}"
    )
