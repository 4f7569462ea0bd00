"""Files on the caller's disk: names with the right extension, written whole or not at all.

A download goes to a hidden temporary file in the destination folder and is renamed over the
final name only once every byte (and the expected size) arrived, so a reader never sees half a
file and an interrupted download leaves nothing behind.
"""

from __future__ import annotations

import functools
import mimetypes
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from gateway.client.errors import DownloadError

__all__ = ["extension_for", "guess_mime_type", "safe_name", "write_atomically"]

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/webp": ".webp",
    "image/gif": ".gif",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/vnd.wave": ".wav",
    "audio/mpeg": ".mp3",
    "audio/flac": ".flac",
    "audio/ogg": ".ogg",
    "audio/mp4": ".m4a",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@functools.cache
def _file_mode() -> int:
    """What a plain `open()` would give (mkstemp makes 0600): 0666 less the umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def extension_for(fmt: str | None, mime_type: str | None) -> str:
    """`.png`, `.wav`, ...: from the output's `format`, else its media type, else `.bin`."""
    if fmt:
        clean = safe_name(fmt.lower().lstrip("."))
        return ".jpg" if clean == "jpeg" else f".{clean}"
    if mime_type:
        base = mime_type.split(";", 1)[0].strip().lower()
        return _EXTENSIONS.get(base) or mimetypes.guess_extension(base) or ".bin"
    return ".bin"


def guess_mime_type(filename: str) -> str:
    """The media type an upload is labelled with (the gateway sniffs the bytes anyway)."""
    return mimetypes.guess_type(filename)[0] or "application/octet-stream"


def safe_name(name: str) -> str:
    """A file name with no path separators or odd characters (server text never picks a path)."""
    cleaned = _UNSAFE.sub("_", name).strip("._")
    return cleaned[:200] or "file"


def write_atomically(target: Path, chunks: Iterable[bytes], expected_size: int | None) -> Path:
    """Write `chunks` to `target` via a temporary file and a rename; returns `target`.

    DownloadError (and no file) when the byte count differs from `expected_size`.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        written = 0
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if expected_size is not None and written != expected_size:
            raise DownloadError(
                f"{target.name}: received {written} bytes, expected {expected_size}"
            )
        os.chmod(temp, _file_mode())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target
