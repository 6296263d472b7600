"""An OpenAI-compatible endpoint's Files and Batches API: the way big jobs buy chat completions.

A batch is a JSON Lines file of requests (`custom_id`, `method`, `url`, `body`) uploaded with purpose
`batch`, a batch created over it with a 24 h completion window, polled until it ends, and its
output and error files read back. Every call goes through the Endpoint and the RetryPolicy that
online summaries use (http.py): one place for headers, timeouts and retries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp

from ..core import json_codec
from .http import APIError, Endpoint, Response, RetryPolicy, retried

CHAT_URL = "/v1/chat/completions"
WINDOW = "24h"
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
LISTED = 100  # batches asked for at once when looking for one created before a kill


def request_line(custom_id: str, body: dict[str, Any]) -> bytes:
    """One line of a batch input file (OpenAI's format, which vLLM's run_batch reads too)."""
    line = {"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body}
    return json_codec.line(line)


@dataclass(frozen=True)
class BatchStatus:
    """What a poll says of a batch."""

    id: str
    status: str
    completed: int = 0
    failed: int = 0
    total: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @classmethod
    def of(cls, data: Any) -> "BatchStatus":
        if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("status"), str):
            raise APIError(f"the batch endpoint answered something that is not a batch: {str(data)[:200]}")
        counts = data.get("request_counts") or {}
        return cls(data["id"], data["status"], int(counts.get("completed") or 0), int(counts.get("failed") or 0),
                   int(counts.get("total") or 0), data.get("output_file_id"), data.get("error_file_id"))


class BatchAPI:
    """Upload, create, find, poll and read batches at one endpoint; opened only when a run has batches."""

    def __init__(self, base_url: str, api_key_env: str, timeout: float, policy: RetryPolicy):
        self.endpoint = Endpoint(base_url, api_key_env, timeout, concurrency=4)
        self.policy = policy

    async def open(self) -> None:
        await self.endpoint.open()

    async def close(self) -> None:
        await self.endpoint.close()

    async def upload(self, content: bytes, name: str) -> str:
        """The id of a batch input file uploaded with `content`."""
        def form() -> aiohttp.FormData:  # a fresh form each try: a sent one is consumed
            data = aiohttp.FormData()
            data.add_field("purpose", "batch")
            data.add_field("file", content, filename=name, content_type="application/jsonl")
            return data

        answer = await self._call("uploading a batch file", "POST", "/files", form=form)
        file_id = answer.data.get("id") if isinstance(answer.data, dict) else None
        if not isinstance(file_id, str):
            raise APIError(f"the files endpoint answered no file id: {str(answer.data)[:200]}")
        return file_id

    async def create(self, file_id: str) -> BatchStatus:
        body = {"input_file_id": file_id, "endpoint": CHAT_URL, "completion_window": WINDOW}
        return BatchStatus.of((await self._call("creating a batch", "POST", "/batches", body)).data)

    async def find(self, file_id: str) -> BatchStatus | None:
        """The batch created over `file_id`, if any (one created just before a kill was not recorded)."""
        answer = await self._call("listing batches", "GET", f"/batches?limit={LISTED}")
        listed = answer.data.get("data") if isinstance(answer.data, dict) else None
        for item in listed or []:
            if isinstance(item, dict) and item.get("input_file_id") == file_id:
                return BatchStatus.of(item)
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        return BatchStatus.of((await self._call("polling a batch", "GET", f"/batches/{batch_id}")).data)

    async def content(self, file_id: str) -> str:
        """A file's content (a batch's output or error file, JSON Lines)."""
        return (await self._call("reading a batch's results", "GET", f"/files/{file_id}/content", raw=True)).data

    async def _call(self, what: str, method: str, path: str, body: Any = None, form=None, raw: bool = False) -> Response:
        async def attempt():
            return await self.endpoint.call(method, path, body, form() if form else None, raw)

        return await retried(self.policy, attempt, f"{what} at {self.endpoint.base_url}")
