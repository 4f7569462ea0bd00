"""The simulator's image and music tasks: real PNGs and WAVs, directives, progress, cancel."""

from __future__ import annotations

import asyncio
import io
import itertools
import time
import tracemalloc
import wave
from array import array
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec
import pytest
from PIL import Image, ImageStat

from providers.base import (
    ChatProvider,
    ImageProvider,
    ImageRequest,
    ImageResult,
    MediaInput,
    MusicProvider,
    MusicRequest,
    MusicResult,
)
from providers.errors import (
    ProviderError,
    TaskCanceled,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.registry import serves, spec_for
from providers.simulator import Options, create
from tests.providers.references import ReferenceSource

INSTANT = Options(task_seconds=0)


class Control:
    """A TaskControl that records every checkpoint and raises TaskCanceled once asked to."""

    def __init__(self, *, cancel_after: int | None = None) -> None:
        self.checkpoints: list[tuple[float, str, str]] = []
        self.cancel_after = cancel_after
        self.cancel_requested = False

    def cancel(self) -> None:
        self.cancel_requested = True

    async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
        self.checkpoints.append((percent, stage, message))
        if self.cancel_after is not None and len(self.checkpoints) >= self.cancel_after:
            self.cancel_requested = True
        if self.cancel_requested:
            raise TaskCanceled("canceled by the caller")

    @property
    def stages(self) -> list[str]:
        return [stage for _, stage, _ in self.checkpoints]


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def images(
    prompt: str = "a lighthouse at dusk",
    *,
    options: Options = INSTANT,
    control: Control | None = None,
    **fields: Any,
) -> ImageResult:
    request = ImageRequest(
        model=fields.pop("model", "image-model-2"),
        prompt=prompt,
        n=fields.pop("n", 1),
        quality=fields.pop("quality", "standard"),
        aspect_ratio=fields.pop("aspect_ratio", "1:1"),
        **fields,
    )
    call = create("sim", options).generate_images(request, control or Control())
    return asyncio.run(call)


def music(
    prompt: str = "lofi beat for a rainy night",
    *,
    options: Options = INSTANT,
    control: Control | None = None,
    **fields: Any,
) -> MusicResult:
    request = MusicRequest(model=fields.pop("model", "beta-music-2.6"), prompt=prompt, **fields)
    return asyncio.run(create("sim", options).generate_music(request, control or Control()))


def png_data(colour: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def png(colour: tuple[int, int, int], size: tuple[int, int]) -> MediaInput:
    return MediaInput.of_bytes(png_data(colour, size), "image/png")


def wav_data(seconds: float, rate: int = 8000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x10\x00" * round(seconds * rate))
    return buffer.getvalue()


def wav(seconds: float, rate: int = 8000) -> MediaInput:
    return MediaInput.of_bytes(wav_data(seconds, rate), "audio/wav")


def opened(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def mean_rgb(data: bytes) -> list[float]:
    return ImageStat.Stat(opened(data).convert("RGB")).mean


def samples(data: bytes) -> array[int]:
    with wave.open(io.BytesIO(data), "rb") as source:
        return array("h", source.readframes(source.getnframes()))


# --- registry and options -------------------------------------------------------------------


def test_registry_lists_capabilities_per_kind() -> None:
    for capability in (
        "chat",
        "text_to_image",
        "image_to_image",
        "text_to_music",
        "reference_audio_to_music",
    ):
        assert serves("simulator", capability)
    assert serves("openai", "chat") and serves("openai", "image_to_image")
    assert not serves("openai", "text_to_music")
    assert spec_for("anthropic").capabilities == frozenset({"chat"})
    assert not serves("replicate", "chat") and serves("replicate", "text_to_music")
    with pytest.raises(ValueError, match="txt_to_image"):
        serves("openai", "txt_to_image")
    known = "anthropic, azure_openai, bedrock, gemini, openai, openai_compatible, replicate, "
    with pytest.raises(KeyError, match=f"known: {known}simulator, vertex"):
        serves("nope", "chat")


def test_the_simulator_implements_all_three_protocols() -> None:
    spec = spec_for("simulator")
    provider = spec.create("sim", msgspec.convert({"task_seconds": 0.1}, spec.options_type))
    assert isinstance(provider, ChatProvider)
    assert isinstance(provider, ImageProvider)
    assert isinstance(provider, MusicProvider)


def test_media_options_have_defaults_and_stay_strict() -> None:
    options = Options()
    assert (options.task_seconds, options.clip_seconds) == (0.5, 4.0)
    assert options.music_clips == {"alpha-5.5": 2}
    parsed = msgspec.convert({"music_clips": {"beta-music-2.6": 3}}, Options)
    assert parsed.music_clips == {"beta-music-2.6": 3}
    with pytest.raises(msgspec.ValidationError, match="music_clip"):
        msgspec.convert({"music_clip": {}}, Options)
    with pytest.raises(msgspec.ValidationError, match="task_seconds"):
        msgspec.convert({"task_seconds": -1}, Options)
    with pytest.raises(msgspec.ValidationError, match="music_clips"):
        msgspec.convert({"music_clips": {"alpha-5.5": 0}}, Options)


# --- images ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quality", "aspect_ratio", "size"),
    [
        ("standard", "1:1", (512, 512)),
        ("standard", "16:9", (512, 288)),
        ("standard", "3:4", (384, 512)),
        ("standard", "2:1", (512, 256)),
        ("standard", "auto", (512, 512)),
        ("hd", "1:1", (1024, 1024)),
        ("hd", "9:16", (576, 1024)),
        ("hd", "4:3", (1024, 768)),
    ],
)
def test_images_are_pngs_of_the_size_the_ratio_and_quality_ask(
    quality: str, aspect_ratio: str, size: tuple[int, int]
) -> None:
    [image] = images(quality=quality, aspect_ratio=aspect_ratio).images
    assert (image.mime_type, image.format) == ("image/png", "png")
    assert (image.width, image.height) == size
    decoded = opened(image.data)
    assert decoded.format == "PNG"
    assert decoded.size == size


def test_n_images_differ_from_each_other_and_repeat_for_the_same_prompt() -> None:
    first = images(n=3).images
    assert len(first) == 3
    assert len({image.data for image in first}) == 3
    assert [image.data for image in images(n=3).images] == [image.data for image in first]
    assert images("a different prompt").images[0].data != first[0].data


def test_directives_do_not_reach_the_pixels() -> None:
    plain = images("a lighthouse at dusk").images[0]
    scripted = images("a lighthouse [[sim:task_ms=0]] at   dusk [[sim:images=1]]").images[0]
    assert scripted.data == plain.data


def test_images_directive_returns_fewer_than_requested() -> None:
    assert len(images("fox [[sim:images=2]]", n=4).images) == 2
    assert images("fox [[sim:images=0]]", n=3).images == []
    assert len(images("fox [[sim:images=9]]", n=2).images) == 2


def test_auto_follows_the_first_reference() -> None:
    wide = png((10, 200, 10), (300, 100))
    tall = png((10, 10, 200), (200, 400))
    [image] = images(aspect_ratio="auto", references=[wide, tall]).images
    assert (image.width, image.height) == (512, 171)
    assert opened(image.data).size == (512, 171)
    [image] = images(aspect_ratio="auto", quality="hd", references=[tall]).images
    assert (image.width, image.height) == (512, 1024)
    [image] = images(aspect_ratio="16:9", references=[tall]).images
    assert (image.width, image.height) == (512, 288)


def test_image_to_image_blends_reference_i_mod_count_into_image_i() -> None:
    red, blue = (255, 0, 0), (0, 0, 255)
    plain = images(n=3).images
    made = images(n=3, references=[png(red, (64, 48)), png(blue, (40, 40))]).images
    for index, colour in enumerate((red, blue, red)):
        pattern = mean_rgb(plain[index].data)
        expected = [0.4 * p + 0.6 * c for p, c in zip(pattern, colour, strict=True)]
        assert mean_rgb(made[index].data) == pytest.approx(expected, abs=1.5)


def test_a_reference_pillow_cannot_open_is_rejected_before_starting() -> None:
    control = Control()
    broken = MediaInput.of_bytes(b"\x89PNG not really", "image/png")
    with pytest.raises(UpstreamRejectedRequest, match=r"reference image 2 \(image/png"):
        images(references=[png((1, 2, 3), (8, 8)), broken], control=control)
    assert control.checkpoints == []


def test_a_reference_over_the_pixel_limit_is_rejected_by_its_header_before_starting() -> None:
    control = Control()
    limited = Options(task_seconds=0, max_reference_pixels=2000)
    within, over = png((1, 2, 3), (40, 50)), png((1, 2, 3), (50, 41))
    with pytest.raises(UpstreamRejectedRequest, match=r"reference image 2 .* 50 x 41 pixels"):
        images(references=[within, over], options=limited, control=control)
    assert control.checkpoints == []


def test_an_exif_turned_reference_gives_its_upright_shape() -> None:
    buffer = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = 6  # stored on its side: turn 90 degrees clockwise to stand upright
    Image.new("RGB", (300, 100), (200, 10, 10)).save(buffer, format="JPEG", exif=exif)
    turned = MediaInput.of_bytes(buffer.getvalue(), "image/jpeg")
    [image] = images(aspect_ratio="auto", references=[turned]).images
    assert (image.width, image.height) == (171, 512)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P", "L", "I;16", "1"])
def test_references_of_every_png_mode_are_blended(mode: str) -> None:
    buffer = io.BytesIO()
    Image.new(mode, (300, 200)).save(buffer, format="PNG")
    reference = MediaInput.of_bytes(buffer.getvalue(), "image/png")
    [image] = images(aspect_ratio="auto", references=[reference]).images
    assert (image.width, image.height) == (512, 341)


def test_sixteen_large_references_are_read_one_at_a_time_and_all_checked() -> None:
    """16 references of 4 MiB (a PNG, then bytes Pillow never reads): each is read and decoded
    in turn and dropped unless an image uses it, so traced memory peaks near one file, not
    the 64 MiB of all of them (a count of allocations, not a timing). A bad last one still
    fails the task: every reference is checked."""
    size, count = 4 * 1024 * 1024, 16
    colours = [(16 * i, 255 - 16 * i, 90) for i in range(count)]
    heads = [png_data(colour, (64, 48)) for colour in colours]
    plain = images(n=2).images

    async def scenario(source: ReferenceSource, heads: list[bytes]) -> ImageResult:
        references = [source.reference(i, size, "image/png", head) for i, head in enumerate(heads)]
        request = ImageRequest(
            model="image-model-2",
            prompt="a lighthouse at dusk",
            n=2,
            quality="standard",
            aspect_ratio="1:1",
            references=references,
        )
        return await create("sim", INSTANT).generate_images(request, Control())

    source = ReferenceSource()
    tracemalloc.start()
    try:
        made = asyncio.run(scenario(source, heads)).images
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (source.opened, source.most_reading) == (count, 1)
    assert peak < 2 * size, f"traced memory peaked at {peak / 2**20:.1f} MiB"
    for index in range(2):  # image i blends reference i; the other 14 were only checked
        pattern = mean_rgb(plain[index].data)
        expected = [0.4 * p + 0.6 * c for p, c in zip(pattern, colours[index], strict=True)]
        assert mean_rgb(made[index].data) == pytest.approx(expected, abs=1.5)

    broken = [*heads[:-1], b"\x89PNG not really"]
    with pytest.raises(UpstreamRejectedRequest, match=r"reference image 16 \(image/png"):
        asyncio.run(scenario(ReferenceSource(), broken))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"quality": "ultra"}, "quality"),
        ({"aspect_ratio": "5:4"}, "aspect_ratio"),
        ({"n": 5}, "n must be 1 to 4"),
        ({"references": [png((0, 0, 0), (4, 4))] * 17}, "at most 16"),
    ],
)
def test_requests_a_real_upstream_would_refuse_are_rejected(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(UpstreamRejectedRequest, match=problem):
        images(**fields)


# --- music ----------------------------------------------------------------------------------


def test_music_is_a_mono_16_bit_wav_of_the_clip_length_and_not_silent() -> None:
    [clip] = music().clips
    assert (clip.mime_type, clip.format, clip.duration_seconds) == ("audio/wav", "wav", 4.0)
    with wave.open(io.BytesIO(clip.data), "rb") as source:
        assert source.getnchannels() == 1
        assert source.getsampwidth() == 2
        assert source.getframerate() == 22050
        assert source.getnframes() == 4 * 22050
    pcm = samples(clip.data)
    assert max(abs(value) for value in pcm) > 5000
    assert sum(1 for value in pcm if value == 0) < len(pcm) // 10
    [short] = music(options=Options(task_seconds=0, clip_seconds=1.5)).clips
    assert len(samples(short.data)) == 33075 and short.duration_seconds == 1.5


def test_alpha_gives_two_clips_beta_one_and_the_option_changes_that() -> None:
    alpha = music(model="alpha-5.5").clips
    assert [clip.title for clip in alpha] == [
        "Lofi beat for a rainy night",
        "Lofi beat for a rainy night (take 2)",
    ]
    assert alpha[0].data != alpha[1].data
    assert len(music(model="beta-music-2.6").clips) == 1
    three = Options(task_seconds=0, music_clips={"beta-music-2.6": 3})
    assert len(music(model="beta-music-2.6", options=three).clips) == 3
    assert len(music(model="alpha-5.5", options=three).clips) == 1


def test_titles_come_from_the_request_else_the_prompt_without_directives() -> None:
    clips = music(model="alpha-5.5", title="Night Drive").clips
    assert [clip.title for clip in clips] == ["Night Drive", "Night Drive (take 2)"]
    [clip] = music("[[sim:task_ms=0]] slow   jazz, brushed drums and upright bass, late").clips
    assert clip.title == "Slow jazz, brushed drums and upright"  # the first six words
    assert music("[[sim:task_ms=0]]").clips[0].title == "Untitled"


def test_music_is_deterministic_and_follows_lyrics_and_instrumental() -> None:
    first = music().clips[0].data
    assert music().clips[0].data == first
    assert music(instrumental=True).clips[0].data != first
    assert music(lyrics="la la la").clips[0].data != first
    with pytest.raises(UpstreamRejectedRequest, match="instrumental"):
        music(lyrics="la la", instrumental=True)


def test_reference_audio_is_read_once() -> None:
    source = ReferenceSource()
    data = wav_data(2.5)
    reference = source.reference(0, len(data), "audio/wav", data)
    assert music(reference_audio=reference).clips[0].duration_seconds == 2.5
    assert (source.opened, source.most_reading) == (1, 1)


def test_reference_audio_sets_the_length_when_it_is_a_wav() -> None:
    assert music(reference_audio=wav(2.5)).clips[0].duration_seconds == 2.5
    assert music(reference_audio=wav(0.2)).clips[0].duration_seconds == 1.0
    mp3 = MediaInput.of_bytes(b"ID3\x04 not decodable offline", "audio/mpeg")
    [clip] = music(reference_audio=mp3).clips
    assert clip.duration_seconds == 4.0
    assert clip.data != music().clips[0].data  # the reference still seeds the melody
    broken = MediaInput.of_bytes(b"RIFF....WAVEjunk", "audio/wav")
    with pytest.raises(UpstreamRejectedRequest, match="not a WAV file"):
        music(reference_audio=broken)
    with pytest.raises(UpstreamRejectedRequest, match="empty"):
        music(reference_audio=MediaInput.of_bytes(b"", "audio/mpeg"))


# --- directives, failures, progress and cancel ----------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (502, ProviderError),
        (503, UpstreamUnavailable),
        (504, UpstreamTimeout),
        (400, UpstreamRejectedRequest),
    ],
)
def test_fail_directives_raise_the_matching_error_after_starting(
    status: int, error: type[ProviderError]
) -> None:
    for call in (images, music):
        control = Control()
        with pytest.raises(ProviderError) as caught:
            call(f"sunrise [[sim:fail={status}]]", control=control)
        assert type(caught.value) is error
        assert caught.value.upstream_status == status
        assert control.stages == ["starting"]


def test_failure_rate_one_fails_media_tasks() -> None:
    always = Options(task_seconds=0, failure_rate=1)
    with pytest.raises(UpstreamUnavailable, match="failure_rate"):
        images(options=always)
    with pytest.raises(UpstreamUnavailable, match="failure_rate"):
        music(options=always)


def test_unknown_or_misplaced_directives_are_rejected() -> None:
    with pytest.raises(UpstreamRejectedRequest, match=r"\[\[sim:stal\]\]"):
        images("x [[sim:stal]]")
    with pytest.raises(UpstreamRejectedRequest, match=r"\[\[sim:images=1\]\]"):
        music("x [[sim:images=1]]")
    with pytest.raises(UpstreamRejectedRequest, match="tool_call"):
        images("x [[sim:tool_call]]")


def test_progress_rises_through_the_stages_over_task_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    control = Control()
    started = time.perf_counter()
    images(n=2, options=Options(task_seconds=0.3), control=control)
    elapsed = time.perf_counter() - started
    assert 0.29 <= elapsed < 3.0  # its task_seconds (bounded loosely: a busy machine)
    assert control.stages == ["starting", "generating", "generating", "encoding"]
    percents = [percent for percent, _, _ in control.checkpoints]
    assert percents == sorted(percents) and len(set(percents)) == len(percents)
    assert percents[0] == 0 and percents[-1] < 100

    # A checkpoint at least every 0.1 s while waiting: no wait is longer, and a checkpoint
    # follows each (said of the waits asked for, not of a busy machine's timing of them).
    waits: list[float | str] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        waits.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    class Watched(Control):
        async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
            waits.append(stage)
            await super().checkpoint(percent, stage, message)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    control = Watched()
    music(model="alpha-5.5", options=Options(task_seconds=0.6), control=control)
    percents = [percent for percent, _, _ in control.checkpoints]
    assert percents == sorted(percents) and len(percents) >= 4
    assert control.stages[0] == "starting" and control.stages[-1] == "encoding"
    delays = [w for w in waits if isinstance(w, float)]
    assert waits[0] == "starting" and delays and max(delays) <= 0.1
    assert not any(
        isinstance(a, float) and isinstance(b, float) for a, b in itertools.pairwise(waits)
    )


def test_task_ms_overrides_task_seconds() -> None:
    started = time.perf_counter()
    images("[[sim:task_ms=0]] quick", options=Options(task_seconds=30))
    assert time.perf_counter() - started < 1


def test_cancel_stops_a_long_task_at_the_next_checkpoint() -> None:
    async def test() -> None:
        provider = create("sim", Options(task_seconds=30))
        for request in (
            ImageRequest(model="m", prompt="p", n=4, quality="hd", aspect_ratio="1:1"),
            MusicRequest(model="alpha-5.5", prompt="p"),
        ):
            control = Control()
            asyncio.get_running_loop().call_later(0.2, control.cancel)
            started = time.perf_counter()
            with pytest.raises(TaskCanceled):
                if isinstance(request, ImageRequest):
                    await provider.generate_images(request, control)
                else:
                    await provider.generate_music(request, control)
            assert time.perf_counter() - started < 3.0  # not the 30 s task (a busy machine)
            assert control.stages[-1] == "starting"

    run(test)


@pytest.mark.parametrize("kind", ["images", "music"])
def test_stall_never_finishes_but_still_honours_cancel(kind: str) -> None:
    async def test() -> None:
        provider = create("sim", INSTANT)
        control = Control(cancel_after=6)
        started = time.perf_counter()
        with pytest.raises(TaskCanceled):
            if kind == "images":
                request = ImageRequest(
                    model="m", prompt="[[sim:stall]] p", n=1, quality="standard", aspect_ratio="1:1"
                )
                await provider.generate_images(request, control)
            else:
                stalled = MusicRequest(model="m", prompt="[[sim:stall]]")
                await provider.generate_music(stalled, control)
        elapsed = time.perf_counter() - started
        assert 0.35 <= elapsed < 2.0  # four 0.1 s waits, although the task was meant to be instant
        assert control.stages == ["starting"] + ["generating"] * 5
        assert len({percent for percent, _, _ in control.checkpoints[1:]}) == 1

    run(test)
