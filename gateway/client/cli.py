"""`gateway tasks ...`: create, follow, list, cancel and download tasks of a running gateway.

These commands are HTTP clients (`TaskClient`): they read no store and no routing file, only
`--base-url`/`--api-key` or GATEWAY_BASE_URL (default http://127.0.0.1:8080/v1) and
GATEWAY_API_KEY. stdout carries results only: a task id (create), the task as JSON (get,
cancel, wait), one line per task (list), saved file paths one per line (--out, download).
Progress and errors go to stderr, errors as one line. Exit codes: 0 ok, 1 the call or the task
failed (bad key, gateway down, task failed or canceled, timeout), 2 bad usage (including a
request the gateway refused as invalid).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.client.errors import (
    BadRequest,
    ClientError,
    TransportError,
    ValidationError,
    WaitTimeout,
)
from gateway.client.models import TERMINAL_STATUSES, Task

if TYPE_CHECKING:
    from gateway.client.client import Reference, TaskClient

__all__ = ["DEFAULT_BASE_URL", "add_parser", "run"]

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
_HTTP_TIMEOUT = 60.0
_STATUSES = ("queued", "running", "succeeded", "failed", "canceled")
_CAPABILITIES = ("text_to_image", "image_to_image", "text_to_music", "reference_audio_to_music")
_ASPECT_RATIOS = ("auto", "1:1", "16:9", "9:16", "4:3", "3:4", "2:1")
_REFERENCE_PREFIXES = ("art_", "https://", "http://", "data:")


class _UsageError(Exception):
    """A mistake in the command line found before any call (exit 2)."""


def _err(message: str) -> None:
    print(f"gateway: {message}", file=sys.stderr)


def _count(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"an integer from {low} to {high}")
        return int(text)

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("a number of seconds above 0")
    return value


def add_parser(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `tasks` and its actions to the `gateway` command's subcommands."""
    connection = argparse.ArgumentParser(add_help=False)
    connection.add_argument("--base-url", help=f"env GATEWAY_BASE_URL, default {DEFAULT_BASE_URL}")
    connection.add_argument("--api-key", help="env GATEWAY_API_KEY")
    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument(
        "--timeout", type=_seconds, default=600.0, help="seconds to wait (default 600)"
    )
    waiting.add_argument("--out", metavar="DIR", help="save the output files here")

    tasks = subcommands.add_parser(
        "tasks", help="image and music tasks of a running gateway (HTTP API client)"
    )
    actions = tasks.add_subparsers(dest="tasks_action", required=True)
    create = actions.add_parser("create", help="create a task; prints its id").add_subparsers(
        dest="kind", required=True
    )

    image = create.add_parser(
        "image", parents=[connection, waiting], help="text to image, or image to image"
    )
    image.add_argument("--prompt", required=True)
    image.add_argument("--model", default="auto")
    image.add_argument("--quality", choices=("standard", "hd"))
    image.add_argument("--aspect-ratio", choices=_ASPECT_RATIOS)
    image.add_argument("--n", type=_count(1, 4), help="images, 1 to 4")
    image.add_argument(
        "--image",
        action="append",
        metavar="REF",
        help="a reference image: file path, art_ id, https URL or data URI (repeat for more; "
        "makes it image to image)",
    )
    _create_options(image)

    music = create.add_parser(
        "music", parents=[connection, waiting], help="text to music, or from reference audio"
    )
    music.add_argument("--prompt", required=True)
    music.add_argument("--model", default="auto")
    music.add_argument("--lyrics")
    music.add_argument("--instrumental", action="store_true")
    music.add_argument("--title")
    music.add_argument("--reference-audio", metavar="REF", help="file path, art_ id or https URL")
    _create_options(music)

    wait = actions.add_parser(
        "wait", parents=[connection, waiting], help="wait for a task; prints it or its files"
    )
    wait.add_argument("task_id")
    get = actions.add_parser("get", parents=[connection], help="print a task as JSON")
    get.add_argument("task_id")
    listing = actions.add_parser(
        "list", parents=[connection], help="recent tasks, newest first: id, status, ..."
    )
    listing.add_argument("--status", choices=_STATUSES)
    listing.add_argument("--capability", choices=_CAPABILITIES)
    listing.add_argument("--limit", type=_count(1, 1_000_000), default=20, help="default 20")
    listing.add_argument("--all", action="store_true", help="every task (all pages)")
    listing.add_argument("--json", action="store_true", help="one JSON task per line")
    cancel = actions.add_parser("cancel", parents=[connection], help="request cancellation")
    cancel.add_argument("task_id")
    download = actions.add_parser(
        "download", parents=[connection], help="save a succeeded task's files"
    )
    download.add_argument("task_id")
    download.add_argument("--out", metavar="DIR", required=True)
    upload = actions.add_parser(
        "upload", parents=[connection], help="upload an image or audio file; prints its art_ id"
    )
    upload.add_argument("file")


def _create_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metadata", action="append", metavar="KEY=VALUE", help="repeat for more entries"
    )
    parser.add_argument("--idempotency-key", help="default: a new one per run")
    parser.add_argument("--wait", action="store_true", help="wait for the task to finish")


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed `gateway tasks ...` command; returns the exit code."""
    from gateway.client.client import TaskClient

    try:
        base_url = args.base_url or os.environ.get("GATEWAY_BASE_URL") or DEFAULT_BASE_URL
        api_key = args.api_key or os.environ.get("GATEWAY_API_KEY")
        if not api_key:
            raise _UsageError("no API key: pass --api-key or set GATEWAY_API_KEY")
        if not base_url.startswith(("http://", "https://")):
            raise _UsageError(f"--base-url: not an http(s) URL: {base_url}")
        with TaskClient(base_url, api_key, timeout=_HTTP_TIMEOUT) as client:
            return _ACTIONS[args.tasks_action](client, args)
    except _UsageError as exc:
        _err(str(exc))
        return 2
    except (ValidationError, BadRequest) as exc:
        _err(_explain(exc))
        return 2
    except TransportError as exc:
        _err(f"{exc} (is the gateway running at {base_url}?)")
        return 1
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (ClientError, OSError) as exc:
        _err(_explain(exc))
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


def _explain(exc: BaseException) -> str:
    if isinstance(exc, ValidationError | BadRequest) and exc.details:
        fields = "; ".join(f"{d.field}: {d.message}" for d in exc.details)
        return f"{exc.status} {exc.code}: {fields}" + (
            f" (request {exc.request_id})" if exc.request_id else ""
        )
    return str(exc)


def _print_json(task: Task) -> None:
    print(msgspec.json.format(msgspec.json.encode(_as_sent(task)), indent=2).decode())


def _as_sent(task: Task) -> dict[str, object]:
    """The task with the output fields of its kind only (`images` or `clips`), as the gateway
    sends it: the client's `TaskOutput` has both, one of them always empty."""
    data: dict[str, object] = msgspec.to_builtins(task)
    output = data.get("output")
    if isinstance(output, dict):
        other = "images" if task.capability.endswith("_music") else "clips"
        output.pop(other, None)
    return data


def _create(client: TaskClient, args: argparse.Namespace) -> int:
    metadata = _metadata(args.metadata or [])
    common: dict[str, Any] = {
        "prompt": args.prompt,
        "model": args.model,
        "metadata": metadata,
        "idempotency_key": args.idempotency_key,
    }
    if args.kind == "image":
        common |= {"quality": args.quality, "aspect_ratio": args.aspect_ratio, "n": args.n}
        if args.image:
            refs = [_reference(client, "--image", value) for value in args.image]
            task = client.image_to_image(image=refs[0], extra_images=refs[1:], **common)
        else:
            task = client.create_image(**common)
    else:
        common |= {"lyrics": args.lyrics, "title": args.title}
        common["instrumental"] = True if args.instrumental else None
        if args.reference_audio:
            audio = _reference(client, "--reference-audio", args.reference_audio)
            task = client.reference_audio_to_music(reference_audio=audio, **common)
        else:
            task = client.create_music(**common)
    if not (args.wait or args.out):
        print(task.task_id)
        return 0
    return _follow(client, task.task_id, args)


def _metadata(pairs: list[str]) -> dict[str, str]:
    metadata = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise _UsageError(f"--metadata: expected KEY=VALUE, got {pair!r}")
        metadata[key] = value
    return metadata


def _reference(client: TaskClient, option: str, value: str) -> Reference:
    """An id, URL or data URI as given; a local file is uploaded first."""
    if value.startswith(_REFERENCE_PREFIXES):
        return value
    path = Path(value)
    if not path.is_file():
        raise _UsageError(f"{option}: no such file, and not an art_ id or URL: {value}")
    return client.upload(path)


def _wait(client: TaskClient, args: argparse.Namespace) -> int:
    return _follow(client, args.task_id, args)


def _follow(client: TaskClient, task_id: str, args: argparse.Namespace) -> int:
    """Wait with progress on stderr; then the task (or its saved files) on stdout."""
    from gateway.client.progress_view import ProgressView

    view = ProgressView(sys.stderr)
    try:
        task = client.wait(task_id, timeout=args.timeout, on_progress=view)
    except WaitTimeout:
        view.finish()
        raise
    view.finish()
    if task.status != "succeeded":
        if not args.out:
            _print_json(task)
        _err(_outcome(task))
        return 1
    if args.out:
        for path in client.download(task, args.out):
            print(path)
    else:
        _print_json(task)
    return 0


def _outcome(task: Task) -> str:
    if task.error is not None:
        return f"task {task.task_id} {task.status}: {task.error.code}: {task.error.message}"
    return f"task {task.task_id} {task.status}"


def _get(client: TaskClient, args: argparse.Namespace) -> int:
    _print_json(client.get(args.task_id))
    return 0


def _cancel(client: TaskClient, args: argparse.Namespace) -> int:
    task = client.cancel(args.task_id)
    _print_json(task)
    if task.status in TERMINAL_STATUSES and task.status != "canceled":
        _err(f"task {task.task_id} had already {task.status}; nothing to cancel")
    return 0


def _list(client: TaskClient, args: argparse.Namespace) -> int:
    found = client.list(status=args.status, capability=args.capability, limit=min(args.limit, 100))
    for task in found if args.all else itertools.islice(found, args.limit):
        if args.json:
            print(msgspec.json.encode(_as_sent(task)).decode())
        else:
            created = task.created_at.isoformat() if task.created_at else "-"
            print(f"{task.task_id}\t{task.status}\t{task.capability}\t{created}")
    return 0


def _download(client: TaskClient, args: argparse.Namespace) -> int:
    for path in client.download(args.task_id, args.out):
        print(path)
    return 0


def _upload(client: TaskClient, args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise _UsageError(f"no such file: {args.file}")
    print(client.upload(path).artifact_id)
    return 0


_ACTIONS: dict[str, Callable[[TaskClient, argparse.Namespace], int]] = {
    "create": _create,
    "wait": _wait,
    "get": _get,
    "list": _list,
    "cancel": _cancel,
    "download": _download,
    "upload": _upload,
}
