"""The Replicate (MusicGen) adapter against a real local fake: the prediction's life (create,
polls, cancel), request shapes, real durations, references, errors."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from providers.base import ChatProvider, MediaInput, MusicProvider, MusicRequest
from providers.errors import (
    ProviderError,
    TaskCanceled,
    UpstreamModelFailed,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.registry import serves, spec_for
from providers.replicate import Options, create
from providers.replicate.audio import mp3_seconds, probe_audio, wav_seconds
from providers.replicate.client import ReplicateProvider
from tests.fakes.replicate_upstream import (
    CreateReply,
    FakeReplicate,
    Job,
    Step,
    mp3_bytes,
    sine_wav,
)
from tests.providers.references import ReferenceSource, SourceBroke

VERSION = "671ac645ce5e552cc63a54a2bbff63fcf798043055d2dac5fc9e36a837eedcfb"
MODEL = f"meta/musicgen:{VERSION}"


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


class Control:
    """A TaskControl that records checkpoints and cancels after `cancel_after` of them."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.cancel_after = cancel_after
        self.calls: list[tuple[float, str, str]] = []

    async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
        if self.cancel_after is not None and len(self.calls) >= self.cancel_after:
            raise TaskCanceled("canceled by the caller")
        self.calls.append((percent, stage, message))


@asynccontextmanager
async def upstream(**options: Any) -> AsyncIterator[tuple[FakeReplicate, ReplicateProvider]]:
    async with FakeReplicate() as fake:
        values: dict[str, Any] = {"api_key": "r8_secret", "poll_interval_seconds": 0.01}
        values |= options
        provider = create("musicgen", Options(base_url=fake.base_url, **values))
        try:
            yield fake, provider
        finally:
            await provider.close()


def request(**fields: Any) -> MusicRequest:
    return MusicRequest(**({"model": MODEL, "prompt": "calm piano by the sea"} | fields))


# --- registry and options -----------------------------------------------------------------------


def test_replicate_serves_both_music_capabilities_only() -> None:
    assert serves("replicate", "text_to_music")
    assert serves("replicate", "reference_audio_to_music")
    for capability in ("chat", "text_to_image", "image_to_image"):
        assert not serves("replicate", capability)
    spec = spec_for("replicate")

    async def test() -> None:
        provider = spec.create("r", msgspec.convert({}, spec.options_type))
        try:
            assert isinstance(provider, MusicProvider)
            assert not isinstance(provider, ChatProvider)
        finally:
            await provider.close()

    run(test)


def test_options_have_defaults_and_stay_strict() -> None:
    options = msgspec.convert({}, Options)
    assert options.base_url == "https://api.replicate.com/v1"
    assert (options.duration_seconds, options.output_format) == (8, "wav")
    assert (options.poll_interval_seconds, options.max_wait_seconds) == (1.0, 900.0)
    for bad, field in [
        ({"poll_interval_seconds": 0}, "poll_interval_seconds"),
        ({"duration_seconds": 301}, "duration_seconds"),
        ({"output_format": "ogg"}, "output_format"),
        ({"inline_reference_max_bytes": -1}, "inline_reference_max_bytes"),
        ({"pol_interval_seconds": 1}, "pol_interval_seconds"),
    ]:
        with pytest.raises(msgspec.ValidationError, match=field):
            msgspec.convert(bad, Options)


# --- the prediction's life ----------------------------------------------------------------------


def test_create_poll_download_with_progress() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            control = Control()
            result = await provider.generate_music(request(), control)
            create_call, *polls = [r for r in fake.requests if r.path.startswith("/v1/")]
            assert (create_call.method, create_call.path) == ("POST", "/v1/predictions")
            assert create_call.json == {
                "version": VERSION,
                "input": {"prompt": "calm piano by the sea", "duration": 8, "output_format": "wav"},
            }
            assert create_call.headers["authorization"] == "Bearer r8_secret"
            assert create_call.headers["content-type"] == "application/json"
            assert [(p.method, p.path) for p in polls] == [("GET", "/v1/predictions/pred0001")] * 3
            assert all(p.headers["authorization"] == "Bearer r8_secret" for p in polls)
            (download,) = fake.downloads
            assert download.host.startswith("127.0.0.2:")
            assert "authorization" not in download.headers  # the key stays with the API
            (clip,) = result.clips
            assert clip.data == fake.files["pred0001-0.wav"][0]
            assert (clip.format, clip.mime_type) == ("wav", "audio/wav")
            assert clip.duration_seconds == 8.0
            assert clip.title == "Calm piano by the sea"
            assert control.calls == [
                (2.0, "starting", f"musicgen: {MODEL}"),
                (5.0, "queued", "waiting for a worker"),
                (10.0, "generating", "0 % done"),
                (50.0, "generating", "50 % done"),
                (99.0, "downloading", "clip 1 of 1"),
            ]
            assert fake.canceled == []

    run(test)


def test_by_model_name_with_options_passed_through() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            options = {"model_version": "stereo-large", "duration": 3, "temperature": 0.7}
            result = await provider.generate_music(
                request(model="meta/musicgen", title="Harbour", options=options), Control()
            )
            assert fake.requests[0].path == "/v1/models/meta/musicgen/predictions"
            assert fake.requests[0].json == {
                "input": {
                    "prompt": "calm piano by the sea",
                    "duration": 3,
                    "output_format": "wav",
                    "model_version": "stereo-large",
                    "temperature": 0.7,
                }
            }
            (clip,) = result.clips
            assert clip.duration_seconds == 3.0
            assert clip.title == "Harbour"

    run(test)


def test_mp3_output_duration_is_read_from_the_frames() -> None:
    async def test() -> None:
        async with upstream(output_format="mp3", duration_seconds=5) as (fake, provider):
            result = await provider.generate_music(request(), Control())
            assert fake.requests[0].json["input"]["output_format"] == "mp3"
            (clip,) = result.clips
            assert (clip.format, clip.mime_type) == ("mp3", "audio/mpeg")
            assert clip.data.startswith(b"ID3")
            frames = round(5 * 44100 / 1152)
            assert clip.duration_seconds == round(frames * 1152 / 44100, 3)

    run(test)


def test_several_outputs_become_takes() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(outputs=2, seconds=1.5))
            result = await provider.generate_music(request(title="Tide"), Control())
            assert [c.title for c in result.clips] == ["Tide", "Tide (take 2)"]
            assert [c.duration_seconds for c in result.clips] == [1.5, 1.5]
            assert result.clips[0].data != result.clips[1].data

    run(test)


def test_a_prediction_done_at_once_is_not_polled() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(steps=(), seconds=1))
            result = await provider.generate_music(request(), Control())
            assert [r.method for r in fake.requests] == ["POST", "GET"]  # create, download
            assert result.clips[0].duration_seconds == 1.0

    run(test)


# --- references ---------------------------------------------------------------------------------


def test_a_small_reference_goes_inline_as_a_data_url() -> None:
    reference = sine_wav(0.5)

    async def test() -> None:
        async with upstream() as (fake, provider):
            await provider.generate_music(
                request(reference_audio=MediaInput.of_bytes(reference, "audio/wav")),
                Control(),
            )
            sent = fake.requests[0].json["input"]["input_audio"]
            assert sent == "data:audio/wav;base64," + base64.b64encode(reference).decode()
            assert fake.uploads == {}

    run(test)


def test_a_large_reference_is_uploaded_first() -> None:
    reference = sine_wav(1.0)

    async def test() -> None:
        async with upstream(inline_reference_max_bytes=1000) as (fake, provider):
            audio = MediaInput.of_bytes(reference, "audio/x-wav")
            await provider.generate_music(request(reference_audio=audio), Control())
            upload, create_call = fake.requests[:2]
            assert (upload.method, upload.path) == ("POST", "/v1/files")
            assert upload.headers["authorization"] == "Bearer r8_secret"
            assert upload.headers["content-type"].startswith("multipart/form-data")
            assert upload.files == [("content", "reference.wav", "audio/x-wav", reference)]
            assert fake.uploads == {"file0001": reference}
            assert create_call.json["input"]["input_audio"] == f"{fake.base_url}/files/file0001"

    run(test)


def test_a_large_reference_is_streamed_up_and_a_small_one_read_once() -> None:
    """Over `inline_reference_max_bytes` the reference goes up as a stream (a sized part, so
    the upload has a Content-Length); under it, it is read once to inline it."""
    size = 3 * 1024 * 1024
    head = sine_wav(0.1)
    source = ReferenceSource()

    async def test() -> None:
        async with upstream(inline_reference_max_bytes=1024 * 1024) as (fake, provider):
            audio = source.reference(7, size, "audio/wav", head)
            await provider.generate_music(request(reference_audio=audio), Control())
            upload = fake.requests[0]
            assert (upload.method, upload.path) == ("POST", "/v1/files")
            assert int(upload.headers["content-length"]) > size
            assert "transfer-encoding" not in upload.headers
            [(name, filename, kind, data)] = upload.files
            assert (name, filename, kind) == ("content", "reference.wav", "audio/wav")
            assert len(data) == size
            assert hashlib.sha256(data).hexdigest() == source.digest(7, size, head)
            assert (source.opened, source.most_reading) == (1, 1)

            small = source.reference(8, 1000, "audio/wav", head)
            await provider.generate_music(request(reference_audio=small), Control())
            create = [r for r in fake.requests if r.method == "POST" and r.json][-1]
            inline = create.json["input"]["input_audio"]
            assert inline.startswith("data:audio/wav;base64,")
            sent = base64.b64decode(inline.split(",", 1)[1])
            assert hashlib.sha256(sent).hexdigest() == source.digest(8, 1000, head)
            assert source.opened == 2

    run(test)


def test_a_reference_that_cannot_be_read_fails_with_its_own_error() -> None:
    """The store failing mid-upload is not Replicate's fault: its error comes out as it was,
    and no prediction is created."""
    source = ReferenceSource()
    source.fail_after = 500_000

    async def test() -> None:
        async with upstream(inline_reference_max_bytes=1000) as (fake, provider):
            audio = source.reference(1, 2 * 1024 * 1024, "audio/wav", sine_wav(0.1))
            with pytest.raises(SourceBroke, match="broke after"):
                await provider.generate_music(request(reference_audio=audio), Control())
            assert [r.path for r in fake.requests if r.path.endswith("predictions")] == []

    run(test)


# --- refused before anything is sent -------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"lyrics": "la la"}, UpstreamRejectedRequest, "cannot sing lyrics"),
        ({"options": {"prompt": "x"}}, UpstreamRejectedRequest, "cannot set 'prompt'"),
        ({"options": {"input_audio": "x"}}, UpstreamRejectedRequest, "cannot set 'input_audio'"),
        (
            {"reference_audio": MediaInput.of_bytes(b"", "audio/wav")},
            UpstreamRejectedRequest,
            "reference audio is empty",
        ),
        ({"model": "musicgen"}, ProviderError, "not 'owner/name' or 'owner/name:version'"),
    ],
)
def test_what_musicgen_cannot_do_is_refused_before_any_call(
    fields: dict[str, Any], error: type[ProviderError], match: str
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            with pytest.raises(error, match=match):
                await provider.generate_music(request(**fields), Control())
            assert fake.requests == []

    run(test)


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "error", "message", "retry_after"),
    [
        (
            CreateReply.error(422, "- input.duration: Must be less than or equal to 300"),
            UpstreamRejectedRequest,
            "- input.duration: Must be less than or equal to 300",
            None,
        ),
        (
            CreateReply.error(401, "Invalid token."),
            ProviderError,
            "credentials (HTTP 401): Invalid token.",
            None,
        ),
        (
            CreateReply.error(429, "Request was throttled.", **{"Retry-After": "4"}),
            UpstreamUnavailable,
            "HTTP 429: Request was throttled.",
            4.0,
        ),
        (CreateReply(200, {"no": "id"}), ProviderError, "malformed prediction", None),
    ],
)
def test_create_errors(
    reply: CreateReply, error: type[ProviderError], message: str, retry_after: float | None
) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(reply)
            with pytest.raises(error) as raised:
                await provider.generate_music(request(), Control())
            assert type(raised.value) is error
            assert message in raised.value.message
            assert raised.value.retry_after == retry_after
            assert fake.created == []

    run(test)


@pytest.mark.parametrize(
    ("job", "error", "message"),
    [
        (Job(end="failed", error="CUDA out of memory"), UpstreamModelFailed, "CUDA out of memory"),
        (Job(end="aborted"), UpstreamUnavailable, "could not start before its deadline"),
        (Job(end="canceled"), ProviderError, "canceled upstream"),
        (Job(output={"audio": 1}), ProviderError, "without audio files"),
        (Job(output="file:///etc/passwd"), ProviderError, "not an HTTP URL"),
        (Job(file_body=b"<html>not audio</html>"), ProviderError, "neither WAV nor MP3"),
    ],
)
def test_predictions_that_end_badly(job: Job, error: type[ProviderError], message: str) -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(job)
            with pytest.raises(error) as raised:
                await provider.generate_music(request(), Control())
            assert type(raised.value) is error
            assert message in raised.value.message
            assert fake.canceled == []  # it had ended: nothing to cancel

    run(test)


def test_a_missing_output_file_is_the_upstreams_failure() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(output=f"{fake.delivery_url}/files/gone.wav"))
            with pytest.raises(ProviderError) as raised:
                await provider.generate_music(request(), Control())
            assert type(raised.value) is ProviderError
            assert raised.value.message == "downloading an output failed: Not found"
            assert raised.value.upstream_status == 404

    run(test)


def test_transient_poll_failures_are_retried() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(poll_errors=(503, 502, 429), seconds=1))
            result = await provider.generate_music(request(), Control())
            assert result.clips[0].duration_seconds == 1.0
            assert fake.prediction("pred0001").polls == 6

    run(test)


def test_polls_failing_for_good_cancel_the_prediction() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(poll_errors=(503, 503, 503, 503)))
            with pytest.raises(UpstreamUnavailable):
                await provider.generate_music(request(), Control())
            assert fake.prediction("pred0001").polls == 4
            assert fake.canceled == ["pred0001"]

    run(test)


def test_a_poll_refused_for_good_is_not_retried() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(poll_errors=(404,)))
            with pytest.raises(UpstreamRejectedRequest):
                await provider.generate_music(request(), Control())
            assert fake.prediction("pred0001").polls == 1
            assert fake.canceled == ["pred0001"]

    run(test)


def test_max_wait_seconds_cancels_and_times_out() -> None:
    async def test() -> None:
        async with upstream(max_wait_seconds=0.2) as (fake, provider):
            fake.enqueue(Job(stall=True))
            with pytest.raises(UpstreamTimeout, match=r"did not finish in 0\.2 s"):
                await provider.generate_music(request(), Control())
            assert fake.canceled == ["pred0001"]
            assert fake.prediction("pred0001").status == "canceled"

    run(test)


# --- cancel -------------------------------------------------------------------------------------


def test_cancel_at_the_first_checkpoint_creates_nothing() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            with pytest.raises(TaskCanceled):
                await provider.generate_music(request(), Control(cancel_after=0))
            assert fake.requests == []

    run(test)


def test_cancel_while_generating_cancels_the_prediction_upstream() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(steps=(Step("starting"), Step("processing", " 20%|")), stall=True))
            control = Control(cancel_after=4)  # starting, queued, 20 %, 20 %, then canceled
            with pytest.raises(TaskCanceled):
                await provider.generate_music(request(), control)
            assert [c[1] for c in control.calls] == ["starting", "queued", *["generating"] * 2]
            assert control.calls[2] == (26.0, "generating", "20 % done")
            assert fake.canceled == ["pred0001"]
            assert fake.prediction("pred0001").status == "canceled"
            polls = fake.prediction("pred0001").polls
            await asyncio.sleep(0.05)  # the behaviour under test: a while on, no poll
            assert fake.prediction("pred0001").polls == polls  # no polling after the cancel
            assert fake.downloads == []

    run(test)


def test_the_worker_stopping_cancels_the_prediction_too() -> None:
    async def test() -> None:
        async with upstream() as (fake, provider):
            fake.enqueue(Job(stall=True))
            polled = asyncio.Event()

            class Polled(Control):
                async def checkpoint(self, percent: float, stage: str, message: str = "") -> None:
                    await super().checkpoint(percent, stage, message)
                    if len(self.calls) >= 4:  # starting, queued and two polls later
                        polled.set()

            task = asyncio.ensure_future(provider.generate_music(request(), Polled()))
            await asyncio.wait_for(polled.wait(), 5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert fake.canceled == ["pred0001"]

    run(test)


# --- durations from the bytes -------------------------------------------------------------------


def _wav(fmt_chunk: bytes, data: bytes, data_size: int | None = None) -> bytes:
    size = len(data) if data_size is None else data_size
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk
    body += b"LIST" + struct.pack("<I", 3) + b"abc\x00"  # an odd-sized chunk, padded
    body += b"data" + struct.pack("<I", size) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_wav_durations_for_any_encoding() -> None:
    assert probe_audio(sine_wav(2.5)) == ("wav", "audio/wav", 2.5)
    # 32-bit float stereo at 48 kHz (format 3, which the stdlib wave module refuses)
    float_fmt = struct.pack("<HHIIHH", 3, 2, 48000, 48000 * 8, 8, 32)
    assert wav_seconds(_wav(float_fmt, bytes(48000 * 8 * 3))) == 3.0
    # a streamed WAV whose data size is a placeholder: the bytes present count
    pcm_fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    assert wav_seconds(_wav(pcm_fmt, bytes(16000), data_size=0xFFFFFFFF)) == 0.5
    with pytest.raises(ProviderError, match="without a format and a data chunk"):
        wav_seconds(b"RIFF\x04\x00\x00\x00WAVE")


def test_mp3_durations_walk_every_frame() -> None:
    frames = round(2 * 44100 / 1152)
    expected = frames * 1152 / 44100
    assert mp3_seconds(mp3_bytes(2.0)) == pytest.approx(expected)  # ID3v2, Info frame, ID3v1
    assert mp3_seconds(mp3_bytes(2.0, info_frame=False, id3=False)) == pytest.approx(expected)
    # variable bitrate: 10 frames at 128 kbit/s then 10 at 320 kbit/s
    vbr = (b"\xff\xfb\x90\x00" + bytes(413)) * 10 + (b"\xff\xfb\xe0\x00" + bytes(1040)) * 10
    assert mp3_seconds(vbr) == pytest.approx(20 * 1152 / 44100)
    # MPEG-2 Layer III, 64 kbit/s, 22.05 kHz: 576 samples and 208 bytes per frame
    mpeg2 = (b"\xff\xf3\x80\x00" + bytes(204)) * 50
    kind, mime, seconds = probe_audio(mpeg2)
    assert (kind, mime) == ("mp3", "audio/mpeg")
    assert seconds == pytest.approx(50 * 576 / 22050)
    with pytest.raises(ProviderError, match="without audio frames"):
        mp3_seconds(b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"junk")
    with pytest.raises(ProviderError, match="neither WAV nor MP3"):
        probe_audio(b"OggS" + bytes(40))
