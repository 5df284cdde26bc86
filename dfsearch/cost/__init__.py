"""DFModel's performance, cost and power model (MODEL.md Part II §2.3-§4)."""
