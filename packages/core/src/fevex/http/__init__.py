"""The run protocol over HTTP: an ASGI server (``create_http_app``) and its clients.

Needs the extra: ``pip install "fevex[http]"`` (Starlette, uvicorn, httpx2).
"""

from fevex.http.application import FevexHttpApp, create_http_app
from fevex.http.authentication import Authenticate
from fevex.http.client import AsyncFevexClient, FevexClient
from fevex.http.client_calls import RunPage
from fevex.http.errors import ERROR_STATUS, FevexHttpError, Forbidden

__all__ = [
    "ERROR_STATUS",
    "AsyncFevexClient",
    "Authenticate",
    "FevexClient",
    "FevexHttpApp",
    "FevexHttpError",
    "Forbidden",
    "RunPage",
    "create_http_app",
]
