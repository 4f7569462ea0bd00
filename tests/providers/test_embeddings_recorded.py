"""The embeddings adapters against exchanges recorded from the real OpenAI, Gemini and Bedrock
embedding APIs (`tests/fakes/recorded/*embeddings*.json`), replayed by the fakes: what each
adapter sends, the vectors it reads back (floats or base64, in input order) and the token
count it reports (None when the upstream gives none)."""

from __future__ import annotations

import base64
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

from providers.azure_openai import Options as AzureOptions
from providers.azure_openai import create as create_azure
from providers.bedrock import Options as BedrockOptions
from providers.bedrock import create as create_bedrock
from providers.errors import UpstreamRejectedRequest
from providers.gemini import Options as GeminiOptions
from providers.gemini import create as create_gemini
from providers.openai import Options as OpenAIOptions
from providers.openai import create as create_openai
from providers.openai_compatible import Options as CompatibleOptions
from providers.openai_compatible import create as create_compatible
from providers.vertex import Options as VertexOptions
from providers.vertex import create as create_vertex
from tests.fakes.azure_upstream import FakeAzure
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.bedrock_upstream import Reply as BedrockReply
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.gemini_upstream import Reply as GeminiReply
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.fakes.recorded import load
from tests.fakes.vertex_upstream import FakeVertex, ServiceAccountKey
from tests.fakes.vertex_upstream import Reply as VertexReply
from tests.providers.adapter_checks import run
from tests.providers.bedrock_support import KEY as AWS_KEY
from tests.providers.bedrock_support import SECRET as AWS_SECRET

OPENAI_FLOAT = load("openai_embeddings_float")["exchanges"][0]
OPENAI_BASE64 = load("openai_embeddings_base64")["exchanges"][0]
GEMINI_USAGE = load("gemini_embeddings_usage")["exchanges"][0]
GEMINI_NO_USAGE = load("gemini_embeddings_no_usage")["exchanges"][0]
TITAN = load("bedrock_titan_embeddings")["exchanges"]
TITAN_DIMENSIONS = load("bedrock_titan_dimensions")["exchanges"][0]
COHERE = load("bedrock_cohere_embeddings")["exchanges"][0]
SERVICE_ACCOUNT = ServiceAccountKey.generate()


def _floats(encoded: str) -> list[float]:
    raw = base64.b64decode(encoded)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


def test_openai_passes_the_body_through_and_reads_recorded_floats() -> None:
    async def scenario() -> None:
        async with FakeOpenAI() as fake:
            fake.enqueue(Reply(body=OPENAI_FLOAT["body"]))
            provider = create_openai("openai", OpenAIOptions(base_url=fake.base_url))
            try:
                body = {**OPENAI_FLOAT["request"], "input": [OPENAI_FLOAT["request"]["input"]]}
                result = await provider.embed(body)
            finally:
                await provider.close()
        assert fake.requests[0].path == "/v1/embeddings"
        assert fake.requests[0].json == body
        assert result.vectors == [OPENAI_FLOAT["body"]["data"][0]["embedding"]]
        assert result.prompt_tokens == OPENAI_FLOAT["body"]["usage"]["prompt_tokens"] == 8

    run(scenario)


def test_openai_base64_vectors_decode_to_little_endian_float32() -> None:
    async def scenario() -> None:
        async with FakeOpenAI() as fake:
            fake.enqueue(Reply(body=OPENAI_BASE64["body"]))
            provider = create_compatible("vllm", CompatibleOptions(base_url=fake.base_url))
            try:
                result = await provider.embed(OPENAI_BASE64["request"])
            finally:
                await provider.close()
        assert fake.requests[0].json["encoding_format"] == "base64"
        recorded = [item["embedding"] for item in OPENAI_BASE64["body"]["data"]]
        assert result.vectors == [_floats(encoded) for encoded in recorded]
        assert len(result.vectors[0]) == 1536
        assert _norm(result.vectors[0]) == pytest.approx(1.0, abs=1e-4)  # OpenAI's are unit
        assert result.prompt_tokens == 2

    run(scenario)


def test_azure_sends_embeddings_to_the_deployment() -> None:
    async def scenario() -> None:
        async with FakeAzure(api_key="k") as fake:
            fake.enqueue(Reply(body=OPENAI_FLOAT["body"]))
            provider = create_azure(
                "azure",
                AzureOptions(base_url=fake.base_url, api_version="2024-10-21", api_key="k"),
            )
            try:
                result = await provider.embed({"model": "ada-prod", "input": ["hi"]})
            finally:
                await provider.close()
        assert fake.calls == [("deployments", "ada-prod", "2024-10-21")]
        assert fake.requests[0].path.startswith("/openai/deployments/ada-prod/embeddings")
        assert len(result.vectors[0]) == 1536

    run(scenario)


def test_azure_v1_sends_the_fixed_deployment_as_model() -> None:
    async def scenario() -> None:
        async with FakeAzure(api_key="k") as fake:
            fake.enqueue(Reply(body=OPENAI_BASE64["body"]))
            options = AzureOptions(
                base_url=fake.base_url, api="v1", deployment="embed-prod", api_key="k"
            )
            provider = create_azure("azure", options)
            try:
                body = {"model": "text-embedding-3-small", "input": ["hello", "world"]}
                result = await provider.embed(body | {"encoding_format": "base64"})
            finally:
                await provider.close()
        assert fake.calls == [("v1", "embed-prod", None)]
        assert fake.requests[0].path == "/openai/v1/embeddings"
        assert fake.requests[0].json["model"] == "embed-prod"
        assert result.prompt_tokens == 2 and len(result.vectors) == 2

    run(scenario)


def test_gemini_batches_inputs_and_reads_usage_when_the_model_reports_it() -> None:
    async def scenario() -> None:
        async with FakeGemini() as fake:
            fake.enqueue(GeminiReply(body=GEMINI_USAGE["body"]))
            provider = create_gemini("gem", GeminiOptions(base_url=fake.base_url, api_key="g"))
            try:
                result = await provider.embed(
                    {
                        "model": "gemini-embedding-2",
                        "input": ["First text", "Second text"],
                        "dimensions": 768,
                    }
                )
            finally:
                await provider.close()
        assert fake.requests[0].path == "/v1beta/models/gemini-embedding-2:batchEmbedContents"
        assert fake.requests[0].json == GEMINI_USAGE["request"]  # byte for byte what was recorded
        assert result.prompt_tokens == 4
        assert [len(v) for v in result.vectors] == [768, 768]
        assert all(_norm(v) == pytest.approx(1.0) for v in result.vectors)  # shortened: normalized

    run(scenario)


def test_gemini_embedding_001_reports_no_usage_so_none_is_reported() -> None:
    async def scenario() -> None:
        async with FakeGemini() as fake:
            fake.enqueue(GeminiReply(body=GEMINI_NO_USAGE["body"]))
            provider = create_gemini("gem", GeminiOptions(base_url=fake.base_url, api_key="g"))
            try:
                result = await provider.embed(
                    {"model": "gemini-embedding-001", "input": ["Some text goes here"]}
                )
            finally:
                await provider.close()
        assert "usageMetadata" not in GEMINI_NO_USAGE["body"]
        assert result.prompt_tokens is None
        assert result.vectors == [GEMINI_NO_USAGE["body"]["embeddings"][0]["values"]]

    run(scenario)


def test_gemini_refuses_token_arrays_naming_input() -> None:
    async def scenario() -> None:
        async with FakeGemini() as fake:
            provider = create_gemini("gem", GeminiOptions(base_url=fake.base_url, api_key="g"))
            try:
                with pytest.raises(UpstreamRejectedRequest) as caught:
                    await provider.embed({"model": "gemini-embedding-001", "input": [[1, 2]]})
            finally:
                await provider.close()
        assert caught.value.field == "input"
        assert fake.requests == []

    run(scenario)


def test_vertex_calls_embed_content_once_per_input(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    key_file = tmp_path / "key.json"
    key_file.write_text(json.dumps(SERVICE_ACCOUNT.info()))
    values = GEMINI_NO_USAGE["body"]["embeddings"][0]["values"]

    async def scenario() -> None:
        async with FakeVertex(SERVICE_ACCOUNT) as fake:
            for count in (4, 5):
                answer = {
                    "embedding": {"values": values},
                    "usageMetadata": {"promptTokenCount": count},
                }
                fake.enqueue(VertexReply(body=answer))
            provider = create_vertex(
                "vertex",
                VertexOptions(
                    base_url=fake.base_url,
                    project="p",
                    location="us-central1",
                    credentials_file=str(key_file),
                    token_url=fake.token_url,
                    metadata_url=fake.metadata_url,
                ),
            )
            try:
                result = await provider.embed(
                    {"model": "gemini-embedding-001", "input": ["a", "b"], "dimensions": 768}
                )
            finally:
                await provider.close()
        paths = [r.path for r in fake.requests if "embedContent" in r.path]
        model = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-001"
        assert paths == [model + ":embedContent"] * 2
        sent = [r.json for r in fake.requests if "embedContent" in r.path]
        assert sorted(s["content"]["parts"][0]["text"] for s in sent) == ["a", "b"]
        assert all(s["outputDimensionality"] == 768 for s in sent)
        assert result.prompt_tokens == 9
        assert len(result.vectors) == 2

    run(scenario)


def test_bedrock_titan_one_call_per_input_as_recorded(aws_env: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        async with FakeBedrock(credentials=(AWS_KEY, AWS_SECRET)) as fake:
            for exchange in TITAN:
                fake.enqueue(BedrockReply(body=exchange["body"]))
            provider = create_bedrock(
                "bedrock", BedrockOptions(base_url=fake.base_url, region="us-east-1")
            )
            try:
                result = await provider.embed(
                    {"model": "amazon.titan-embed-text-v2:0", "input": ["hello", "world"]}
                )
            finally:
                await provider.close()
        assert [r.path for r in fake.requests] == [
            "/model/amazon.titan-embed-text-v2%3A0/invoke"
        ] * 2
        assert [r.json for r in fake.requests] == [e["request"] for e in TITAN]
        assert fake.signatures_checked == 2
        assert result.prompt_tokens == sum(e["body"]["inputTextTokenCount"] for e in TITAN) == 4
        assert sorted(map(len, result.vectors)) == [1024, 1024]

    run(scenario)


def test_bedrock_titan_dimensions_as_recorded_and_a_size_it_lacks_refused(
    aws_env: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        async with FakeBedrock(credentials=(AWS_KEY, AWS_SECRET)) as fake:
            fake.enqueue(BedrockReply(body=TITAN_DIMENSIONS["body"]))
            provider = create_bedrock(
                "bedrock", BedrockOptions(base_url=fake.base_url, region="us-east-1")
            )
            try:
                text = TITAN_DIMENSIONS["request"]["inputText"]
                model = "amazon.titan-embed-text-v2:0"
                result = await provider.embed({"model": model, "input": [text], "dimensions": 256})
                with pytest.raises(UpstreamRejectedRequest) as caught:
                    await provider.embed({"model": model, "input": [text], "dimensions": 300})
            finally:
                await provider.close()
        assert fake.requests[0].json == TITAN_DIMENSIONS["request"]
        assert len(fake.requests) == 1
        assert caught.value.field == "dimensions"
        assert len(result.vectors[0]) == 256
        assert result.prompt_tokens == 4

    run(scenario)


def test_bedrock_cohere_batches_and_reads_embeddings_by_type(aws_env: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        async with FakeBedrock(credentials=(AWS_KEY, AWS_SECRET)) as fake:
            fake.enqueue(BedrockReply(body=COHERE["body"]))
            provider = create_bedrock(
                "bedrock", BedrockOptions(base_url=fake.base_url, region="us-east-1")
            )
            try:
                result = await provider.embed(
                    {"model": "cohere.embed-v4:0", "input": ["hello", "world"]}
                )
            finally:
                await provider.close()
        sent = fake.requests[0].json
        assert fake.requests[0].path == "/model/cohere.embed-v4%3A0/invoke"
        assert sent["texts"] == COHERE["request"]["texts"]
        assert sent["input_type"] == "search_document"
        assert sent["embedding_types"] == ["float"]
        assert result.vectors == COHERE["body"]["embeddings"]["float"]
        assert result.prompt_tokens is None  # reported in a header only: the gateway estimates

    run(scenario)
