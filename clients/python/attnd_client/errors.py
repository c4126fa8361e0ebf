"""errors.py - attnd's error answers as one exception class."""

import json


class AttndError(Exception):
    """An error answer of attnd (any status other than 2xx).

    Attributes:
        status: the HTTP status (400, 404, 413, 503, ...).
        code: attnd's snake_case code (``invalid_field``, ``unknown_model``, ``queue_full``,
            ...), from API v1's ``{"error": {"code", "message", "field"}}``; None under /v2,
            whose errors (``{"error": "message"}``) carry no code, and for a body that is not
            attnd's JSON (an HTML answer of the HTTP library, a proxy's page).
        message: the sentence attnd wrote (or the start of a body that is not JSON).
        field: the JSON path of the field at fault (``query``, ``params.num_heads``,
            ``query[2][0]``), or None.
        retry_after: the seconds a 503's ``Retry-After`` asked to wait, or None.
    """

    def __init__(self, status, code, message, field=None, retry_after=None):
        super().__init__(status, code, message, field)
        self.status, self.code, self.message = status, code, message
        self.field, self.retry_after = field, retry_after

    def __str__(self):
        where = f" (field {self.field})" if self.field else ""
        code = f" {self.code}" if self.code else ""
        return f"{self.status}{code}: {self.message}{where}"

    @classmethod
    def from_body(cls, status, body, retry_after=None):
        """The error an answer's body describes: v1's object, v2's string, or other bytes."""
        try:
            err = json.loads(body.decode("utf-8")).get("error")
        except (ValueError, AttributeError, UnicodeDecodeError):
            err = None
        if isinstance(err, dict):
            return cls(status, err.get("code"), err.get("message", ""), err.get("field"),
                       retry_after)
        if isinstance(err, str):
            return cls(status, None, err, None, retry_after)
        text = body.decode("utf-8", "replace").strip()
        return cls(status, None, text[:300] or f"HTTP {status}", None, retry_after)
