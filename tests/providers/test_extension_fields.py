"""The extension fields each adapter takes (`providers.base.extensions_refused`) and where its
request puts them: `top_k` in Anthropic's, Gemini's and Bedrock's own places (Bedrock: Claude
and Nova models only), anything to OpenAI-format servers, nothing to an adapter that says
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from providers.anthropic.request import messages_request
from providers.base import extensions_refused
from providers.bedrock.request import converse_request, extension_fields_of
from providers.gemini.request import gemini_request
from providers.openai.client import OpenAIProvider
from providers.simulator import Options, create

BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "Hi"}], "top_k": 12}
CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA = "us.amazon.nova-pro-v1:0"
LLAMA = "meta.llama3-70b-instruct-v1:0"


def test_top_k_lands_where_each_upstream_has_it() -> None:
    assert messages_request(BODY, default_max_tokens=10, stream=False)["top_k"] == 12
    assert gemini_request(BODY)["generationConfig"]["topK"] == 12
    claude = converse_request({**BODY, "model": CLAUDE})
    assert claude["additionalModelRequestFields"] == {"top_k": 12}
    nova = converse_request({**BODY, "model": NOVA})
    assert nova["additionalModelRequestFields"] == {"inferenceConfig": {"topK": 12}}


@pytest.mark.parametrize(
    ("model", "refused"), [(CLAUDE, ["min_p"]), (NOVA, ["min_p"]), (LLAMA, ["top_k", "min_p"])]
)
def test_bedrock_takes_top_k_for_the_families_that_have_it(model: str, refused: list[str]) -> None:
    taken = extension_fields_of(model)
    assert [name for name in ("top_k", "min_p") if name not in taken] == refused


def test_who_takes_what() -> None:
    names = ["top_k", "min_p"]
    assert extensions_refused(create("sim", Options()), "sim", names) == ["min_p"]
    assert extensions_refused(object(), "m", names) == names  # says nothing: takes none
    openai = OpenAIProvider.__new__(OpenAIProvider)  # the method needs no setup
    assert extensions_refused(openai, "gpt", names) == []
