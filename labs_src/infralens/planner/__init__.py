"""The planner: the concept modules composed into one job's step time, memory and plan.

:mod:`~infralens.planner.step` prices a step, :mod:`~infralens.planner.fit` counts the
busiest GPU's bytes, :mod:`~infralens.planner.ranking` searches the plans,
:mod:`~infralens.planner.design` fills the worksheet and
:mod:`~infralens.planner.plan_file` reads a plan file. They compose the modules the labs
read (``infralens.*``); the command line (:mod:`infralens.cli`) sits on top.
"""
