"""The GLM layer both the models and the sampling back-ends build on.

* :mod:`privbayes.glm.family`: a GLM family — the per-record loss, its derivatives and the
  public constants its certificates need (:class:`~privbayes.glm.family.GLMFamily`);
* :mod:`privbayes.glm.passes`: the data side — validated rows in memory or in a Dask engine,
  and the reductions (passes) a back-end reads them through.

It imports nothing from :mod:`privbayes.models` or :mod:`privbayes.sampling` (both import
it), so the layering models → sampling → glm has no circle (tests/test_imports.py).
"""
