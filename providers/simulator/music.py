"""Music tasks of the simulator: real WAV clips (16-bit PCM mono, 22050 Hz), made offline.

Each clip is a melody of sine tones on a pentatonic scale (with a quieter second harmonic, a
"voice", unless `instrumental`), picked by SHAKE-256 over the model, the prompt (directives
removed), the lyrics, the reference audio and the take number: the same request gives the same
clips, and take 2 differs from take 1. Notes fade in and out over 5 ms, so there are no clicks.

Clips per task: `music_clips[model]` (default option: two for "alpha-5.5"), else one. Length:
`clip_seconds`, or with reference audio the reference's length (clamped to 1..30 s) when it is
a WAV (audio/wav, audio/x-wav, audio/wave, audio/vnd.wave) the stdlib `wave` module reads; a
WAV it cannot read, or an empty reference, raises UpstreamRejectedRequest. Other audio types
cannot be decoded offline, so they only seed the melody and the clip lasts `clip_seconds`.
The reference is read once (at most the gateway's audio cap) and dropped before the clips are
made; it is not mixed in. Titles: the request's title, else the prompt's first words;
later clips add " (take N)". `request.options` is accepted and ignored; lyrics together with
`instrumental` are rejected, as the public API forbids them.

Steps, timing and directives as for images (`providers.simulator.images`): "starting", one
"generating" per clip, "encoding"; `[[sim:fail=N]]`, `[[sim:stall]]`, `[[sim:task_ms=N]]`
(`[[sim:images=N]]` is rejected here).
"""

from __future__ import annotations

import asyncio
import io
import math
import sys
import wave
from array import array
from hashlib import shake_256

import msgspec

from providers.base import GeneratedClip, MusicRequest, MusicResult, TaskControl
from providers.errors import UpstreamRejectedRequest, UpstreamUnavailable
from providers.simulator.directives import failure_for, parse_media_directives
from providers.simulator.options import Options
from providers.simulator.progress import Progress

__all__ = ["SAMPLE_RATE", "generate_music"]

SAMPLE_RATE = 22050
_WAV_TYPES = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"})
_REFERENCE_SECONDS = (1.0, 30.0)  # a clip that follows a reference lasts within these bounds
_SCALE = (0, 2, 4, 7, 9, 12, 14, 16, 19)  # major pentatonic semitones over 1.5 octaves
_AMPLITUDE = 9000  # of 32767: loud enough to hear, room for the harmonic
_FADE = SAMPLE_RATE * 5 // 1000
_MIN_BEAT = SAMPLE_RATE * 15 // 100
_TITLE_WORDS = 6
_TITLE_CHARS = 60


async def generate_music(
    name: str, options: Options, request: MusicRequest, control: TaskControl, *, unlucky: bool
) -> MusicResult:
    """One music task; `unlucky` (drawn from `failure_rate`) fails it like fail=503."""
    directives, prompt = parse_media_directives(request.prompt, images=False)
    if request.instrumental and request.lyrics is not None:
        raise UpstreamRejectedRequest(
            "lyrics must be omitted for instrumental music", upstream_status=400
        )
    seconds = options.clip_seconds
    reference = request.reference_audio
    reference_digest = None
    if reference is not None:
        data = await reference.read()  # the one reference, at most the gateway's audio cap
        seconds = _reference_seconds(reference.mime_type, data) or seconds
        reference_digest = shake_256(data).hexdigest(16)
        del data
    frames = round(seconds * SAMPLE_RATE)
    clips = options.music_clips.get(request.model, 1)
    task_seconds = options.task_seconds
    if directives.task_ms is not None:
        task_seconds = directives.task_ms / 1000
    progress = Progress(control, task_seconds, steps=clips + 2)

    await progress.step("starting", f"{name}: {request.model}, {clips} clip(s)")
    if directives.fail is not None:
        raise failure_for(directives.fail)
    if unlucky:
        raise UpstreamUnavailable("simulated upstream failure (failure_rate)", upstream_status=503)
    if directives.stall:
        await progress.stall("generating", "simulated stall: waiting for the upstream")
    key = msgspec.json.encode(
        [
            request.model,
            prompt,
            request.lyrics,
            request.instrumental,
            reference_digest,
        ]
    )
    melodies: list[bytes] = []
    for take in range(clips):
        await progress.step("generating", f"clip {take + 1} of {clips}")
        seed = key + b"take %d" % take
        voiced = not request.instrumental
        melodies.append(await asyncio.to_thread(_melody, seed, frames, voiced))
    await progress.step("encoding", f"{clips} WAV clip(s)")
    title = request.title or _title(prompt)
    return MusicResult(
        clips=[
            GeneratedClip(
                data=_wav(samples),
                mime_type="audio/wav",
                format="wav",
                duration_seconds=frames / SAMPLE_RATE,
                title=title if take == 0 else f"{title} (take {take + 1})",
            )
            for take, samples in enumerate(melodies)
        ]
    )


def _reference_seconds(mime_type: str, data: bytes) -> float | None:
    """The clip length a WAV reference asks for; None for audio that cannot be read offline."""
    if not data:
        raise UpstreamRejectedRequest("reference audio is empty", upstream_status=400)
    if mime_type.split(";")[0].strip().lower() not in _WAV_TYPES:
        return None
    try:
        with wave.open(io.BytesIO(data), "rb") as source:
            length = source.getnframes() / source.getframerate()
    except (wave.Error, EOFError, ZeroDivisionError) as exc:
        raise UpstreamRejectedRequest(
            f"reference audio ({mime_type}, {len(data)} bytes) is not a"
            f" WAV file the upstream can read: {str(exc) or type(exc).__name__}",
            upstream_status=400,
        ) from exc
    low, high = _REFERENCE_SECONDS
    return min(max(length, low), high)


def _melody(seed: bytes, frames: int, voiced: bool) -> bytes:
    """`frames` samples of little-endian 16-bit PCM: notes of 1 or 2 beats until full."""
    noise = shake_256(seed).digest(3 + frames // _MIN_BEAT)
    base = 196.0 * 2 ** ((noise[0] % 7) / 12)  # G3 and up to six semitones higher
    beat = _MIN_BEAT + SAMPLE_RATE * (noise[1] % 4) // 20  # 0.15 to 0.3 s
    samples = array("h")
    for choice in noise[2:]:
        if len(samples) >= frames:
            break
        length = min(beat * (1 + choice % 2), frames - len(samples))
        pitch = base * 2 ** (_SCALE[(choice >> 1) % len(_SCALE)] / 12)
        samples.extend(_tone(pitch, length, voiced))
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def _tone(pitch: float, length: int, voiced: bool) -> list[int]:
    step = 2 * math.pi * pitch / SAMPLE_RATE
    sin = math.sin
    if voiced:
        voice = 2 * step  # the second harmonic
        values = [int(_AMPLITUDE * (sin(step * k) + 0.35 * sin(voice * k))) for k in range(length)]
    else:
        values = [int(_AMPLITUDE * sin(step * k)) for k in range(length)]
    fade = min(_FADE, length // 2)
    for k in range(fade):
        values[k] = values[k] * k // fade
        values[-1 - k] = values[-1 - k] * k // fade
    return values


def _wav(samples: bytes) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(samples)
    return buffer.getvalue()


def _title(prompt: str) -> str:
    title = " ".join(prompt.split()[:_TITLE_WORDS])[:_TITLE_CHARS].strip(" ,.;:!?-")
    return title[:1].upper() + title[1:] if title else "Untitled"
