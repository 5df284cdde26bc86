"""Search over mappings: every candidate is scored by the evaluator in dfsearch.cost."""
