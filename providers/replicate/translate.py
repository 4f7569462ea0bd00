"""Replicate's wire types and the translation of a MusicRequest into a MusicGen prediction.

MusicGen's input (the `meta/musicgen` schema): `prompt`, `duration` (seconds),
`output_format` (wav|mp3), `input_audio` (a file URL or data URL whose melody the music
follows), plus model knobs (`model_version`, `continuation`, `temperature`, `top_k`, `seed`,
...) taken as they are from the request's `model_options`, which Replicate validates (a bad
one is a 422 naming the field). MusicGen makes instrumental music only: lyrics are refused
before any call, and `instrumental` needs no field.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from providers.base import MusicRequest
from providers.errors import ProviderError, UpstreamRejectedRequest
from providers.replicate.options import Options

__all__ = [
    "Prediction",
    "UploadedFile",
    "clip_title",
    "create_call",
    "decode",
    "failure_message",
    "log_percent",
    "output_urls",
    "passing_failure",
    "prediction_input",
]

_MODEL = re.compile(r"^(?P<owner>[\w.-]+)/(?P<name>[\w.-]+)(?::(?P<version>[0-9a-f]{8,}))?$")
_PERCENT = re.compile(r"(\d{1,3})%\|")  # tqdm bars in the model's logs: " 42%|████ | 210/500"
_SET_BY_THE_GATEWAY = ("prompt", "input_audio")
# Replicate's words for a run stopped by its own infrastructure, not by the input or the model:
# "Prediction interrupted; please retry (code: PA)".
_PASSING = re.compile(r"please retry|interrupted|\(code: PA\)", re.IGNORECASE)
_MAX_FAILURE = 500
_TITLE_WORDS = 6
_TITLE_CHARS = 60
_T = TypeVar("_T")


class Prediction(msgspec.Struct, kw_only=True):
    """The fields of a prediction object the adapter reads (others are ignored)."""

    id: str
    status: str  # starting, processing, succeeded, failed, canceled, aborted
    output: Any = None
    error: Any = None
    logs: str | None = None


class _FileUrls(msgspec.Struct):
    get: str


class UploadedFile(msgspec.Struct):
    """The answer of `POST /files`: `urls.get` is what a prediction's input may point at."""

    id: str
    urls: _FileUrls


def decode(raw: bytes, type: type[_T], what: str) -> _T:
    """`raw` as `type`; ProviderError naming `what` when it is not."""
    try:
        return msgspec.json.decode(raw, type=type)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProviderError(f"the upstream sent a malformed {what}: {exc}") from exc


def create_call(model: str, input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(path, body) of the create call: `owner/name:version` by version, `owner/name` by
    model; ProviderError for another shape (the routing file's `upstream_model` is wrong)."""
    match = _MODEL.match(model)
    if match is None:
        raise ProviderError(
            f"upstream model {model!r} is not 'owner/name' or 'owner/name:version' (check the"
            " model's upstream_model)"
        )
    if match["version"]:
        return "/predictions", {"version": match["version"], "input": input}
    return f"/models/{match['owner']}/{match['name']}/predictions", {"input": input}


def prediction_input(request: MusicRequest, options: Options) -> dict[str, Any]:
    """MusicGen's input for the request (the caller adds `input_audio` for a reference);
    UpstreamRejectedRequest for what MusicGen cannot do."""
    if request.lyrics is not None:
        raise UpstreamRejectedRequest(
            "MusicGen makes instrumental music and cannot sing lyrics; omit `lyrics`"
        )
    for key in _SET_BY_THE_GATEWAY:
        if key in request.options:
            raise UpstreamRejectedRequest(
                f"model_options cannot set {key!r}: it comes from the request itself"
            )
    values: dict[str, Any] = {
        "prompt": request.prompt,
        "duration": options.duration_seconds,
        "output_format": options.output_format,
    }
    values.update(request.options)
    return values


def failure_message(error: object) -> str:
    """A failed prediction's `error` as the message to show: its text (the end of a long one,
    where a traceback says what went wrong), or a note that Replicate gave none."""
    text = error if isinstance(error, str) else "" if error is None else str(error)
    text = text.strip()
    if not text:
        return "the prediction failed without an error message"
    return text if len(text) <= _MAX_FAILURE else "…" + text[-(_MAX_FAILURE - 1) :]


def passing_failure(message: str) -> bool:
    """Whether a failed prediction's error says the run was interrupted (retrying may work),
    rather than failed because of the input or the model (it would fail again)."""
    return _PASSING.search(message) is not None


def log_percent(logs: str | None) -> float | None:
    """The last progress percentage in the model's logs, if it printed one."""
    if not logs:
        return None
    found = _PERCENT.findall(logs[-2000:])
    return min(float(found[-1]), 100.0) if found else None


def output_urls(output: object) -> list[str]:
    """The file URLs of a succeeded prediction (MusicGen gives one; some models a list)."""
    if isinstance(output, str):
        return [output]
    if isinstance(output, list) and output and all(isinstance(item, str) for item in output):
        return list(output)
    raise ProviderError(f"the prediction succeeded without audio files (output: {output!r:.200})")


def clip_title(request: MusicRequest, take: int) -> str:
    """The request's title, else the prompt's first words; later takes add " (take N)"."""
    title = request.title
    if not title:
        title = " ".join(request.prompt.split()[:_TITLE_WORDS])[:_TITLE_CHARS].strip(" ,.;:!?-")
        title = title[:1].upper() + title[1:] if title else "Untitled"
    return title if take == 0 else f"{title} (take {take + 1})"
