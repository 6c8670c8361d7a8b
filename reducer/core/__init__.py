"""The generic core: engine, workspace, executors, cache, resume state, limits, the MLIR
helpers, and the oracle and strategy contracts. It knows nothing of IREE: it imports
neither `strategies` nor `reducer.iree` nor the layer on top (tests/test_layers.py)."""
