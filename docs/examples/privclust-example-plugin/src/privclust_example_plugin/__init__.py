"""privclust-example-plugin: an example third-party privclust plugin.

This module is the plugin: the entry point ``example-plugin`` in the
``privclust`` group (see ``pyproject.toml``) names it, and privclust's
registry loads it and calls the hook implementations below, which register
the component classes of :mod:`privclust_example_plugin.components`.
"""

from __future__ import annotations

import privclust

from .components import Rounding, TopBottomCoding, Uniqueness

__version__ = "1.0.0"
__all__ = ["Rounding", "TopBottomCoding", "Uniqueness", "__version__"]


# --8<-- [start:hooks]
@privclust.hookimpl
def privclust_register_maskers(register):
    register(Rounding)
    register(TopBottomCoding)


@privclust.hookimpl
def privclust_register_evaluators(register):
    register(Uniqueness)
# --8<-- [end:hooks]
