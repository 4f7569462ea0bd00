"""Image tasks of the simulator: real PNGs, deterministic from the prompt, made offline.

Size: the long side is 512 px at quality "standard" and 1024 px at "hd"; the other side follows
the aspect ratio, rounded (standard 1:1 = 512x512, 16:9 = 512x288, 2:1 = 512x256, hd 9:16 =
576x1024). "auto" takes the first reference image's aspect ratio, else 1:1.

Pixels: a two-colour gradient under a few translucent shapes, all picked by BLAKE2b over the
image's index and the prompt (directives removed, whitespace collapsed), so the same prompt
always gives the same images. For image_to_image, image i is reference i mod count (cropped to
fill the size) blended at 60 % over its pattern. A reference Pillow cannot open, or over
`max_reference_pixels` by its header, raises UpstreamRejectedRequest before the task starts.
`request.options` is accepted and ignored.

References are read and decoded one at a time and dropped once shrunk, keeping only the (at
most `n`) ones the images use: a task holds one reference file (at most the gateway's cap),
its decoded pixels (at most 8 bytes a pixel, `_decode`) and at most 4 small copies, however
many references it has.

Steps (`providers.simulator.progress`): "starting", one "generating" per requested image,
"encoding"; the task takes `task_seconds` in all. Pillow work runs in a worker thread (Pillow
releases the GIL), so the event loop keeps serving while a picture is drawn.

Directives in the prompt:
    [[sim:fail=N]]      after "starting", fail like chat's fail=N (502, 503, 504, 400, ...)
    [[sim:images=N]]    return at most N images (N < n: fewer than requested; 0 allowed)
    [[sim:stall]]       after "starting", never finish; checkpoints every 0.1 s until canceled
    [[sim:task_ms=N]]   the task takes N ms instead of `task_seconds`
"""

from __future__ import annotations

import asyncio
import io
from hashlib import blake2b

from PIL import Image, ImageDraw, ImageOps

from providers.base import (
    GeneratedImage,
    ImageRequest,
    ImageResult,
    MediaInput,
    TaskControl,
)
from providers.errors import UpstreamRejectedRequest, UpstreamUnavailable
from providers.simulator.directives import failure_for, parse_media_directives
from providers.simulator.options import Options
from providers.simulator.progress import Progress

__all__ = ["generate_images"]

_LONG_SIDE = {"standard": 512, "hd": 1024}
_RATIOS = {
    "1:1": (1, 1),
    "16:9": (16, 9),
    "9:16": (9, 16),
    "4:3": (4, 3),
    "3:4": (3, 4),
    "2:1": (2, 1),
}
_MAX_N = 4
_MAX_REFERENCES = 16
_REFERENCE_WEIGHT = 0.6  # how much of a reference shows through in image_to_image
_TURNS = (None, Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180, Image.Transpose.ROTATE_270)
_FORMATS = ("PNG", "JPEG", "WEBP", "GIF")  # what the gateway accepts as reference images
_ORIENTATION_TAG = 0x0112  # EXIF: how the stored pixels turn to stand upright
_ORIENTATIONS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_SWAPS = frozenset({Image.Transpose.TRANSPOSE, Image.Transpose.TRANSVERSE})
_SWAPS |= {Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270}

_Reference = tuple[tuple[int, int], Image.Image]  # original (upright) size, downscaled copy


async def generate_images(
    name: str, options: Options, request: ImageRequest, control: TaskControl, *, unlucky: bool
) -> ImageResult:
    """One image task; `unlucky` (drawn from `failure_rate`) fails it like fail=503."""
    directives, prompt = parse_media_directives(request.prompt, images=True)
    long_side = _validate(request)
    references = await _open_references(
        request.references, request.n, long_side, options.max_reference_pixels
    )
    size = _size(request.aspect_ratio, long_side, references[0][0] if references else None)
    count = request.n if directives.images is None else min(directives.images, request.n)
    seconds = options.task_seconds if directives.task_ms is None else directives.task_ms / 1000
    progress = Progress(control, seconds, steps=request.n + 2)

    await progress.step("starting", f"{name}: {request.model}, {size[0]}x{size[1]}")
    if directives.fail is not None:
        raise failure_for(directives.fail)
    if unlucky:
        raise UpstreamUnavailable("simulated upstream failure (failure_rate)", upstream_status=503)
    if directives.stall:
        await progress.stall("generating", "simulated stall: waiting for the upstream")
    pictures: list[Image.Image] = []
    for index in range(request.n):
        await progress.step("generating", f"image {index + 1} of {request.n}")
        if index < count:  # the others are "filtered out" by the upstream, as real ones do
            # `references` holds the first n; image i takes reference i mod their count
            reference = references[index % len(request.references)][1] if references else None
            pictures.append(await asyncio.to_thread(_render, prompt, index, size, reference))
    await progress.step("encoding", f"{len(pictures)} PNG image(s)")
    blobs = await asyncio.to_thread(lambda: [_png(picture) for picture in pictures])
    return ImageResult(
        images=[
            GeneratedImage(
                data=blob, mime_type="image/png", format="png", width=size[0], height=size[1]
            )
            for blob in blobs
        ]
    )


def _validate(request: ImageRequest) -> int:
    """The long side in pixels; UpstreamRejectedRequest for what a real upstream would refuse."""
    problem = None
    if request.quality not in _LONG_SIDE:
        problem = f"quality must be one of {', '.join(_LONG_SIDE)}, not {request.quality!r}"
    elif request.aspect_ratio != "auto" and request.aspect_ratio not in _RATIOS:
        problem = f"unsupported aspect_ratio {request.aspect_ratio!r}"
    elif not 1 <= request.n <= _MAX_N:
        problem = f"n must be 1 to {_MAX_N}, not {request.n}"
    elif len(request.references) > _MAX_REFERENCES:
        problem = f"at most {_MAX_REFERENCES} reference images, got {len(request.references)}"
    if problem is not None:
        raise UpstreamRejectedRequest(problem, upstream_status=400)
    return _LONG_SIDE[request.quality]


def _size(aspect_ratio: str, long_side: int, reference: tuple[int, int] | None) -> tuple[int, int]:
    if aspect_ratio == "auto":
        wide, high = reference if reference is not None else (1, 1)
    else:
        wide, high = _RATIOS[aspect_ratio]
    if wide >= high:
        return long_side, max(1, round(long_side * high / wide))
    return max(1, round(long_side * wide / high)), long_side


async def _open_references(
    references: list[MediaInput], n: int, long_side: int, max_pixels: int
) -> list[_Reference]:
    """The references images 1..n blend in (the first `n`: image i takes reference i mod
    count), each decoded upright in RGB and shrunk to fit `long_side`. Every reference is
    read and decoded, so one Pillow cannot open is refused, but one at a time and the rest
    dropped: memory holds one file and at most `n` small copies, however many there are."""
    opened: list[_Reference] = []
    for number, reference in enumerate(references, 1):
        # Only the BytesIO holds the bytes, and `_decode` closes it: the thread pool may keep
        # a finished call's arguments a moment longer, and they must not keep the file alive.
        file = io.BytesIO(await reference.read())
        decoded = await asyncio.to_thread(_decode, number, reference, file, long_side, max_pixels)
        if len(opened) < n:
            opened.append(decoded)
    return opened


def _decode(
    number: int, reference: MediaInput, file: io.BytesIO, long_side: int, max_pixels: int
) -> _Reference:
    """One reference, upright in RGB and shrunk to fit `long_side`. Its size is read from the
    header first and a reference over `max_pixels` (as decoded: a JPEG decodes at a reduced
    scale) is refused before a pixel is decoded. Then it is decoded once and shrunk in place
    before anything else (turning, RGB) is done: memory holds at most 8 bytes a pixel of it
    (4 for the decoded pixels, 4 for the copy an alpha channel's shrinking makes)."""
    refused = f"reference image {number} ({reference.mime_type}, {reference.size_bytes} bytes)"
    with file:
        try:
            source = Image.open(file, formats=_FORMATS)
            source.draft("RGB", (long_side, long_side))  # JPEG: decode at a reduced scale
            width, height = source.size
            if width * height > max_pixels:
                raise UpstreamRejectedRequest(
                    f"{refused} is {width} x {height} pixels, over the upstream's limit of"
                    f" {max_pixels} pixels",
                    upstream_status=400,
                )
            turn = _ORIENTATIONS.get(source.getexif().get(_ORIENTATION_TAG, 1))
            source.load()
            picture: Image.Image = source
            try:
                picture.thumbnail((long_side, long_side))
            except ValueError:  # a mode Pillow cannot shrink (16-bit grey): RGB first
                picture = source.convert("RGB")
                picture.thumbnail((long_side, long_side))
        except (
            OSError,
            ValueError,
            SyntaxError,
            Image.DecompressionBombError,
            Image.DecompressionBombWarning,
        ) as exc:
            raise UpstreamRejectedRequest(
                f"{refused} is not an image the upstream can read: {exc}", upstream_status=400
            ) from exc
    image = picture.convert("RGB")
    if turn is not None:
        image = image.transpose(turn)
        if turn in _SWAPS:
            width, height = height, width
    return (width, height), image


def _render(
    prompt: str, index: int, size: tuple[int, int], reference: Image.Image | None
) -> Image.Image:
    seed = blake2b(f"{index}\x00{prompt}".encode(), digest_size=32).digest()
    width, height = size
    mask = Image.linear_gradient("L")
    turn = _TURNS[seed[6] % 4]
    if turn is not None:
        mask = mask.transpose(turn)
    mask = mask.resize(size, Image.Resampling.BILINEAR)
    first, second = (seed[0], seed[1], seed[2]), (seed[3], seed[4], seed[5])
    image = Image.composite(Image.new("RGB", size, first), Image.new("RGB", size, second), mask)
    draw = ImageDraw.Draw(image, "RGBA")
    for shape in range(3 + seed[7] % 4):
        x, y, extent, tint = seed[8 + 4 * shape : 12 + 4 * shape]
        radius = (48 + extent) * min(width, height) // 1024
        left, top = x * width // 256 - radius, y * height // 256 - radius
        box = (left, top, left + 2 * radius, top + 2 * radius)
        fill = (tint, x ^ extent, y ^ tint, 150)
        if extent % 2:
            draw.ellipse(box, fill=fill)
        else:
            draw.rectangle(box, fill=fill)
    if reference is not None:
        fitted = ImageOps.fit(reference, size, Image.Resampling.BILINEAR)
        image = Image.blend(image, fitted, _REFERENCE_WEIGHT)
    return image


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=3)
    return buffer.getvalue()
