"""IR helpers the op-level strategies share, one concern a module:

* `paths`: op paths, walks, and the per-program path table (`Paths`, `op_at`);
* `symbols`: the one symbol analysis (`Symbols`: symbols, functions, calls, users), memoised
  on the program;
* `rewriter`: erasing ops while giving each use of their results something else;
* `signatures`: changing a function's signature and every call of it.
"""
