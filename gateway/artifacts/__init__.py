"""Artifact bytes: blob storage, type sniffing, signed URLs and the ways bytes come in.

Nothing here knows HTTP requests or Litestar: callers pass plain values, bytes and async
iterators, so the API layer and the task worker share it.
"""

from __future__ import annotations

from gateway.artifacts.addresses import address_allowed, is_public_address
from gateway.artifacts.blobs import BlobInfo, BlobStore, LocalBlobStore, check_key
from gateway.artifacts.data_uri import DecodedData, decode_data_uri
from gateway.artifacts.errors import BlobNotFound, invalid_input
from gateway.artifacts.fetch import FetchedBlob, FetchPolicy, ReferenceFetcher
from gateway.artifacts.multipart import MultipartLimits, Upload, open_upload, sanitize_filename
from gateway.artifacts.signing import UrlSigner
from gateway.artifacts.sniff import AUDIO_TYPES, IMAGE_TYPES, extension_for, sniff

__all__ = [
    "AUDIO_TYPES",
    "IMAGE_TYPES",
    "BlobInfo",
    "BlobNotFound",
    "BlobStore",
    "DecodedData",
    "FetchPolicy",
    "FetchedBlob",
    "LocalBlobStore",
    "MultipartLimits",
    "ReferenceFetcher",
    "Upload",
    "UrlSigner",
    "address_allowed",
    "check_key",
    "decode_data_uri",
    "extension_for",
    "invalid_input",
    "is_public_address",
    "open_upload",
    "sanitize_filename",
    "sniff",
]
