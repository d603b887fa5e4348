"""Names a package exports but imports when first read (PEP 562).

``import fevex`` stays as light as an agent app's first run needs: the names of workflows and
teams are in ``fevex.__all__`` and in ``dir(fevex)``, and their modules load the first time
one of them is read (``fevex.define_workflow``, ``from fevex import TeamDefinition``). A
package imports the same names under ``if TYPE_CHECKING:`` so that type checkers and IDEs
see them as plain imports, and installs this module's hooks only at run time.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, which exports the names
    ``modules`` lists under the module each comes from. A name read once is then an
    ordinary attribute of the package (the hook is not called for it again); any other
    name raises ``AttributeError`` as a missing attribute does."""
    namespace = sys.modules[package].__dict__
    source = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = source.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *source})

    return __getattr__, __dir__
