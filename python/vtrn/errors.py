"""Errors of the vtrn Python package, with the same codes and names as the
vtrn CLI's exit codes (host-tools/README.md), so a script can branch on
`err.code` exactly as a shell script branches on `$?`.

vtrnd answers every request with a vtrn.api.Status; status_error() maps a
non-OK one to the exception the CLI would turn into its exit code. Failures
of the transport itself (no daemon, a timeout, a closed connection) get the
codes the CLI gives them.
"""

OK, FAILED, USAGE, NOT_RUNNING, UNKNOWN_CHIP, CHIP_NOT_READY, TIMEOUT, UNTRUSTED = range(8)

NAMES = {
    OK: "ok",
    FAILED: "failed",
    USAGE: "usage",
    NOT_RUNNING: "not-running",
    UNKNOWN_CHIP: "unknown-chip",
    CHIP_NOT_READY: "chip-not-ready",
    TIMEOUT: "timeout",
    UNTRUSTED: "untrusted",
}


class VtrnError(Exception):
    """A failed vtrn operation. `code` is the CLI exit code for the same
    condition, `name` its name, `status` the vtrn.api.Status number vtrnd
    answered (None when the failure was the transport's)."""

    code = FAILED

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        self.status = status

    @property
    def name(self):
        return NAMES[self.code]


class Failed(VtrnError):
    code = FAILED


class UsageError(VtrnError, ValueError):
    """A bad argument, refused before anything was sent."""
    code = USAGE


class NotRunning(VtrnError):
    """vtrnd is not running, or is shutting down."""
    code = NOT_RUNNING


class UnknownChip(VtrnError):
    code = UNKNOWN_CHIP


class ChipNotReady(VtrnError):
    code = CHIP_NOT_READY


class Timeout(VtrnError):
    code = TIMEOUT


class Untrusted(VtrnError):
    """The runtime directory, or the process behind its socket, is not one
    to trust (another user's, or writable by others); nothing was sent."""
    code = UNTRUSTED


def status_error(api, status, message):
    """The exception for a non-OK vtrn.api.Status (the CLI's
    exit_for_status: a bad request is a failure of the operation, because
    the package validates what the caller controls)."""
    by_status = {
        api.STATUS_UNKNOWN_CHIP: UnknownChip,
        api.STATUS_CHIP_NOT_READY: ChipNotReady,
        api.STATUS_TIMEOUT: Timeout,
        api.STATUS_SHUTTING_DOWN: NotRunning,
    }
    cls = by_status.get(status, Failed)
    text = message or f"vtrnd refused the request (status {status})"
    return cls(text, status=status)
