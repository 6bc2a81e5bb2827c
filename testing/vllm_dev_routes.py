"""The routes vLLM 0.32 serves only with ``VLLM_SERVER_DEV_MODE=1``, for the fake replica: its
caches (``/reset_prefix_cache`` ...), ``/collective_rpc``, ``/server_info``, sleep mode
(``/sleep``, ``/wake_up``, ``/is_sleeping``, ``/release_kv_cache_memory``) and the RL routes
(``/pause``, ``/resume``, ``/is_paused``, ``/abort_requests``, the weight updates). Each answers
as vLLM's does; the prefix cache is emptied where vLLM's is (a reset, a sleep of level 1 or 2,
a pause that clears, a release of the KV cache memory); the rest changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .vllm_http import Refused, detail, fixed, json_object, route

__all__ = ["DevRoutes"]

_FIXED: dict[str, dict[str, Any] | None] = {
    "/reset_mm_cache": None,
    "/reset_encoder_cache": None,
    "/init_weight_transfer_engine": {"message": "Weight transfer initialized"},
    "/shutdown_weight_transfer_engine": {"message": "Weight transfer shut down"},
    "/start_weight_update": {"message": "Weight update started"},
    "/start_draft_weight_update": {"message": "Draft weight update started"},
    "/update_weights": {"message": "Weights updated"},
    "/finish_weight_update": {"message": "Weight update finished"},
    "/update_weight_version": {"success": True},
    "/weight_checker": {"status": "reset"},
}


class DevRoutes:
    """The development routes of one replica, whose prefix cache `clear_cache` empties;
    `server_info` is what ``/server_info`` reports as ``vllm_config``."""

    def __init__(self, clear_cache: Callable[[], None], server_info: dict[str, Any]) -> None:
        self.clear_cache = clear_cache
        self.server_info = server_info
        self.sleeping = False
        self.paused = False

    def routes(self) -> list[Route]:
        return [
            *(route(path, fixed(content), "POST") for path, content in _FIXED.items()),
            route("/weight_info", fixed({"weight_version": None}), "GET"),
            route("/get_world_size", fixed({"world_size": 1}), "GET"),
            route("/server_info", self._server_info, "GET"),
            route("/collective_rpc", self._collective_rpc, "POST"),
            route("/reset_prefix_cache", self._reset_prefix_cache, "POST"),
            route("/sleep", self._sleep, "POST"),
            route("/release_kv_cache_memory", self._release_kv_cache_memory, "POST"),
            route("/wake_up", self._wake_up, "POST"),
            route("/is_sleeping", self._is_sleeping, "GET"),
            route("/pause", self._pause, "POST"),
            route("/resume", self._resume, "POST"),
            route("/is_paused", self._is_paused, "GET"),
            route("/abort_requests", self._abort_requests, "POST"),
        ]

    async def _server_info(self, request: Request) -> Response:
        info = {"vllm_config": str(self.server_info), "vllm_env": {}, "system_env": {}}
        return JSONResponse(info)

    async def _collective_rpc(self, request: Request) -> Response:
        try:
            body = await json_object(request)
            if body.get("method") is None:
                raise detail(400, "Missing 'method' in request body")
        except Refused as refused:
            return refused.answer()
        return JSONResponse({"results": [None]})  # one worker, whose method returned None

    async def _reset_prefix_cache(self, request: Request) -> Response:
        self.clear_cache()
        return JSONResponse({"success": True})

    async def _sleep(self, request: Request) -> Response:
        level = int(request.query_params.get("level", "1"))
        if level >= 1:
            self.clear_cache()
        self.sleeping = True
        return JSONResponse({"status": "sleeping", "level": level})

    async def _release_kv_cache_memory(self, request: Request) -> Response:
        self.clear_cache()
        return JSONResponse({"status": "kv_cache_released"})

    async def _wake_up(self, request: Request) -> Response:
        self.sleeping = False
        tags = request.query_params.getlist("tags") or None
        return JSONResponse({"status": "awake", "tags": tags})

    async def _is_sleeping(self, request: Request) -> Response:
        # vLLM's engine counts a paused scheduler as sleeping
        return JSONResponse({"is_sleeping": self.sleeping or self.paused})

    async def _pause(self, request: Request) -> Response:
        clear = request.query_params.get("clear_cache", "true").lower() in ("true", "1")
        if clear and request.query_params.get("mode", "abort") != "keep":
            self.clear_cache()
        self.paused = True
        return JSONResponse({"status": "paused"})

    async def _resume(self, request: Request) -> Response:
        self.paused = False
        return JSONResponse({"status": "resumed"})

    async def _is_paused(self, request: Request) -> Response:
        return JSONResponse({"is_paused": self.paused})

    async def _abort_requests(self, request: Request) -> Response:
        try:
            body = await json_object(request)
        except Refused as refused:
            return refused.answer()
        ids = body.get("request_ids")
        return JSONResponse(
            {"status": "aborted", "aborted": len(ids) if isinstance(ids, list) else 0}
        )
