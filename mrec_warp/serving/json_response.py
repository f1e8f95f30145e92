"""``serve``'s JSON answers: Starlette's :class:`~starlette.responses.JSONResponse`, with a
number that is not finite written ``null`` (:mod:`mrec_warp.strict_json`) rather than the
whole answer failing as an internal error. Every other byte is Starlette's."""
from __future__ import annotations

from typing import Any

from starlette import responses

from .. import strict_json


class JSONResponse(responses.JSONResponse):
    """An answer as strict JSON (RFC 8259): compact, UTF-8, a NaN or infinite score ``null``."""

    def render(self, content: Any) -> bytes:
        return strict_json.dumps(content, ensure_ascii=False, indent=None, separators=(",", ":")).encode("utf-8")


__all__ = ["JSONResponse"]
