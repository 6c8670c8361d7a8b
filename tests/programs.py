"""Generators for realistic test inputs (kept in code: nothing large is committed)."""

from __future__ import annotations

import random

COMPILE = (
    "iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu "
    "--iree-llvmcpu-target-cpu=generic"
)
#: What the pinned iree-compile 3.13.0 says when f6E2M3FN arithmetic reaches the CPU backend.
F6_ERROR = "failed to legalize operation 'arith.truncf'"

#: A call chain main -> mid -> leaf with a global, and a function nobody calls: what the
#: symbol analyses and split-functions are tested on.
CALL_CHAIN = """
util.global private @g = dense<1.0> : tensor<4xf32>
func.func private @leaf(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = math.exp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @mid(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @leaf(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %w = util.global.load @g : tensor<4xf32>
  %1 = arith.addf %0, %w : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @mid(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = arith.negf %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func @unrelated(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
"""


def _weights(rng: random.Random, rows: int, cols: int) -> str:
    vals = ", ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(rows * cols))
    return f"dense<[{vals}]> : tensor<{rows * cols}xf32>"  # reshaped below: keeps literals 1-D


def mlp(layers: int = 24, width: int = 16, batch: int = 4, bad_layer: int | None = 17, seed: int = 0) -> str:
    """A multi-layer MLP split into one function per layer, called from @main.

    Each layer: matmul with an inline weight literal, bias, ReLU, a softmax-like
    normalisation. With bad_layer set, that layer also rounds through f6E2M3FN, which
    the CPU backend cannot legalize.
    """
    rng = random.Random(seed)
    t = f"tensor<{batch}x{width}xf32>"
    out = []
    for i in range(layers):
        out.append(f"func.func private @layer{i}(%x: {t}) -> {t} {{")
        out.append(f"  %wflat = arith.constant {_weights(rng, width, width)}")
        out.append(
            f"  %w = tensor.expand_shape %wflat [[0, 1]] output_shape [{width}, {width}] : tensor<{width * width}xf32> into tensor<{width}x{width}xf32>"
        )
        out.append(f"  %b = arith.constant dense<{rng.uniform(-0.1, 0.1):.3f}> : {t}")
        out.append("  %zero = arith.constant 0.0 : f32")
        out.append(f"  %empty = tensor.empty() : {t}")
        out.append(f"  %acc = linalg.fill ins(%zero : f32) outs(%empty : {t}) -> {t}")
        out.append(f"  %mm = linalg.matmul ins(%x, %w : {t}, tensor<{width}x{width}xf32>) outs(%acc : {t}) -> {t}")
        out.append(f"  %h = arith.addf %mm, %b : {t}")
        out.append(f"  %zeros = arith.constant dense<0.0> : {t}")
        out.append(f"  %r = arith.maximumf %h, %zeros : {t}")
        out.append(f"  %e = math.exp %r : {t}")
        out.append(f"  %one = arith.constant dense<1.0> : {t}")
        out.append(f"  %d = arith.addf %e, %one : {t}")
        out.append(f"  %n = arith.divf %e, %d : {t}")
        last = "%n"
        if i == bad_layer:
            q = f"tensor<{batch}x{width}xf6E2M3FN>"
            out.append(f"  %q = arith.truncf %n : {t} to {q}")
            out.append(f"  %qq = arith.mulf %q, %q : {q}")
            out.append(f"  %back = arith.extf %qq : {q} to {t}")
            out.append(f"  %mix = arith.addf %n, %back : {t}")
            last = "%mix"
        out.append(f"  %y = arith.addf {last}, %x : {t}")
        out.append(f"  return %y : {t}")
        out.append("}")
    out.append(f"func.func @main(%input: {t}) -> {t} {{")
    prev = "%input"
    for i in range(layers):
        out.append(f"  %l{i} = call @layer{i}({prev}) : ({t}) -> {t}")
        prev = f"%l{i}"
    out.append(f"  return {prev} : {t}")
    out.append("}")
    return "\n".join(out) + "\n"


def chain(n: int = 200, binary: bool = False, keep: int = 137) -> str:
    """The research notes' micro-case: n elementwise ops where only one math.exp matters."""
    lines = ["func.func @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> tensor<8xf32> {"]
    prev = "%arg0"
    for i in range(n):
        op = "math.exp " + prev if i == keep else (f"arith.addf {prev}, %arg1" if binary else f"arith.negf {prev}")
        lines.append(f"  %v{i} = {op} : tensor<8xf32>")
        prev = f"%v{i}"
    lines.append(f"  return {prev} : tensor<8xf32>")
    lines.append("}")
    return "\n".join(lines) + "\n"


def toolbox(n: int = 16, seed: int = 1) -> str:
    """Issue 4's bar module: scf.if, scf.for with iter_args, a linalg.generic, three
    functions calling each other, two globals and big dense constants; the bug (an
    f6E2M3FN round trip the CPU backend cannot legalize) sits in the loop of the
    innermost callee."""
    rng = random.Random(seed)
    t = f"tensor<{n}xf32>"
    q = f"tensor<{n}xf6E2M3FN>"
    vec = ", ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(n))
    mat = ", ".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(n * n))
    return f"""#map = affine_map<(d0) -> (d0)>
util.global private @scale = dense<0.5> : {t}
util.global private mutable @state = dense<0.0> : {t}
func.func private @leaf(%x: {t}, %steps: index) -> {t} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w = arith.constant dense<[{vec}]> : {t}
  %r = scf.for %i = %c0 to %steps step %c1 iter_args(%acc = %x) -> ({t}) {{
    %first = arith.cmpi eq, %i, %c0 : index
    %t = scf.if %first -> ({t}) {{
      %a = arith.addf %acc, %w : {t}
      scf.yield %a : {t}
    }} else {{
      %m = arith.mulf %acc, %w : {t}
      %e = math.exp %m : {t}
      scf.yield %e : {t}
    }}
    %lo = arith.truncf %t : {t} to {q}
    %sq = arith.mulf %lo, %lo : {q}
    %hi = arith.extf %sq : {q} to {t}
    %next = arith.addf %hi, %acc : {t}
    scf.yield %next : {t}
  }}
  return %r : {t}
}}
func.func private @mid(%x: {t}, %steps: index) -> {t} {{
  %s = util.global.load @scale : {t}
  %init = tensor.empty() : {t}
  %g = linalg.generic {{indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}}
      ins(%x, %s : {t}, {t}) outs(%init : {t}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %n = arith.negf %p : f32
    linalg.yield %n : f32
  }} -> {t}
  %l = func.call @leaf(%g, %steps) : ({t}, index) -> {t}
  %out = math.absf %l : {t}
  return %out : {t}
}}
func.func @main(%x: tensor<1x{n}xf32>, %steps: index) -> {t} {{
  %wm = arith.constant dense<[{mat}]> : tensor<{n * n}xf32>
  %w2 = tensor.expand_shape %wm [[0, 1]] output_shape [{n}, {n}] : tensor<{n * n}xf32> into tensor<{n}x{n}xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x{n}xf32>
  %acc = linalg.fill ins(%z : f32) outs(%e : tensor<1x{n}xf32>) -> tensor<1x{n}xf32>
  %mm = linalg.matmul ins(%x, %w2 : tensor<1x{n}xf32>, tensor<{n}x{n}xf32>) outs(%acc : tensor<1x{n}xf32>) -> tensor<1x{n}xf32>
  %flat = tensor.collapse_shape %mm [[0, 1]] : tensor<1x{n}xf32> into {t}
  %prev = util.global.load @state : {t}
  %in = arith.addf %flat, %prev : {t}
  %y = func.call @mid(%in, %steps) : ({t}, index) -> {t}
  util.global.store %y, @state : {t}
  return %y : {t}
}}
"""


if __name__ == "__main__":  # pragma: no cover - regenerates examples/
    import sys

    sys.stdout.write(mlp())


#: A dynamic i4 insert_slice: iree-compile 3.13 fails to legalize 'vector.maskedload' for it.
I4_QUANT = """func.func @quant(%n: index, %q: tensor<?xi4>, %base: tensor<64xi4>) -> tensor<4x16xf32> {
  %0 = arith.addi %q, %q : tensor<?xi4>
  %1 = tensor.insert_slice %0 into %base[0] [%n] [1] : tensor<?xi4> into tensor<64xi4>
  %2 = arith.sitofp %1 : tensor<64xi4> to tensor<64xf32>
  %3 = tensor.expand_shape %2 [[0, 1]] output_shape [4, 16] : tensor<64xf32> into tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}
"""


def two_bugs(layers: int = 6, bad_layer: int = 4) -> str:
    """Two real codegen bugs in one program: the MLP's f6E2M3FN layer (reported first:
    'arith.truncf') and a dynamic i4 slice ('vector.maskedload'). A reducer whose check
    only greps "failed to legalize" can slip from the first to the second."""
    return mlp(layers=layers, bad_layer=bad_layer) + I4_QUANT


def const_eval_model(n: int = 4096) -> str:
    """A weight that is a constant expression (an n x n matmul of constants), which
    const-eval JIT-compiles and runs while compiling, and two ops that use it."""
    t = f"tensor<{n}x{n}xf32>"
    return f"""func.func @main(%x: {t}) -> {t} {{
  %w = arith.constant dense<1.5> : {t}
  %ww = linalg.matmul ins(%w, %w : {t}, {t}) outs(%w : {t}) -> {t}
  %s = arith.addf %x, %ww : {t}
  %y = math.exp %s : {t}
  return %y : {t}
}}
"""


def powf_model() -> str:
    """llvm-cpu computes powf of a negative base with an integral exponent as NaN; vmvx
    gets it right (iree-compile 3.13)."""
    return """func.func @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = arith.addf %x, %y : tensor<8xf32>
  %b = arith.mulf %a, %x : tensor<8xf32>
  %r = math.round %b : tensor<8xf32>
  %c = math.powf %b, %r : tensor<8xf32>
  %d = math.tanh %y : tensor<8xf32>
  %e = arith.subf %c, %d : tensor<8xf32>
  %s = arith.constant dense<0.5> : tensor<8xf32>
  %g = arith.mulf %e, %s : tensor<8xf32>
  %f = math.absf %a : tensor<8xf32>
  return %g, %f : tensor<8xf32>, tensor<8xf32>
}
"""
