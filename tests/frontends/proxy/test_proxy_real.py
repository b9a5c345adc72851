"""`agent proxy` as a user runs it: a real process on the tiny embedded llama-server (tiny-ngram, which
drafts), with the OpenAI and Anthropic SDKs streaming through it; the turns in `agent stats` match the
server's own counters; a client that hangs up frees the server's slot; nothing is left running."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx2
import openai
import pytest

from agent.store.telemetry import parse_server_counters, read_jsonl
from agent.store.transcripts import list_session_paths, load_session
from tests.conftest import free_port

pytestmark = pytest.mark.server

REPEAT = "Repeat these numbers exactly: " + " ".join(str(n) for n in range(40, 90))


def start_proxy(port: int, server_port: int) -> subprocess.Popen:
    proxy = subprocess.Popen(
        [sys.executable, "-m", "agent", "proxy", "-p", "tiny-ngram", "--port", str(port),
         "--server-port", str(server_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proxy
        except httpx2.HTTPError:
            pass
        if proxy.poll() is not None:
            raise AssertionError(f"agent proxy exited {proxy.returncode}: {proxy.stdout.read()}")
        time.sleep(0.25)
    proxy.kill()
    raise AssertionError("agent proxy did not serve in 180 s")


def stop_proxy(proxy: subprocess.Popen) -> str:
    proxy.send_signal(signal.SIGINT)
    out, _ = proxy.communicate(timeout=60)
    assert proxy.returncode == 0, out
    return out


def masked(raw: bytes) -> list[dict]:
    """A stream's events without what differs between two runs of one request (ids, times, timings)."""
    events = []
    for line in raw.decode().splitlines():
        if line.startswith("data: {"):
            event = json.loads(line[6:])
            for key in ("id", "created", "timings", "usage"):
                event.pop(key, None)
            events.append(event)
    return events


def test_sdks_stream_through_the_proxy_and_its_figures_match_the_servers_counters(isolated_state: Path):
    port, server_port = free_port(), free_port()
    proxy = start_proxy(port, server_port)
    try:
        root = f"http://127.0.0.1:{server_port}"
        before = parse_server_counters(httpx2.get(root + "/metrics").text)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        messages = [{"role": "user", "content": REPEAT}]
        stream = client.chat.completions.create(
            model="tiny-ngram", messages=messages, stream=True, max_tokens=80, temperature=0, seed=1
        )
        first = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert first.strip()
        messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "Again, exactly."}]
        client.chat.completions.create(model="tiny-ngram", messages=messages, max_tokens=80, temperature=0)
        claude = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="x", max_retries=0)
        with claude.messages.stream(
            model="tiny-ngram", max_tokens=40, messages=[{"role": "user", "content": "Count to ten."}]
        ) as answer:
            assert "".join(answer.text_stream).strip()
        after = parse_server_counters(httpx2.get(root + "/metrics").text)

        # The same request, direct and through the proxy, streams the same events (ids and times apart).
        body = {"model": "tiny-ngram", "messages": [{"role": "user", "content": "Say yes."}], "stream": True,
                "max_tokens": 12, "temperature": 0, "seed": 3}  # fmt: skip
        direct = httpx2.post(root + "/v1/chat/completions", json=body, timeout=60).content
        through = httpx2.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60).content
        assert masked(through) == masked(direct) and masked(direct)
        # A body that is not JSON gets the server's own answer, byte for byte.
        bad = b'{"model": "tiny-ngram", "messages": ['
        assert (
            httpx2.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=bad).content
            == httpx2.post(root + "/v1/chat/completions", content=bad).content
        )
    finally:
        out = stop_proxy(proxy)
    records = {
        load_session(isolated_state, p.stem).started["task"]: p.stem
        for p in list_session_paths(isolated_state)
    }
    assert set(records) == {REPEAT, "Count to ten.", "Say yes."}
    assert records[REPEAT] in out  # the figures printed at exit name each session
    turns = [t for sid in records.values() for t in read_jsonl(isolated_state / "telemetry" / f"{sid}.jsonl")]
    first_three = [t for t in turns if t["session"] != records["Say yes."]]
    assert len(first_three) == 3
    drafted = sum((t["stats"]["draft_n"] or t["stats"]["metrics_draft_n"] or 0) for t in first_three)
    accepted = sum(
        (
            t["stats"]["draft_n_accepted"]
            if t["stats"]["draft_n"] is not None
            else t["stats"]["metrics_draft_accepted"]
        )
        or 0
        for t in first_three
    )
    assert drafted == after.get("drafted", 0) - before.get("drafted", 0)
    assert accepted == after.get("accepted", 0) - before.get("accepted", 0)
    repeat_turns = [t for t in turns if t["session"] == records[REPEAT]]
    assert repeat_turns[1]["stats"]["cache_reuse"] > 0.5  # the second turn reused the first one's prompt
    shown = subprocess.run(
        [sys.executable, "-m", "agent", "stats", records[REPEAT], "--json"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)


def test_a_client_that_hangs_up_frees_the_servers_slot(isolated_state: Path):
    port, server_port = free_port(), free_port()
    proxy = start_proxy(port, server_port)
    try:
        root = f"http://127.0.0.1:{server_port}"
        body = {"model": "tiny-ngram", "messages": [{"role": "user", "content": "Write a long story."}],
                "stream": True, "max_tokens": 4000, "ignore_eos": True}  # fmt: skip
        with httpx2.stream(
            "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60
        ) as reply:
            for chunk in reply.iter_raw():
                if b"content" in chunk:
                    break
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            slots = httpx2.get(root + "/slots").json()
            if not any(s.get("is_processing") for s in slots):
                break
            time.sleep(0.2)
        assert not any(s.get("is_processing") for s in slots), "the server kept generating for a gone client"
    finally:
        stop_proxy(proxy)
    [record] = [load_session(isolated_state, p.stem) for p in list_session_paths(isolated_state)]
    errors = [e["message"] for e in record.events if e["type"] == "error"]
    assert errors and re.search("client hung up", errors[0])
