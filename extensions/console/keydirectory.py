"""The key directory of a signing cluster (Web Bot Auth), served by the console
at ``/.well-known/http-message-signatures-directory`` to anyone (a site
verifying the crawler's signatures fetches it), when ``BOT_AUTH_KEY`` is set."""

from __future__ import annotations

import json

from aiohttp import web

from extensions.botauth import DIRECTORY_PATH, DIRECTORY_TYPE


def serve_key_directory(app: web.Application, document: dict) -> None:
    """Serve ``document`` (``botauth.published_directory``)."""
    body = json.dumps(document).encode()

    async def keys(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=DIRECTORY_TYPE,
                            headers={"Cache-Control": "max-age=86400"})  # fmt: skip

    app.router.add_get(DIRECTORY_PATH, keys)
