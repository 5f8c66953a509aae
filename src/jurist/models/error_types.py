"""The ``error.type`` names the providers' HTTP APIs put in their error bodies, by status.

Stdlib only: the gate proxy answers with these, and the scripted provider
server (which must start fast and light) sends them.
"""

from __future__ import annotations

OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
