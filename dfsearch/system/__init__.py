"""The fabric: everything the model knows about the network between chips, behind one object.

``fabric.Fabric`` is built once per network shape from the spec's system, the shape, the
parallelism placement and the spec's ``quirks`` (``Fabric.of(spec, shape, placement)``). It
answers ``collective_time_ns(op, bytes, group)`` for a group that is a kind of parallelism
(TP, PP, DP), one network dimension, or every chip of a copy; the per-dimension channel
times of an all-to-all over every chip; the ns-per-byte ratios and latencies the LLM and
expert paths read; and the links and switch ports that system cost and power count. Any
number of dimensions: nothing here is sized for three.

Modules (each imports only the data modules ``codes``, ``quirks``, and ``spec`` for
types, and the modules of this package):

* ``kinds``: the dimension kinds (ring, switch, fully connected, mesh) and their
  per-dimension formulas and counts;
* ``placement``: which of TP, PP and DP each dimension (or part of one) carries;
* ``ratios``: per-byte times composed from the kinds (groups, HBD, all-to-all factors);
* ``network_cost``: link and switch-port counts of the whole network;
* ``fabric``: the ``Fabric`` object, where DFModel's network quirks are applied;
* ``collectives``: what a workload declares (``CollectiveNeed``: operation, bytes, group,
  where it is charged) and the one function, ``price_needs``, that turns a workload's needs
  into the evaluator's per-kernel, per-edge and pipeline times.

Workloads never turn bytes into nanoseconds themselves: they declare collectives, the fabric
prices them. A refinement of collective pricing (a per-collective latency, bus efficiency,
per-collective overlap) goes into ``Fabric.collective_time_ns`` and ``price_needs``, once.
"""
