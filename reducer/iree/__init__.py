"""The IREE room: the built-in oracles that run IREE's tools, failure signatures, and the
workflows around a reduction (phases, dispatch isolation, flag reduction, upstream
clean-up, the report). It builds on the core and never imports the layer on top."""
