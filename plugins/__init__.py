"""The built-in privclust plugins.

Each module here is a plugin declared under the ``privclust`` entry-point
group in privclust's own ``pyproject.toml``, exactly as a third party's would
be, and imports only the public :mod:`privclust` API. Block any of them with
``PRIVCLUST_DISABLE_PLUGINS=<entry-point name>``.
"""
