"""The Python SDK of hutch: sandboxes for AI agents on your own machine.

    from hutch import Sandbox
    with Sandbox.create() as sbx:
        print(sbx.commands.run("python3 -c 'print(6 * 7)'").stdout)
        print(sbx.run_code("x = 6\nx * 7").text)

It speaks hutch serve's native API (docs/openapi.yaml) with the standard
library only. HUTCH_API_URL (default http://127.0.0.1:7420) and
HUTCH_API_KEY say where and as whom.
"""
from .errors import (AuthError, CommandExitError, HutchError, InvalidArgument, NotFound,
                     PermissionDenied, RateLimited, Timeout)
from .code import Context, Execution, ExecutionError, Result
from .sandbox import CommandHandle, CommandResult, Sandbox

__all__ = ["Sandbox", "CommandResult", "CommandHandle", "HutchError", "AuthError", "NotFound",
           "InvalidArgument", "PermissionDenied", "RateLimited", "Timeout",
           "CommandExitError", "Execution", "ExecutionError", "Result", "Context"]
