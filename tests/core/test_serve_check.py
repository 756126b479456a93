"""The shipped runbook's serve and request checks, run on the simulator as strict as a real node.

`smallest-serve` and `app-requests` start the serving image's own entrypoint (vllm serve) on the
node with the smallest model and ask its OpenAI-compatible API over the node's loopback with
curl. The simulated server answers in the shapes real vLLM servers answered in the captures kept
in tests/fixtures/vllm/, and never comes up where a real one would not (CUDA broken in the
container, no GPU handed in, the driver too old for the image).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from sim_nodes import sh

from cockpit.runbook.loader import load
from cockpit.runbook.model import Item
from cockpit.runbook.placeholders import fill
from cockpit.sim.node import NodeHooks, SimNode
from cockpit.sim.scenarios import SCENARIOS
from cockpit.sim.vllm_api import ServedModel, answer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm"


def keys(document: object) -> object:
    """A JSON document's shape: its keys, nested, with lists by their first element."""
    if isinstance(document, dict):
        return {k: keys(v) for k, v in document.items()}
    if isinstance(document, list):
        return [keys(document[0])] if document else []
    return type(document).__name__ if document is not None else None


def shape_keys(document: object) -> set[str]:
    """Every key path of a document (``choices.0.text``), for comparing what two servers write."""
    out: set[str] = set()

    def walk(value: object, path: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                out.add(f"{path}{k}")
                walk(v, f"{path}{k}.")
        elif isinstance(value, list) and value:
            walk(value[0], f"{path}0.")

    walk(document, "")
    return out


def served() -> ServedModel:
    return ServedModel(root="facebook/opt-125m", name="cockpit-serve-check", max_model_len=512, created=1765026778)


def test_models_list_has_the_real_servers_shape() -> None:
    real = json.loads((FIXTURES / "v1-models_Apertus-8B_public-capture.json").read_text())
    status, body = answer(served(), "GET", "/v1/models", "", "")
    ours = json.loads(body)
    assert status == 200
    assert keys(ours) == keys(real)
    assert ours["data"][0]["id"] == "cockpit-serve-check" and ours["data"][0]["root"] == "facebook/opt-125m"
    # compact, as vLLM writes it: the runbook's expectation reads it so
    assert body.startswith('{"object":"list","data":[{"id":"cockpit-serve-check","object":"model"')


def test_completion_has_every_field_the_real_servers_write() -> None:
    real = json.loads((FIXTURES / "v1-completions_mini-llama_public-capture.json").read_text())
    newer = json.loads((FIXTURES / "v1-chat-completions_vllm-0.11.2_ai-playground.json").read_text())
    request = json.dumps({"model": "cockpit-serve-check", "prompt": "San Francisco is a", "max_tokens": 7})
    status, body = answer(served(), "POST", "/v1/completions", request, "application/json")
    ours = json.loads(body)
    assert status == 200
    assert shape_keys(real) <= shape_keys(ours), shape_keys(real) - shape_keys(ours)
    # what 0.11 adds at the top level; a chat response keeps the prompt's fields there, a
    # completion in its choice (the capture above has prompt_logprobs in the choice)
    prompt_fields = {"prompt_logprobs", "prompt_token_ids"}
    top_level_011 = {k for k in newer if k != "choices"} - prompt_fields
    assert top_level_011 <= set(ours), top_level_011 - set(ours)
    assert prompt_fields <= set(ours["choices"][0])
    assert ours["object"] == "text_completion" and ours["choices"][0]["finish_reason"] == "length"
    assert ours["usage"]["completion_tokens"] == 7 == real["usage"]["completion_tokens"]
    assert ours["usage"]["prompt_tokens"] == real["usage"]["prompt_tokens"]  # 4 words and BOS, as the capture counted


def test_the_server_refuses_what_vllm_refuses() -> None:
    request = json.dumps({"model": "facebook/opt-125m", "prompt": "hi", "max_tokens": 4})
    status, body = answer(served(), "POST", "/v1/completions", request, "application/json")
    assert status == 404 and json.loads(body)["type"] == "NotFoundError"  # served under another name
    status, _ = answer(served(), "POST", "/v1/completions", "{not json", "application/json")
    assert status == 400
    status, _ = answer(served(), "POST", "/v1/completions", '{"prompt": "hi"}', "application/x-www-form-urlencoded")
    assert status == 422  # curl -d without a JSON content type
    too_long = json.dumps({"prompt": "hi", "max_tokens": 600})
    status, body = answer(served(), "POST", "/v1/completions", too_long, "application/json")
    assert status == 400 and "maximum context length is 512" in body
    assert answer(served(), "GET", "/v1/completions", "", "")[0] == 405


# -- the runbook's commands on a simulated node -------------------------------------------


def item(item_id: str) -> Item:
    return next(i for i in load("driver-upgrade-r580").runbook.stage("smoke").items if i.id == item_id)


def filled(it: Item) -> str:
    runbook = load("driver-upgrade-r580").runbook
    assert it.command is not None
    return fill(it.command, {**runbook.defaults(), "node": "gpu02"})


def passes(it: Item, status: int, stdout: str) -> bool:
    assert it.expect is not None and it.expect.stdout_matches is not None
    return status == it.expect.exit_status and re.search(it.expect.stdout_matches, stdout) is not None


async def hundredfold(seconds: float) -> None:
    await asyncio.sleep(seconds / 100)  # the engine's load and curl's retries keep their order


async def thousandfold(seconds: float) -> None:
    # where the server comes up and stays: curl's 60 retries (5 s apart) outlast its 50 s load
    # at any clock, each retry's wait being at least its share of real time
    await asyncio.sleep(seconds / 1000)


async def ten_thousandfold(seconds: float) -> None:
    await asyncio.sleep(seconds / 10_000)  # where no server comes up: only curl's retries wait


def timed_node(scenario: str = "happy", sleep: Callable[[float], Awaitable[None]] = hundredfold) -> SimNode:
    """The fleet's second node (a scenario's target), its clock 100 times as fast as a real one."""
    n = SimNode.create("gpu02", 1, SCENARIOS[scenario], seed=0)
    n.hooks = NodeHooks(reboot=lambda _node: None, sleep=sleep)
    return n


async def upgraded(scenario: str = "happy", sleep: Callable[[float], Awaitable[None]] = hundredfold) -> SimNode:
    n = timed_node(scenario, sleep)
    status, _, err = await sh(
        n, "apt-get install -y nvidia-driver-580-open nvidia-fabricmanager=580.95.05-1 libnvidia-nscq=580.95.05-1"
    )
    assert status == 0, err
    n.reboot_now()
    return n


def test_the_shipped_checks_are_commands_not_attestations() -> None:
    for item_id in ("smallest-serve", "app-requests"):
        it = item(item_id)
        assert it.verify.value == "command" and it.command is not None and it.expect is not None
        assert "curl" in it.command and "{smoke_image}" in it.command and "--gpus all" in it.command
        assert it.expect.stdout_matches


async def test_both_checks_pass_on_a_healthy_upgraded_node_and_leave_no_container() -> None:
    n = await upgraded(sleep=thousandfold)
    for item_id, shape in (("smallest-serve", '"object":"list"'), ("app-requests", '"object":"text_completion"')):
        it = item(item_id)
        status, out, err = await sh(n, filled(it))
        assert passes(it, status, out), (item_id, status, out, err)
        assert shape in out
        assert n.containers.containers == {}, "the check removes its container"
        status, out, _ = await sh(n, "curl -sS http://127.0.0.1:18080/v1/models")
        assert status == 7 and out == ""  # nothing listens once the check is done


async def test_the_checks_fail_where_cuda_is_broken_in_the_container() -> None:
    # smoke-false-pass: nvidia-smi is fine on the host, CUDA fails inside the image (error 803)
    n = await upgraded("smoke-false-pass", ten_thousandfold)
    assert n.containers.compat_fault is not None
    for item_id in ("smallest-serve", "app-requests"):
        it = item(item_id)
        status, out, err = await sh(n, filled(it))
        assert not passes(it, status, out), (item_id, status, out)
        assert status != 0 and "text_completion" not in out
        assert "curl: (7) Failed to connect to 127.0.0.1 port 18080" in err  # the server never came up
        assert "Error 803" in err  # and its log says why
        assert n.containers.containers == {}


async def test_the_checks_fail_before_the_upgrade_the_image_needs_r580() -> None:
    n = timed_node()  # r575: the cu130 image's requirement is not met
    it = item("smallest-serve")
    status, out, err = await sh(n, filled(it))
    assert status == 125 and not passes(it, status, out)
    assert "unsatisfied condition: cuda>=13.0" in err


async def test_curl_retries_only_what_it_is_told_to() -> None:
    n = await upgraded()
    image = "vllm/vllm-openai:kimi-k3"
    status, _, err = await sh(n, f"docker run -d --name s --gpus all -p 127.0.0.1:18081:8000 {image} m")
    assert status == 0, err
    # at once: vLLM has not bound its port yet, docker-proxy resets; --retry alone does not retry that
    status, _, err = await sh(n, "curl -sS --retry 5 --retry-delay 1 http://127.0.0.1:18081/v1/models")
    assert status == 56 and "Connection reset by peer" in err
    # bound, engine still loading: the request waits until --max-time
    status, _, err = await sh(n, "sleep 20; curl -sS --max-time 2 http://127.0.0.1:18081/health")
    assert status == 28 and "Operation timed out after 2001 milliseconds" in err
    status, out, err = await sh(n, "curl -sS --fail --retry 20 --retry-delay 5 http://127.0.0.1:18081/v1/models")
    assert status == 0 and '"root":"m"' in out, err  # a timeout is transient: retried until it serves
    status, _, err = await sh(n, "curl -sS --fail http://127.0.0.1:18081/v1/nothing")
    assert status == 22 and "returned error: 404" in err
    status, _, err = await sh(n, "docker run -d --name s --gpus all -p 127.0.0.1:18082:8000 " + image + " m")
    assert status == 125 and 'The container name "/s" is already in use' in err
    status, _, err = await sh(n, "docker rm s")
    assert status == 1 and "container is running" in err
    status, out, _ = await sh(n, "docker rm -f s")
    assert status == 0 and out == "s\n" and n.containers.containers == {}


async def test_a_reboot_ends_the_nodes_containers() -> None:
    n = await upgraded()
    status, _, err = await sh(
        n, "docker run -d --rm --name s --gpus all -p 127.0.0.1:18083:8000 vllm/vllm-openai:kimi-k3 m"
    )
    assert status == 0, err
    n.reboot_now()
    status, _, _ = await sh(n, "curl -sS http://127.0.0.1:18083/health")
    assert status == 7 and n.containers.containers == {}
