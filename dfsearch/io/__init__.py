"""Readers and writers of input formats (dfsearch TOML, DFModel protobuf text)."""
