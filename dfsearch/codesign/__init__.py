"""Hardware co-design: chip and system parameters as variables of a search whose every trial
runs the exact mapping search (``dfsearch codesign STUDY -o DIR``; docs/codesign.md).

``technology``: the cited technology catalogue; ``chip``: the chip's area, yield, cost and
power model; ``study``: the study file; ``runner``: the trials; ``output``: what is written."""
