"""What a provider error means to the client: its words where they are about the request or
the model, and retryability by cause (the envelope's `retryable`, the SDKs' `x-should-retry`)."""

from __future__ import annotations

from gateway.routing.fallback import falls_back
from gateway.routing.upstream_errors import as_gateway_error
from providers.errors import ProviderError, UpstreamModelFailed, UpstreamRejectedRequest
from tests.fakes.recorded import load

FAILURES = [failure["error"] for failure in load("replicate_failed_predictions")["failures"]]


def test_a_model_failure_shows_the_upstreams_words_and_is_not_retryable() -> None:
    error = as_gateway_error(UpstreamModelFailed(FAILURES[2]))
    assert (error.status_code, error.code, error.retryable) == (502, "upstream_error", False)
    assert error.message == f"The model failed: {FAILURES[2]}"
    assert error.headers["x-should-retry"] == "false"
    assert not falls_back(UpstreamModelFailed(FAILURES[2]))


def test_an_interrupted_run_keeps_its_words_and_stays_retryable() -> None:
    error = as_gateway_error(UpstreamModelFailed(FAILURES[0], retryable=True))
    assert (error.status_code, error.code, error.retryable) == (502, "upstream_error", True)
    assert error.message == f"The model failed: {FAILURES[0]}"
    assert "x-should-retry" not in error.headers


def test_other_upstream_failures_keep_their_words_out_of_the_answer() -> None:
    error = as_gateway_error(ProviderError("upstream answered HTTP 500: stack trace at 10.0.0.7"))
    assert error.retryable and "10.0.0.7" not in error.message
    assert falls_back(ProviderError("broken"))
    assert not falls_back(UpstreamRejectedRequest("bad"))
