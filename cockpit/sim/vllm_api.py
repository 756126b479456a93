"""What a simulated ``vllm serve`` answers over HTTP: vLLM's OpenAI-compatible API, as it answers.

The shapes follow real responses kept in ``tests/fixtures/vllm/`` (see its SOURCES): ``GET
/v1/models`` lists the one served model (``owned_by: vllm``, ``root`` the weights it was
started with, ``max_model_len``, one ``model_permission``); ``POST /v1/completions`` answers a
``text_completion`` whose choice stops with ``length`` once ``max_tokens`` are generated;
``GET /health`` is 200 with an empty body. A model name the server does not serve is 404
(vLLM's ``NotFoundError``), a body that is not a JSON object 400. FastAPI reads a JSON body only
under a JSON content type: anything else is refused (422), the stricter reading.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

#: the tokens a simulated completion is made of (any text does; these read as English)
WORDS = (" the", " city", " is", " a", " place", " of", " light", " and", " water", " on", " hills")


@dataclass
class ServedModel:
    """One ``vllm serve`` process: the model it serves and under what name."""

    root: str  # what it was started with (a Hugging Face id or a path)
    name: str  # --served-model-name, else root
    max_model_len: int
    created: int  # the server's clock at start (seconds since the epoch)
    rng: random.Random = field(default_factory=random.Random)


def _dump(document: object) -> str:
    return json.dumps(document, separators=(",", ":"))


def _error(message: str, kind: str, code: int) -> tuple[int, str]:
    return code, _dump({"object": "error", "message": message, "type": kind, "param": None, "code": code})


def answer(served: ServedModel, method: str, path: str, body: str, content_type: str) -> tuple[int, str]:
    """The HTTP status and body the server answers one request with."""
    path = path.split("?", 1)[0]
    if path == "/health" and method == "GET":
        return 200, ""
    if path == "/v1/models" and method == "GET":
        return 200, _dump({"object": "list", "data": [_model_card(served)]})
    if path == "/v1/completions" and method == "POST":
        return _completion(served, body, content_type)
    if path in ("/health", "/v1/models", "/v1/completions"):
        return 405, _dump({"detail": "Method Not Allowed"})
    return 404, _dump({"detail": "Not Found"})


def _model_card(served: ServedModel) -> dict[str, object]:
    return {
        "id": served.name,
        "object": "model",
        "created": served.created,
        "owned_by": "vllm",
        "root": served.root,
        "parent": None,
        "max_model_len": served.max_model_len,
        "permission": [
            {
                "id": f"modelperm-{served.rng.getrandbits(64):016x}",
                "object": "model_permission",
                "created": served.created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }


def _completion(served: ServedModel, body: str, content_type: str) -> tuple[int, str]:
    if "json" not in content_type.lower():
        return 422, _dump(
            {
                "detail": [
                    {"type": "model_attributes_type", "loc": ["body"], "msg": "Input should be a valid dictionary"}
                ]
            }
        )
    try:
        request = json.loads(body)
    except ValueError:
        return _error("JSON decode error", "BadRequestError", 400)
    if not isinstance(request, dict):
        return _error("Input should be a valid dictionary", "BadRequestError", 400)
    model = request.get("model")
    if model is not None and model != served.name:
        return _error(f"The model `{model}` does not exist.", "NotFoundError", 404)
    prompt = request.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        return _error("Either prompt or prompt_embeds must be provided and non-empty.", "BadRequestError", 400)
    max_tokens = request.get("max_tokens", 16)
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return _error(f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError", 400)
    prompt_tokens = len(prompt.split()) + 1  # the tokenizer's BOS besides the words
    if prompt_tokens + max_tokens > served.max_model_len:
        return _error(
            f"This model's maximum context length is {served.max_model_len} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
            "BadRequestError",
            400,
        )
    text = "".join(served.rng.choice(WORDS) for _ in range(max_tokens))
    return 200, _dump(
        {
            "id": f"cmpl-{served.rng.getrandbits(128):032x}",
            "object": "text_completion",
            "created": served.created,
            "model": served.name,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": "length",
                    "stop_reason": None,
                    "token_ids": None,
                    "prompt_logprobs": None,
                    "prompt_token_ids": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + max_tokens,
                "completion_tokens": max_tokens,
                "prompt_tokens_details": None,
            },
            "kv_transfer_params": None,
        }
    )
