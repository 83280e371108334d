"""The base of every error the user can fix: the CLI and the server render each as its one-line message."""

from __future__ import annotations


class UserError(Exception):
    """Bad input, a setting, a store, a plan or a model the user can fix; the message says how."""


# Every exception whose message is enough for the user: printed as one line, never as a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError, NotADirectoryError, PermissionError)
