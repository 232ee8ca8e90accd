"""Document kinds and formats; importing the package registers every one of them.

Each module registers its formats, kinds and directory kinds when imported, so a new kind is a new module here
and nothing else.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
