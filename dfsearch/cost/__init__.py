"""DFModel's performance, cost and power model (docs/model.md)."""
