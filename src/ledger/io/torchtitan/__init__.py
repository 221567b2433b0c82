"""A torchtitan job TOML, read at the commit whose JobConfig knows its keys.

``reader`` turns the file into a ``Launch``, at the commit ``commits`` finds; ``flavours``
holds torchtitan's own model flavours and JobConfig defaults at v0.1.0 and 238fa99
(``data/torchtitan_<commit>.json``).
"""
