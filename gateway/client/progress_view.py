"""A task's progress on a terminal: a bar redrawn in place on a TTY, plain lines otherwise
(a log file or a pipe gets one line per change, never carriage returns)."""

from __future__ import annotations

import shutil
from typing import TextIO

from gateway.client.models import Task

__all__ = ["ProgressView"]

_BAR = 24


class ProgressView:
    """Call it with each new state of a task (`TaskClient.wait(on_progress=...)`)."""

    def __init__(self, stream: TextIO, *, tty: bool | None = None) -> None:
        self._stream = stream
        self._tty = stream.isatty() if tty is None else tty
        self._drawn = False

    def __call__(self, task: Task) -> None:
        percent = max(0.0, min(100.0, task.progress.percent))
        stage = task.progress.stage or task.status
        if not self._tty:
            self._stream.write(f"{task.task_id} {task.status} {percent:.0f}% {stage}\n")
            self._stream.flush()
            return
        filled = round(_BAR * percent / 100)
        line = f"{task.task_id} [{'#' * filled}{'-' * (_BAR - filled)}] {percent:3.0f}% {stage}"
        width = shutil.get_terminal_size((80, 24)).columns
        self._stream.write("\r" + line[: width - 1].ljust(width - 1))
        self._drawn = True
        if task.terminal:
            self.finish()
        self._stream.flush()

    def finish(self) -> None:
        """End the bar's line (once), so what follows starts on a line of its own."""
        if self._drawn:
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False
