"""Generators for realistic test inputs (kept in code: nothing large is committed)."""

from __future__ import annotations

import random

COMPILE = (
    "iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu "
    "--iree-llvmcpu-target-cpu=generic"
)
#: What the pinned iree-compile 3.13.0 says when f6E2M3FN arithmetic reaches the CPU backend.
F6_ERROR = "failed to legalize operation 'arith.truncf'"


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
        out.append(f"  %w = tensor.expand_shape %wflat [[0, 1]] output_shape [{width}, {width}] : tensor<{width * width}xf32> into tensor<{width}x{width}xf32>")
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


if __name__ == "__main__":  # pragma: no cover - regenerates examples/
    import sys

    sys.stdout.write(mlp())
