"""The exceptions of the hutch SDK: one per way a request can fail."""


class HutchError(Exception):
    """A request failed. code and message are the server's, status the HTTP status."""

    def __init__(self, message, code=None, status=None):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


class AuthError(HutchError):
    """The key is missing, unknown or not allowed to do this (401, 403)."""


class PermissionDenied(HutchError):
    """The sandbox user may not do this to that file (403, code permission_denied)."""


class NotFound(HutchError):
    """No such sandbox (or it belongs to another tenant), template or key (404)."""


class InvalidArgument(HutchError):
    """The server refused the request as malformed (400)."""


class RateLimited(HutchError):
    """A quota or the server's capacity is used up (429, 503); retry_after in seconds."""

    def __init__(self, message, code=None, status=None, retry_after=None):
        super().__init__(message, code, status)
        self.retry_after = retry_after


class Timeout(HutchError):
    """The command ran past its time limit, or the server did not answer in time."""


class CommandExitError(HutchError):
    """A command run with check=True did not succeed; result holds what it did."""

    def __init__(self, result):
        super().__init__(f"command ended {result.status} (exit code {result.exit_code}): "
                         f"{result.stderr[-500:]}", code=result.status)
        self.result = result
