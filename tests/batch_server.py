"""The test server's Files and Batches endpoints (OpenAI's shapes), answered by its own chat pipeline.

``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``GET /v1/batches``. A batch's lines are answered as the chat endpoint
answers them (the same faults, countdowns and content settings apply), non-200 answers go to the
error file. Settings (Faults fields): ``batch_hold`` keeps every batch ``in_progress`` until it is
cleared; ``batch_expire_first_n`` makes the next N batches expire after answering half their lines;
``batch_error_ids`` answers the lines with these custom ids by an ``error`` object instead.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiohttp import web


class BatchEndpoints:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task] = set()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list)
        app.router.add_get("/v1/batches/{id}", self._get)

    async def _upload(self, request: web.Request) -> web.Response:
        error = self.server._auth_error(request)
        if error:
            return error
        form = await request.post()
        if form.get("purpose") != "batch" or not hasattr(form.get("file"), "file"):
            return web.json_response({"error": {"message": "purpose batch and a file are required"}}, status=400)
        file_id = "file-" + uuid.uuid4().hex[:24]
        self.files[file_id] = form["file"].file.read()
        self.server.stats.files_uploaded += 1
        return web.json_response({"id": file_id, "object": "file", "purpose": "batch", "bytes": len(self.files[file_id])})

    async def _content(self, request: web.Request) -> web.Response:
        content = self.files.get(request.match_info["id"])
        if content is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.Response(body=content, content_type="application/jsonl")

    async def _create(self, request: web.Request) -> web.Response:
        error = self.server._auth_error(request)
        if error:
            return error
        body = await request.json()
        content = self.files.get(body.get("input_file_id"))
        if content is None or body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return web.json_response({"error": {"message": "bad batch request"}}, status=400)
        lines = [json.loads(line) for line in content.decode("utf-8").splitlines() if line.strip()]
        batch = {"id": "batch_" + uuid.uuid4().hex[:24], "object": "batch", "status": "validating",
                 "input_file_id": body["input_file_id"], "endpoint": body["endpoint"], "created_at": int(time.time()),
                 "output_file_id": None, "error_file_id": None,
                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
        self.batches[batch["id"]] = batch
        self.server.stats.batch_custom_ids.append([line["custom_id"] for line in lines])
        task = asyncio.create_task(self._run(batch, lines))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response(batch)

    async def _get(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        self.server.stats.batch_polls += 1
        return web.json_response(batch)

    async def _list(self, request: web.Request) -> web.Response:
        newest = sorted(self.batches.values(), key=lambda b: b["created_at"], reverse=True)
        return web.json_response({"object": "list", "data": newest[: int(request.query.get("limit", 20))]})

    async def _run(self, batch: dict[str, Any], lines: list[dict[str, Any]]) -> None:
        faults = self.server.faults
        batch["status"] = "in_progress"
        while faults.batch_hold and not self.server._stopping.is_set():
            await asyncio.sleep(0.02)
        expire = self.server._remaining.get("batch_expire", 0) > 0
        if expire:
            self.server._remaining["batch_expire"] -= 1
            lines = lines[: len(lines) // 2]
        output, errors = [], []
        for line in lines:
            answered = await self._answer(line)
            (output if answered["response"] and answered["response"]["status_code"] == 200 else errors).append(answered)
        counts = batch["request_counts"]
        counts["completed"], counts["failed"] = len(output), len(errors)
        batch["output_file_id"] = self._file(output)
        batch["error_file_id"] = self._file(errors)
        batch["status"] = "expired" if expire else "completed"

    async def _answer(self, line: dict[str, Any]) -> dict[str, Any]:
        """One batch line answered by the chat pipeline (its faults included), as a result line."""
        result = {"id": "batch_req_" + uuid.uuid4().hex[:24], "custom_id": line["custom_id"], "response": None, "error": None}
        if line["custom_id"] in (self.server.faults.batch_error_ids or ()):
            result["error"] = {"code": "server_error", "message": "Injected batch fault"}
            return result
        fault = self.server._pick_fault()
        response = await self.server._answer(line["body"], fault)
        if response is None:  # a dropped connection, in a batch: the request failed
            result["error"] = {"code": "connection_dropped", "message": "Injected dropped request"}
            return result
        try:
            body: Any = json.loads(response.text)
        except ValueError:  # a malformed answer stays as the server sent it
            body = response.text
        result["response"] = {"status_code": response.status, "request_id": uuid.uuid4().hex, "body": body}
        return result

    def _file(self, results: list[dict[str, Any]]) -> str | None:
        if not results:
            return None
        file_id = "file-" + uuid.uuid4().hex[:24]
        self.files[file_id] = "".join(json.dumps(r) + "\n" for r in results).encode("utf-8")
        return file_id

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
