"""What a downloaded audio file is and how long it lasts, read from its bytes.

The upstream's word is not enough: the clip's `duration_seconds` is billed and shown, so it is
measured. WAV: the `fmt ` chunk's byte rate and the `data` chunk's size, for any encoding
(PCM, float, extensible; the stdlib `wave` module reads PCM only), and a streamed file whose
`data` size is a placeholder counts the bytes present. MP3 (MPEG-1/2/2.5 Layer III): an ID3v2
tag is skipped, every frame header is walked (so VBR files are exact), and a Xing/Info frame
is not counted as audio, as decoders do not play it.
"""

from __future__ import annotations

import struct

from providers.errors import ProviderError

__all__ = ["mp3_seconds", "probe_audio", "wav_seconds"]

# Layer III bitrates in kbit/s by header index, for MPEG-1 and for MPEG-2/2.5.
_BITRATES_V1 = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
_BITRATES_V2 = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)
_SAMPLE_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


def probe_audio(data: bytes) -> tuple[str, str, float]:
    """(format, mime type, seconds); ProviderError when it is neither WAV nor MP3."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav", "audio/wav", wav_seconds(data)
    if data[:3] == b"ID3" or _frame(data, 0) is not None:
        return "mp3", "audio/mpeg", mp3_seconds(data)
    raise ProviderError(f"the upstream sent audio that is neither WAV nor MP3 ({data[:12]!r})")


def wav_seconds(data: bytes) -> float:
    byte_rate: int = 0
    position = 12
    while position + 8 <= len(data):
        chunk = data[position : position + 4]
        size: int = struct.unpack_from("<I", data, position + 4)[0]
        body = position + 8
        if chunk == b"fmt " and size >= 16:
            byte_rate = struct.unpack_from("<I", data, body + 8)[0]
        elif chunk == b"data":
            if not byte_rate:
                break
            return min(size, len(data) - body) / byte_rate
        position = body + size + (size & 1)  # chunks are padded to an even length
    raise ProviderError("the upstream sent a WAV file without a format and a data chunk")


def mp3_seconds(data: bytes) -> float:
    position = 0
    if data[:3] == b"ID3" and len(data) >= 10:
        tag = data[6:10]
        position = 10 + (tag[0] << 21 | tag[1] << 14 | tag[2] << 7 | tag[3])
        if data[5] & 0x10:  # a footer follows the tag
            position += 10
    seconds = 0.0
    frames = 0
    while (frame := _frame(data, position)) is not None:
        length, samples, rate, info = frame
        if not (frames == 0 and info):
            seconds += samples / rate
        frames += 1
        position += length
    if not seconds:
        raise ProviderError("the upstream sent an MP3 file without audio frames")
    return seconds


def _frame(data: bytes, position: int) -> tuple[int, int, int, bool] | None:
    """(length, samples, sample rate, is a Xing/Info frame) of the Layer III frame at
    `position`, or None when there is none (end of the file, an ID3v1 tag, other data, a
    frame cut off)."""
    if position + 4 > len(data):
        return None
    header = struct.unpack_from(">I", data, position)[0]
    version, layer = header >> 19 & 3, header >> 17 & 3
    bitrate_index, rate_index = header >> 12 & 15, header >> 10 & 3
    if header >> 21 != 0x7FF or version == 1 or layer != 1:  # sync, reserved, Layer III
        return None
    if bitrate_index in (0, 15) or rate_index == 3:  # free format, bad, reserved
        return None
    padding, mono = header >> 9 & 1, header >> 6 & 3 == 3
    rate = _SAMPLE_RATES[version][rate_index]
    if version == 3:
        length = 144_000 * _BITRATES_V1[bitrate_index] // rate + padding
        samples, side_info = 1152, 17 if mono else 32
    else:
        length = 72_000 * _BITRATES_V2[bitrate_index] // rate + padding
        samples, side_info = 576, 9 if mono else 17
    if position + length > len(data):  # cut off: not a frame a decoder would play
        return None
    tag = data[position + 4 + side_info : position + 8 + side_info]
    return length, samples, rate, tag in (b"Xing", b"Info")
