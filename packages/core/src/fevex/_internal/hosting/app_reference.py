"""``--app module:attribute``: the object it names, imported from the working directory, as
``fevex serve``, ``fevex worker`` and the other commands that run an app load it.

A reference that names nothing, or a module that fails while it is imported, is one
``FevexConfigurationError`` line that says where, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from fevex._ground.names import did_you_mean
from fevex.errors import FevexConfigurationError

__all__ = ["load_reference"]


def load_reference(reference: str, store: str | None) -> Any:
    """The object ``module:attribute`` names, imported from the working directory, with
    ``store`` (a store URL) set as ``FEVEX_RUN_STORE`` first, since an app reads its store
    from the environment when it is created."""
    if store:
        os.environ["FEVEX_RUN_STORE"] = store
    sys.path.insert(0, os.getcwd())

    module_name, _, attribute = reference.partition(":")
    target: Any = _import_app_module(module_name, reference)
    found = module_name
    for part in attribute.split("."):
        if not hasattr(target, part):
            known = [name for name in dir(target) if not name.startswith("_")]
            raise FevexConfigurationError(
                "APP_NOT_FOUND",
                f"--app {reference}: {found} has no attribute {part!r}.{did_you_mean(part, known)}",
                details={"app": reference},
            )
        target = getattr(target, part)
        found = f"{found}.{part}"
    return target


def _import_app_module(module_name: str, reference: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not (
            module_name == error.name or module_name.startswith(f"{error.name}.")
        ):
            raise _app_import_failed(reference, error) from error
        raise FevexConfigurationError(
            "APP_NOT_FOUND",
            f"--app {reference}: no module named {error.name!r} importable from "
            f"{os.getcwd()}; run fevex from the directory that holds it, or add that "
            "directory to PYTHONPATH.",
            details={"app": reference},
        ) from error
    except Exception as error:
        raise _app_import_failed(reference, error) from error


def _app_import_failed(reference: str, error: BaseException) -> FevexConfigurationError:
    """One line for an exception raised while the app's module ran: its type, message and
    the innermost line of the app's own code."""
    where = ""
    traceback = error.__traceback__
    while traceback is not None:
        filename = traceback.tb_frame.f_code.co_filename
        if not filename.startswith("<"):
            where = f" (at {filename}:{traceback.tb_lineno})"
        traceback = traceback.tb_next
    if isinstance(error, SyntaxError) and error.filename:
        where = f" (at {error.filename}:{error.lineno})"
    return FevexConfigurationError(
        "APP_IMPORT_FAILED",
        f"--app {reference}: importing it raised {type(error).__name__}: {error}{where}.",
        details={"app": reference},
    )
