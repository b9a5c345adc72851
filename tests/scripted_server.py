"""A scripted OpenAI-compatible server that speaks llama-server's wire format, timings included.

It is a test double of the *model*, not of our code: the real openai client talks to it over HTTP.
Each chat request takes the next reply from a script. A reply is a dict:

    {"content": "text"}                                   streamed in small chunks
    {"tool_calls": [{"name": "bash", "arguments": {...}}]} arguments: a dict, or a raw (even broken) string
    {"status": 500, "error": {...}}                       an HTTP error with llama-server's error body
    {"raw_error": "text", "status": 502}                  a non-JSON error body
    {"die_after_chunks": 3}                               close the connection mid-stream
    {"overflow": True}                                    answer with the context-overflow error
    {"no_final_chunk": True}                              end the stream without usage, timings or [DONE]
    {"stray_events": ["42", "[1, 2]"]}                    data lines that are JSON but no chunk, sent first
    {"timings": {...}}                                    replace or extend the computed timings
    {"counters": {"draft_tokens": 40, "accepted": 30}}    drafting seen only on /metrics (like vLLM)
    {"delay": 0.5, "chunk_delay": 0.01}                   slow replies
    {"created": 1700000000}                               a fixed `created`, for byte-for-byte comparisons
    {"linger": 1.0}                                       hold the stream open after [DONE] before ending it
    {"chunks_per_s": 2000}                                chunks on a fixed schedule (a late one is sent
                                                          at once), so the rate holds where sleeps drift
    {"chunk_size": 80}                                    characters a content chunk (6 by default): several
                                                          lines at once, as a server sending many tokens a chunk

`POST /slots/N?action=save|restore` (llama-server's slot copy) answers as llama-server does and is kept
in `slot_actions` as (slot, action, filename).

The prompt cache is simulated the way llama-server does it: tokens (here ~4 characters) shared with the
previous request's prompt count as cache_n. A prompt larger than `n_ctx` gets the real overflow error.
Every request body is kept in `requests`, so tests can check exactly what the agent sent, and when each
chat request arrived and its answer ended in `timeline`.

Run as a script (`python -m tests.scripted_server --as-llama-server ...`) it also stands in for a
llama-server binary in lifecycle tests: `--help` prints a recorded help text, other flags are ignored.
With SCRIPTED_BAD_DRAFT set and a `--spec-draft-model`, it behaves as BeeLlama 0.1 does with a draft
that is not a DFlash model (FACTS.md): requests of more than 2 tokens get HTTP 500 "Invalid input
batch." (a 2-token one drafts nothing and passes); SCRIPTED_BAD_DRAFT=log also logs n_target_layers=0.
SCRIPTED_REQUEST_LOG names a file that gets each chat request's body as a JSON line (the `requests` of
a server in another process).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHARS_PER_TOKEN = 4


def _prompt_text(body: dict) -> str:
    return json.dumps(body.get("tools", []), sort_keys=True) + json.dumps(body.get("messages", []))


class ScriptedModel:
    def __init__(self, script: list[dict] | None = None, n_ctx: int = 32768, default: dict | None = None):
        self.script = list(script or [])
        self.default = default or {"content": "Done."}
        self.n_ctx = n_ctx
        self.requests: list[dict] = []
        # (arrived, answered) per chat request, monotonic seconds: the gap from one answer's end to the
        # next request is the agent's own time (examples/bench_acp.py --turns).
        self.timeline: list[tuple[float, float]] = []
        self.previous_prompt = ""
        self.lock = threading.Lock()
        self.draft = {"drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.bad_draft = False  # answer as BeeLlama 0.1 does with a draft that is not a DFlash model
        self.slot_actions: list[tuple[int, str, str]] = []

    def next_reply(self, body: dict) -> dict:
        with self.lock:
            self.requests.append(body)
            reply = self.script.pop(0) if self.script else self.default
        # A callable reply decides from the request (outside the lock: it may be slow or re-entrant).
        return reply(body) if callable(reply) else reply

    def timings(self, body: dict, predicted_n: int, extra: dict | None) -> dict:
        prompt = _prompt_text(body)
        with self.lock:
            common = 0
            for a, b in zip(prompt, self.previous_prompt, strict=False):
                if a != b:
                    break
                common += 1
            self.previous_prompt = prompt
        total = max(1, len(prompt) // CHARS_PER_TOKEN)
        cache_n = min(common // CHARS_PER_TOKEN, total - 1)
        prompt_n = total - cache_n
        timings = {
            "cache_n": cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_n * 2.0,
            "prompt_per_token_ms": 2.0,
            "prompt_per_second": 500.0,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_n * 10.0,
            "predicted_per_token_ms": 10.0,
            "predicted_per_second": 100.0,
        }
        timings.update(extra or {})
        return timings

    def count_drafts(self, timings: dict, counters: dict | None) -> None:
        if counters:  # a server that only reports drafting on /metrics (vLLM)
            self.draft["drafts"] += 1
            self.draft["draft_tokens"] += counters.get("draft_tokens", 0)
            self.draft["accepted"] += counters.get("accepted", 0)
        elif "draft_n" in timings:
            self.draft["drafts"] += 1
            self.draft["draft_tokens"] += timings["draft_n"]
            self.draft["accepted"] += timings.get("draft_n_accepted", 0)

    def prompt_tokens(self, body: dict) -> int:
        return max(1, len(_prompt_text(body)) // CHARS_PER_TOKEN)


def _chunks(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: an answer goes out as headers, then body, and on a kept-alive connection Nagle held
    # the body until the client's delayed ACK: 40-50 ms per GET /metrics (two per model request), which
    # examples/bench_acp.py counted as the agent's own time. llama-server answers one in under 1 ms.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        model = self.server.model
        if self.path == "/health":
            self._json(200, {"status": "ok"})
        elif self.path == "/props":
            self._json(
                200,
                {
                    "default_generation_settings": {"n_ctx": model.n_ctx},
                    "total_slots": 1,
                    "build_info": "scripted",
                },
            )
        elif self.path in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [{"id": "scripted-model", "object": "model"}]})
        elif self.path == "/metrics":
            d = model.draft
            text = (
                f"llamacpp:spec_decode_num_drafts_total {d['drafts']}\n"
                f"llamacpp:spec_decode_num_draft_tokens_total {d['draft_tokens']}\n"
                f"llamacpp:spec_decode_num_accepted_tokens_total {d['accepted']}\n"
            )
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

    def do_POST(self) -> None:
        arrived = time.monotonic()
        try:
            self._post()
        finally:
            if self.path.endswith("/chat/completions"):
                with self.server.model.lock:
                    self.server.model.timeline.append((arrived, time.monotonic()))

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as exc:  # llama-server's answer to a body that is not JSON
            self._json(
                400,
                {"error": {"code": 400, "message": f"parse error: {exc}", "type": "invalid_request_error"}},
            )
            return
        if self.path.startswith("/slots/"):
            self._slot_action(body)
            return
        if not self.path.endswith("/chat/completions"):
            self._json(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
            return
        model = self.server.model
        if model.bad_draft and (body.get("max_tokens") or 4096) > 2:
            self._json(
                500, {"error": {"code": 500, "message": "Invalid input batch.", "type": "server_error"}}
            )
            return
        reply = model.next_reply(body)
        time.sleep(reply.get("delay", 0))
        n_prompt = model.prompt_tokens(body)
        if n_prompt > model.n_ctx or reply.get("overflow"):
            self._json(
                400,
                {
                    "error": {
                        "code": 400,
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": n_prompt,
                        "n_ctx": model.n_ctx,
                        "message": f"request ({n_prompt} tokens) exceeds the available context size ({model.n_ctx} tokens), try increasing it",
                    }
                },
            )
            return
        if "raw_error" in reply:
            data = reply["raw_error"].encode()
            self.send_response(reply.get("status", 502))
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if "status" in reply:
            self._json(
                reply["status"], {"error": reply.get("error", {"code": reply["status"], "message": "error"})}
            )
            return
        if body.get("stream"):
            self._stream(body, reply)
        else:
            self._complete(body, reply)

    def _slot_action(self, body: dict) -> None:
        path, _, query = self.path.partition("?")
        action = dict(part.partition("=")[::2] for part in query.split("&") if part).get("action", "")
        slot = int(path.removeprefix("/slots/"))
        with self.server.model.lock:
            self.server.model.slot_actions.append((slot, action, body.get("filename", "")))
        self._json(200, {"id_slot": slot, "filename": body.get("filename", "")})

    def _tool_calls(self, reply: dict) -> list[dict]:
        calls = []
        for i, call in enumerate(reply.get("tool_calls", [])):
            args = call.get("arguments", {})
            calls.append(
                {
                    "index": i,
                    "id": call.get("id", f"call_{uuid.uuid4().hex[:8]}"),
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        return calls

    def _usage_and_timings(self, body: dict, reply: dict, text: str, calls: list[dict]) -> tuple[dict, dict]:
        model = self.server.model
        predicted = max(
            1, (len(text) + sum(len(c["function"]["arguments"]) for c in calls)) // CHARS_PER_TOKEN
        )
        timings = model.timings(body, predicted, reply.get("timings"))
        model.count_drafts(timings, reply.get("counters"))
        usage = {
            "prompt_tokens": timings["cache_n"] + timings["prompt_n"],
            "completion_tokens": predicted,
            "total_tokens": timings["cache_n"] + timings["prompt_n"] + predicted,
            "prompt_tokens_details": {"cached_tokens": timings["cache_n"]},
        }
        return usage, timings

    def _finish_reason(self, reply: dict, calls: list[dict]) -> str:
        return reply.get("finish_reason") or ("tool_calls" if calls else "stop")

    def _complete(self, body: dict, reply: dict) -> None:
        text = reply.get("content", "")
        calls = self._tool_calls(reply)
        usage, timings = self._usage_and_timings(body, reply, text, calls)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
        self._json(
            200,
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": reply.get("created", int(time.time())),
                "model": "scripted-model",
                "choices": [
                    {"index": 0, "message": message, "finish_reason": self._finish_reason(reply, calls)}
                ],
                "usage": usage,
                "timings": timings,
            },
        )

    def _stream(self, body: dict, reply: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")  # as llama-server streams
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        created = reply.get("created", int(time.time()))
        sent = 0
        period = 1 / reply["chunks_per_s"] if reply.get("chunks_per_s") else 0.0
        began = time.perf_counter()

        def send(payload: dict | str) -> bool:
            nonlocal sent
            if "die_after_chunks" in reply and sent >= reply["die_after_chunks"]:
                self.close_connection = True
                self.connection.shutdown(2)
                return False
            data = payload if isinstance(payload, str) else json.dumps(payload)
            event = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
            sent += 1
            if period:
                time.sleep(max(0.0, began + sent * period - time.perf_counter()))
            else:
                time.sleep(reply.get("chunk_delay", 0))
            return True

        def chunk(delta: dict, finish: str | None = None, **extra: Any) -> dict:
            return {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": created,
                "model": "scripted-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }

        text = reply.get("content", "")
        calls = self._tool_calls(reply)
        if not send(chunk({"role": "assistant", "content": None})):
            return
        for stray in reply.get("stray_events", ()):
            if not send(stray):
                return
        for piece in _chunks(reply.get("reasoning", "")):
            if not send(chunk({"reasoning_content": piece})):
                return
        for piece in _chunks(text, reply.get("chunk_size", 6)):
            if not send(chunk({"content": piece})):
                return
        for call in calls:
            head = {
                "index": call["index"],
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            if not send(chunk({"tool_calls": [head]})):
                return
            for piece in _chunks(call["function"]["arguments"], 10):
                if not send(
                    chunk({"tool_calls": [{"index": call["index"], "function": {"arguments": piece}}]})
                ):
                    return
        if reply.get("no_final_chunk"):
            self.wfile.write(b"0\r\n\r\n")  # a clean end of the body, without finish, usage or [DONE]
            return
        usage, timings = self._usage_and_timings(body, reply, text, calls)
        include_usage = (body.get("stream_options") or {}).get("include_usage")
        finish = chunk({}, self._finish_reason(reply, calls))
        if not include_usage:
            finish["timings"] = timings
        if not send(finish):
            return
        if include_usage:
            send(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": "scripted-model",
                    "choices": [],
                    "usage": usage,
                    "timings": timings,
                }
            )
        if send("[DONE]"):
            time.sleep(reply.get("linger", 0))
            self.wfile.write(b"0\r\n\r\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ScriptedModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-stream (a cancelled request) is expected, not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedServer:
    """`with ScriptedServer([...]) as server:` serves on 127.0.0.1 at `server.url` in a thread."""

    def __init__(
        self, script: list[dict] | None = None, n_ctx: int = 32768, default: dict | None = None, port: int = 0
    ) -> None:
        self.model = ScriptedModel(script, n_ctx, default)
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.model = self.model
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def requests(self) -> list[dict]:
        return self.model.requests

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def llama_server_stand_in(path: Path) -> Path:
    """An executable at `path`, where a profile's llama-server binary would be, that runs this module
    as one (`--as-llama-server`): lifecycle, TUI and fault tests start it as the real thing."""
    repo = Path(__file__).resolve().parents[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!/bin/sh\ncd '{repo}'\nexec '{sys.executable}' -m tests.scripted_server --as-llama-server \"$@\"\n"
    )
    path.chmod(0o755)
    return path


def _as_llama_server(argv: list[str]) -> int:
    """Stand in for a llama-server binary: --help prints $SCRIPTED_HELP; otherwise serve on --port."""
    if "--help" in argv:
        with open(os.environ["SCRIPTED_HELP"], encoding="utf-8") as f:
            sys.stdout.write(f.read())
        return 0
    if "--list-devices" in argv:  # the preflight asks where the model would go (on a GPU machine)
        print("Available devices:\n  (none)")
        return 0
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8080
    script = json.loads(os.environ.get("SCRIPTED_REPLIES", "[]"))
    default = json.loads(os.environ["SCRIPTED_DEFAULT"]) if os.environ.get("SCRIPTED_DEFAULT") else None
    bad_draft = bool(os.environ.get("SCRIPTED_BAD_DRAFT")) and "--spec-draft-model" in argv
    if bad_draft and os.environ["SCRIPTED_BAD_DRAFT"] == "log":
        print("dflash: block_size=16, mask_token=0, n_target_layers=0", file=sys.stderr, flush=True)
    print(f"scripted llama-server: listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    server = ScriptedServer(script, default=default, port=port)
    server.model.bad_draft = bad_draft
    if log := os.environ.get("SCRIPTED_REQUEST_LOG"):
        take = server.model.next_reply

        def logged(body: dict) -> dict:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(body) + "\n")
            return take(body)

        server.model.next_reply = logged  # type: ignore[method-assign]
    server.httpd.serve_forever()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--as-llama-server":
        raise SystemExit(_as_llama_server(args[1:]))
    raise SystemExit("usage: python -m tests.scripted_server --as-llama-server [llama-server flags]")
