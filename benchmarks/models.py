"""Realistic models built in code (random weights, no downloads) with a real bug planted in one layer.

Every model is plain upstream MLIR (func, arith, math, tensor, linalg), the form
`iree-import-onnx` and iree-turbine hand to `iree-compile`: one function per layer
called from `@main`, shared helper functions (softmax, norm, FFN) called from every
layer, and inline `dense<...>` weights. `BUGS` are failures of the pinned
iree-compile 3.13.0 found by probing unusual element types, shapes and ops.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs


@attrs.frozen
class Bug:
    """A planted failure: the lines that trigger it, and whether @main needs an extra index arg."""

    name: str
    summary: str
    needs_index: bool = False


BUGS = {
    "f6": Bug("f6", "f6E2M3FN arithmetic: \"failed to legalize operation 'arith.truncf'\""),
    "tf32": Bug("tf32", "tf32 multiply: segfault in MemRefDescriptor::fromStaticShape (LLVM lowering)"),
    "i4dyn": Bug(
        "i4dyn", "i4 on a dynamic slice: \"failed to legalize operation 'vector.maskedload'\"", needs_index=True
    ),
    "i4odd": Bug("i4odd", "tensor<7xi4>: \"'stream.tensor.sizeof' op failed to calculate total byte count\""),
    "powf": Bug("powf", "math.powf of a negative base: NaN on llvm-cpu, the right value on vmvx"),
    "f6fused": Bug("f6fused", "f6E2M3FN round trip inside a two-result fused linalg.generic"),
    "fptosi": Bug("fptosi", "fptosi out of i32 range: llvm-cpu saturates, vmvx wraps (a second, different mismatch)"),
}


class _Writer:
    """Emits SSA lines with fresh names, so generators read like the model they build."""

    def __init__(self, seed: int) -> None:
        self.lines: list[str] = []
        self.rng = random.Random(seed)
        self.n = 0

    def fresh(self, stem: str = "v") -> str:
        self.n += 1
        return f"%{stem}{self.n}"

    def op(self, text: str, stem: str = "v") -> str:
        name = self.fresh(stem)
        self.lines.append(f"  {name} = {text}")
        return name

    def weights(self, rows: int, cols: int) -> str:
        vals = ", ".join(f"{self.rng.uniform(-1, 1):.4f}" for _ in range(rows * cols))
        flat = self.op(f"arith.constant dense<[{vals}]> : tensor<{rows * cols}xf32>", "w")
        return self.op(
            f"tensor.expand_shape {flat} [[0, 1]] output_shape [{rows}, {cols}] : "
            f"tensor<{rows * cols}xf32> into tensor<{rows}x{cols}xf32>",
            "w",
        )

    def splat(self, value: float, t: str) -> str:
        return self.op(f"arith.constant dense<{value:e}> : {t}", "c")

    def matmul(self, x: str, w: str, m: int, k: int, n: int) -> str:
        zero = self.op("arith.constant 0.0 : f32", "z")
        empty = self.op(f"tensor.empty() : tensor<{m}x{n}xf32>", "e")
        acc = self.op(
            f"linalg.fill ins({zero} : f32) outs({empty} : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>", "acc"
        )
        return self.op(
            f"linalg.matmul ins({x}, {w} : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) "
            f"outs({acc} : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>",
            "mm",
        )

    def bug(self, kind: str, x: str, t: str, rows: int, cols: int, index: str | None) -> str:
        """Plant `kind` on value x (type t = tensor<rows x cols x f32>); returns the value to use next."""
        if kind in ("f6", "tf32"):
            et = "f6E2M3FN" if kind == "f6" else "tf32"
            q = t.replace("xf32>", f"x{et}>")
            low = self.op(f"arith.truncf {x} : {t} to {q}", "q")
            sq = self.op(f"arith.mulf {low}, {low} : {q}", "q")
            back = self.op(f"arith.extf {sq} : {q} to {t}", "q")
            return self.op(f"arith.addf {x}, {back} : {t}", "q")
        if kind == "powf":
            exponent = self.op(f"math.round {x} : {t}", "p")  # integral, not constant: no folding to mulf
            p = self.op(f"math.powf {x}, {exponent} : {t}", "p")
            return self.op(f"arith.addf {x}, {p} : {t}", "p")
        if kind == "f6fused":  # one fused generic computes the f6 round trip and a second, used output
            e1, e2 = self.op(f"tensor.empty() : {t}", "e"), self.op(f"tensor.empty() : {t}", "e")
            r = self.fresh("fused")
            self.lines += [
                f'  {r}:2 = linalg.generic {{indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}} '
                f"ins({x} : {t}) outs({e1}, {e2} : {t}, {t}) {{",
                "  ^bb0(%a: f32, %o1: f32, %o2: f32):",
                "    %q = arith.truncf %a : f32 to f6E2M3FN",
                "    %qq = arith.mulf %q, %q : f6E2M3FN",
                "    %b = arith.extf %qq : f6E2M3FN to f32",
                "    %g = math.exp %a : f32",
                "    linalg.yield %b, %g : f32, f32",
                f"  }} -> ({t}, {t})",
            ]
            return self.op(f"arith.addf {r}#0, {r}#1 : {t}", "q")
        if kind == "fptosi":  # scaled far out of i32 range: llvm-cpu saturates, vmvx wraps
            big = self.splat(1.0e10, t)
            m = self.op(f"arith.mulf {x}, {big} : {t}", "o")
            i = self.op(f"arith.fptosi {m} : {t} to {t.replace('xf32', 'xi32')}", "o")
            f = self.op(f"arith.sitofp {i} : {t.replace('xf32', 'xi32')} to {t}", "o")
            small = self.splat(1.0e-10, t)
            back = self.op(f"arith.mulf {f}, {small} : {t}", "o")
            return self.op(f"arith.addf {x}, {back} : {t}", "o")
        if kind in ("i4dyn", "i4odd"):
            flat = f"tensor<{rows * cols}xf32>"
            f = self.op(f"tensor.collapse_shape {x} [[0, 1]] : {t} into {flat}", "i")
            i8 = self.op(f"arith.fptosi {f} : {flat} to tensor<{rows * cols}xi8>", "i")
            i4 = self.op(f"arith.trunci {i8} : tensor<{rows * cols}xi8> to tensor<{rows * cols}xi4>", "i")
            if kind == "i4dyn":
                size, st = index, "tensor<?xi4>"
            else:
                size, st = "7", "tensor<7xi4>"
            s = self.op(f"tensor.extract_slice {i4}[0] [{size}] [1] : tensor<{rows * cols}xi4> to {st}", "i")
            a = self.op(f"arith.addi {s}, {s} : {st}", "i")
            ins = self.op(
                f"tensor.insert_slice {a} into {i4}[0] [{size}] [1] : {st} into tensor<{rows * cols}xi4>", "i"
            )
            e8 = self.op(f"arith.extsi {ins} : tensor<{rows * cols}xi4> to tensor<{rows * cols}xi8>", "i")
            ff = self.op(f"arith.sitofp {e8} : tensor<{rows * cols}xi8> to {flat}", "i")
            back = self.op(f"tensor.expand_shape {ff} [[0, 1]] output_shape [{rows}, {cols}] : {flat} into {t}", "i")
            return self.op(f"arith.addf {x}, {back} : {t}", "i")
        raise ValueError(kind)


def _generic(
    w: _Writer, ins: list[str], t: str, body: str, maps: str = "#id", iters: str = '"parallel", "parallel"'
) -> str:
    """An elementwise linalg.generic: body is a format string over %a0.. (inputs) returning %r."""
    empty = w.op(f"tensor.empty() : {t}", "e")
    n = len(ins)
    args = ", ".join(f"%a{i}: f32" for i in range(n)) + ", %out: f32"
    map_list = ", ".join([maps] * (n + 1))
    ins_types = ", ".join([t] * n)
    name = w.fresh("g")
    w.lines.append(
        f"  {name} = linalg.generic {{indexing_maps = [{map_list}], iterator_types = [{iters}]}} "
        f"ins({', '.join(ins)} : {ins_types}) outs({empty} : {t}) {{"
    )
    w.lines.append(f"  ^bb0({args}):")
    for ln in body.strip().splitlines():
        w.lines.append(f"    {ln.strip()}")
    w.lines.append("    linalg.yield %r : f32")
    w.lines.append(f"  }} -> {t}")
    return name


_HEADER = [
    "#id = affine_map<(d0, d1) -> (d0, d1)>",
    "#row = affine_map<(d0, d1) -> (d0)>",
]


def _softmax(seq: int) -> list[str]:
    """Row softmax as one shared helper function: reduce max, exp, reduce sum, divide."""
    t = f"tensor<{seq}x{seq}xf32>"
    v = f"tensor<{seq}xf32>"
    return [
        f"func.func private @softmax(%x: {t}) -> {t} {{",
        "  %ninf = arith.constant -1.0e30 : f32",
        "  %zero = arith.constant 0.0 : f32",
        f"  %e0 = tensor.empty() : {v}",
        f"  %m0 = linalg.fill ins(%ninf : f32) outs(%e0 : {v}) -> {v}",
        f'  %max = linalg.generic {{indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}} ins(%x : {t}) outs(%m0 : {v}) {{',
        "  ^bb0(%a: f32, %acc: f32):",
        "    %r = arith.maximumf %a, %acc : f32",
        "    linalg.yield %r : f32",
        f"  }} -> {v}",
        f"  %e1 = tensor.empty() : {t}",
        f'  %ex = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}} ins(%x, %max : {t}, {v}) outs(%e1 : {t}) {{',
        "  ^bb0(%a: f32, %m: f32, %o: f32):",
        "    %d = arith.subf %a, %m : f32",
        "    %r = math.exp %d : f32",
        "    linalg.yield %r : f32",
        f"  }} -> {t}",
        f"  %s0 = linalg.fill ins(%zero : f32) outs(%e0 : {v}) -> {v}",
        f'  %sum = linalg.generic {{indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}} ins(%ex : {t}) outs(%s0 : {v}) {{',
        "  ^bb0(%a: f32, %acc: f32):",
        "    %r = arith.addf %a, %acc : f32",
        "    linalg.yield %r : f32",
        f"  }} -> {v}",
        f'  %y = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}} ins(%ex, %sum : {t}, {v}) outs(%e1 : {t}) {{',
        "  ^bb0(%a: f32, %s: f32, %o: f32):",
        "    %r = arith.divf %a, %s : f32",
        "    linalg.yield %r : f32",
        f"  }} -> {t}",
        f"  return %y : {t}",
        "}",
    ]


def _gelu(t: str) -> list[str]:
    """tanh-approximated GELU as a helper called from every feed-forward block."""
    return [
        f"func.func private @gelu(%x: {t}) -> {t} {{",
        f"  %half = arith.constant dense<0.5> : {t}",
        f"  %one = arith.constant dense<1.0> : {t}",
        f"  %k = arith.constant dense<0.7978845> : {t}",
        f"  %c = arith.constant dense<0.044715> : {t}",
        f"  %x2 = arith.mulf %x, %x : {t}",
        f"  %x3 = arith.mulf %x2, %x : {t}",
        f"  %cx3 = arith.mulf %c, %x3 : {t}",
        f"  %in = arith.addf %x, %cx3 : {t}",
        f"  %kin = arith.mulf %k, %in : {t}",
        f"  %th = math.tanh %kin : {t}",
        f"  %op = arith.addf %one, %th : {t}",
        f"  %hx = arith.mulf %half, %x : {t}",
        f"  %y = arith.mulf %hx, %op : {t}",
        f"  return %y : {t}",
        "}",
    ]


def transformer(
    layers: int = 12, seq: int = 8, dim: int = 16, bug: str | None = "f6", bug_layer: int | None = None, seed: int = 0
) -> str:
    """A decoder stack: per layer q/k/v projections, scores, shared softmax, output
    projection, residual, RMS-style norm and a GELU feed-forward block."""
    bug_layer = layers * 2 // 3 if bug_layer is None else bug_layer
    w = _Writer(seed)
    t = f"tensor<{seq}x{dim}xf32>"
    s = f"tensor<{seq}x{seq}xf32>"
    needs_index = bug is not None and BUGS[bug].needs_index
    out = _HEADER + _softmax(seq) + _gelu(t)
    for i in range(layers):
        w.lines = []
        extra = ", %n: index" if needs_index else ""
        w.lines.append(f"func.func private @layer{i}(%x: {t}{extra}) -> {t} {{")
        q = w.matmul("%x", w.weights(dim, dim), seq, dim, dim)
        k = w.matmul("%x", w.weights(dim, dim), seq, dim, dim)
        v = w.matmul("%x", w.weights(dim, dim), seq, dim, dim)
        kt_e = w.op(f"tensor.empty() : tensor<{dim}x{seq}xf32>", "e")
        kt = w.op(f"linalg.transpose ins({k} : {t}) outs({kt_e} : tensor<{dim}x{seq}xf32>) permutation = [1, 0]", "kt")
        sc = w.matmul(q, kt, seq, dim, seq)
        scale = w.splat(0.25, s)
        scaled = w.op(f"arith.mulf {sc}, {scale} : {s}", "sc")
        p = w.op(f"call @softmax({scaled}) : ({s}) -> {s}", "p")
        att = w.matmul(p, v, seq, seq, dim)
        o = w.matmul(att, w.weights(dim, dim), seq, dim, dim)
        if bug is not None and i == bug_layer:
            o = w.bug(bug, o, t, seq, dim, "%n")
        res = w.op(f"arith.addf %x, {o} : {t}", "res")
        sq = _generic(w, [res], t, "%r = arith.mulf %a0, %a0 : f32")
        eps = w.splat(1.0e-5, t)
        d = w.op(f"arith.addf {sq}, {eps} : {t}", "nrm")
        r = w.op(f"math.rsqrt {d} : {t}", "nrm")
        normed = w.op(f"arith.mulf {res}, {r} : {t}", "nrm")
        h = w.matmul(normed, w.weights(dim, dim), seq, dim, dim)
        g = w.op(f"call @gelu({h}) : ({t}) -> {t}", "ff")
        f2 = w.matmul(g, w.weights(dim, dim), seq, dim, dim)
        y = w.op(f"arith.addf {normed}, {f2} : {t}", "y")
        w.lines.append(f"  return {y} : {t}")
        w.lines.append("}")
        out += w.lines
    out += _main(layers, t, needs_index)
    return "\n".join(out) + "\n"


def convnet(
    stages: int = 10, hw: int = 8, ch: int = 4, bug: str | None = "i4odd", bug_stage: int | None = None, seed: int = 1
) -> str:
    """A same-padded conv stack: per stage pad, 3x3 conv with inline weights, bias, ReLU,
    a 1x1 mixing conv, residual; a dense classifier head in @head."""
    bug_stage = stages // 2 if bug_stage is None else bug_stage
    w = _Writer(seed)
    img = f"tensor<1x{hw}x{hw}x{ch}xf32>"
    padded = f"tensor<1x{hw + 2}x{hw + 2}x{ch}xf32>"
    needs_index = bug is not None and BUGS[bug].needs_index
    out = list(_HEADER)
    for i in range(stages):
        w.lines = []
        extra = ", %n: index" if needs_index else ""
        w.lines.append(f"func.func private @stage{i}(%x: {img}{extra}) -> {img} {{")
        zero = w.op("arith.constant 0.0 : f32", "z")
        pd = w.fresh("pad")
        w.lines.append(f"  {pd} = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {{")
        w.lines.append("  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):")
        w.lines.append(f"    tensor.yield {zero} : f32")
        w.lines.append(f"  }} : {img} to {padded}")
        vals = ", ".join(f"{w.rng.uniform(-0.5, 0.5):.3f}" for _ in range(9 * ch * ch))
        kflat = w.op(f"arith.constant dense<[{vals}]> : tensor<{9 * ch * ch}xf32>", "k")
        kern = w.op(
            f"tensor.expand_shape {kflat} [[0, 1, 2, 3]] output_shape [3, 3, {ch}, {ch}] : "
            f"tensor<{9 * ch * ch}xf32> into tensor<3x3x{ch}x{ch}xf32>",
            "k",
        )
        e = w.op(f"tensor.empty() : {img}", "e")
        acc = w.op(f"linalg.fill ins({zero} : f32) outs({e} : {img}) -> {img}", "acc")
        conv = w.op(
            "linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} "
            f"ins({pd}, {kern} : {padded}, tensor<3x3x{ch}x{ch}xf32>) outs({acc} : {img}) -> {img}",
            "conv",
        )
        bias = w.splat(round(w.rng.uniform(-0.1, 0.1), 3), img)
        b = w.op(f"arith.addf {conv}, {bias} : {img}", "b")
        zeros = w.splat(0.0, img)
        relu = w.op(f"arith.maximumf {b}, {zeros} : {img}", "relu")
        flat_t = f"tensor<{hw * hw}x{ch}xf32>"
        flat = w.op(f"tensor.collapse_shape {relu} [[0, 1, 2], [3]] : {img} into {flat_t}", "f")
        mixed = w.matmul(flat, w.weights(ch, ch), hw * hw, ch, ch)
        if bug is not None and i == bug_stage:
            mixed = w.bug(bug, mixed, flat_t, hw * hw, ch, "%n")
        back = w.op(
            f"tensor.expand_shape {mixed} [[0, 1, 2], [3]] output_shape [1, {hw}, {hw}, {ch}] : {flat_t} into {img}",
            "f",
        )
        y = w.op(f"arith.addf %x, {back} : {img}", "y")
        w.lines.append(f"  return {y} : {img}")
        w.lines.append("}")
        out += w.lines
    out += _main(stages, img, needs_index, fn="stage")
    return "\n".join(out) + "\n"


def _main(n: int, t: str, needs_index: bool, fn: str = "layer") -> list[str]:
    arg = ", %n: index" if needs_index else ""
    lines = [f"func.func @main(%input: {t}{arg}) -> {t} {{"]
    prev = "%input"
    for i in range(n):
        extra, extra_t = (", %n", ", index") if needs_index else ("", "")
        lines.append(f"  %l{i} = call @{fn}{i}({prev}{extra}) : ({t}{extra_t}) -> {t}")
        prev = f"%l{i}"
    lines.append(f"  return {prev} : {t}")
    lines.append("}")
    return lines


def scale_module(ops: int, functions: int | None = None, seed: int = 3) -> str:
    """The scale case: `ops` scalar/tensor ops over dozens of functions that call each
    other, with one `math.cbrt` somewhere deep in the call graph."""
    functions = functions or max(8, min(200, ops // 400))
    per = max(4, ops // functions)
    rng = random.Random(seed)
    special = (functions * 2 // 3, per // 2)
    out: list[str] = []
    t = "tensor<4xf32>"
    kinds = [
        "arith.addf {a}, {b}",
        "arith.mulf {a}, {b}",
        "arith.subf {a}, {b}",
        "arith.maximumf {a}, {b}",
        "math.exp {a}",
        "arith.negf {a}",
    ]
    for f in range(functions):
        vis = "" if f == 0 else "private "
        out.append(f"func.func {vis}@f{f}(%arg0: {t}, %arg1: {t}) -> {t} {{")
        vals = ["%arg0", "%arg1"]
        for j in range(per):
            if (f, j) == special:
                text = f"math.cbrt {vals[-1]}"
            elif j % 50 == 25 and f + 1 < functions:
                callee = rng.randrange(f + 1, functions)
                text = f"call @f{callee}({vals[-1]}, {rng.choice(vals)}) : ({t}, {t}) -> {t}"
                out.append(f"  %v{j} = {text}")
                vals.append(f"%v{j}")
                continue
            else:
                text = rng.choice(kinds).format(a=vals[-1], b=rng.choice(vals[-8:]))
            out.append(f"  %v{j} = {text} : {t}")
            vals.append(f"%v{j}")
        out.append(f"  return {vals[-1]} : {t}")
        out.append("}")
    return "\n".join(out) + "\n"


def fanout(callees: int = 8, ops_per_callee: int = 39, bug_callee: int = 5, bug_op: int = 23) -> str:
    """Issue 11's parallel-scheduling case: @main calls `callees` functions of
    elementwise chains and sums their results; one op of one callee is `math.atan2`
    (the "bug"). 346 ops with the defaults (module, functions and returns included)."""

    def bug(c: int, i: int, prev: str) -> str | None:
        return f"math.atan2 {prev}, %y" if (c, i) == (bug_callee, bug_op) else None

    return _fanout(callees, ops_per_callee, bug)


#: The ops `fanout_wide` plants, one per bug callee; its check needs them all.
WIDE_MARKERS = ("math.atan2", "math.erf", "math.tanh", "math.log1p", "math.cbrt", "math.sin", "math.cos", "math.exp2")


def fanout_wide(callees: int = 40, ops_per_callee: int = 49, bugs: int = 2) -> str:
    """Issue 31's case with at least 80 checks at -j 1: `fanout`'s shape at 2,122 ops
    (40 callees of 49 elementwise ops), with the bug needing `bugs` ops (the first of
    `WIDE_MARKERS`) in callees spread over the module, each deep in its callee's chain
    (5 ops before its return). With one such op split-functions isolates its callee at
    once and -j 1 needs 27 checks; with two the search must find both (96 checks at
    -j 1 on the commit this was built on), with three 154."""
    assert 1 <= bugs <= len(WIDE_MARKERS)
    where = {(callees * (k + 1)) // (bugs + 1): WIDE_MARKERS[k] for k in range(bugs)}  # callee -> its op

    def bug(c: int, i: int, prev: str) -> str | None:
        if c not in where or i != ops_per_callee - 5:
            return None
        return f"{where[c]} {prev}, %y" if where[c] == "math.atan2" else f"{where[c]} {prev}"

    return _fanout(callees, ops_per_callee, bug)


def _fanout(callees: int, ops_per_callee: int, bug: Callable[[int, int, str], str | None]) -> str:
    """@main calls `callees` chains of elementwise ops and sums their results; `bug`
    names the op to plant at (callee, op) on the value before it, or None."""
    t = "tensor<8xf32>"
    out = []
    for c in range(callees):
        out.append(f"func.func private @f{c}(%x: {t}, %y: {t}) -> {t} {{")
        prev = "%x"
        for i in range(ops_per_callee):
            op = (
                bug(c, i, prev)
                or ("arith.negf " + prev, f"arith.addf {prev}, %y", f"arith.mulf {prev}, %x")[(c + i) % 3]
            )
            out.append(f"  %v{i} = {op} : {t}")
            prev = f"%v{i}"
        out.append(f"  return {prev} : {t}")
        out.append("}")
    out.append(f"func.func @main(%x: {t}, %y: {t}) -> {t} {{")
    for c in range(callees):
        out.append(f"  %r{c} = call @f{c}(%x, %y) : ({t}, {t}) -> {t}")
    acc = "%r0"
    for c in range(1, callees):
        out.append(f"  %s{c} = arith.addf {acc}, %r{c} : {t}")
        acc = f"%s{c}"
    out.append(f"  %out = math.absf {acc} : {t}")
    out.append(f"  return %out : {t}")
    out.append("}")
    return "\n".join(out) + "\n"


_DEQUANT = [
    "#q = affine_map<(d0, d1) -> (d0, d1)>",
    "#s = affine_map<(d0, d1) -> (d1)>",
]


def quantised_mlp(
    layers: int = 8, batch: int = 4, width: int = 31, hidden: int = 32, bad_layer: int | None = None, seed: int = 2
) -> str:
    """An int4-weight MLP: per layer a flat i4 weight literal, reshaped and dequantised
    by a linalg.generic (sitofp times a per-column scale), an up-projection matmul, ReLU
    and a down-projection matmul with f32 weights, residual. The bad layer's hidden
    size is odd, so its i4 weight has an odd element count: IREE cannot pack it."""
    bad_layer = layers * 2 // 3 if bad_layer is None else bad_layer
    w = _Writer(seed)
    t = f"tensor<{batch}x{width}xf32>"
    out = list(_DEQUANT)
    for i in range(layers):
        h = hidden + 1 if i == bad_layer else hidden
        w.lines = [f"func.func private @layer{i}(%x: {t}) -> {t} {{"]
        n = width * h
        vals = ", ".join(str(w.rng.randrange(-8, 8)) for _ in range(n))
        q = w.op(f"arith.constant dense<[{vals}]> : tensor<{n}xi4>", "wq")
        q2 = w.op(
            f"tensor.expand_shape {q} [[0, 1]] output_shape [{width}, {h}] : tensor<{n}xi4> into tensor<{width}x{h}xi4>",
            "wq",
        )
        scales = ", ".join(f"{w.rng.uniform(0.01, 0.1):.4f}" for _ in range(h))
        sc = w.op(f"arith.constant dense<[{scales}]> : tensor<{h}xf32>", "sc")
        e = w.op(f"tensor.empty() : tensor<{width}x{h}xf32>", "e")
        deq = w.fresh("deq")
        w.lines += [
            f'  {deq} = linalg.generic {{indexing_maps = [#q, #s, #q], iterator_types = ["parallel", "parallel"]}} '
            f"ins({q2}, {sc} : tensor<{width}x{h}xi4>, tensor<{h}xf32>) outs({e} : tensor<{width}x{h}xf32>) {{",
            "  ^bb0(%v: i4, %s: f32, %o: f32):",
            "    %f = arith.sitofp %v : i4 to f32",
            "    %r = arith.mulf %f, %s : f32",
            "    linalg.yield %r : f32",
            f"  }} -> tensor<{width}x{h}xf32>",
        ]
        up = w.matmul("%x", deq, batch, width, h)
        zeros = w.splat(0.0, f"tensor<{batch}x{h}xf32>")
        relu = w.op(f"arith.maximumf {up}, {zeros} : tensor<{batch}x{h}xf32>", "relu")
        down = w.matmul(relu, w.weights(h, width), batch, h, width)
        y = w.op(f"arith.addf %x, {down} : {t}", "y")
        w.lines += [f"  return {y} : {t}", "}"]
        out += w.lines
    out += _main(layers, t, False)
    return "\n".join(out) + "\n"


def mismatch_mlp(
    layers: int = 6, batch: int = 4, width: int = 8, seed: int = 4, bug_layer: int = 1, slip: bool = True
) -> str:
    """A small MLP with two numeric mismatches between llvm-cpu and vmvx: powf of
    negative bases in layer `bug_layer` (NaN on llvm-cpu only; the residual carries the
    NaN through) and, in the last layer unless not `slip`, an out-of-range fptosi (the
    outputs differ in sign and size). A check that only asks whether the outputs differ
    may keep the last layer alone; the bug being filed is the NaN."""
    w = _Writer(seed)
    t = f"tensor<{batch}x{width}xf32>"
    out = list(_HEADER)
    for i in range(layers):
        w.lines = [f"func.func private @layer{i}(%x: {t}) -> {t} {{"]
        h = w.matmul("%x", w.weights(width, width), batch, width, width)
        bias = w.splat(round(w.rng.uniform(-0.1, 0.1), 3), t)
        y = w.op(f"arith.addf {h}, {bias} : {t}", "b")
        if i == bug_layer:
            y = w.bug("powf", y, t, batch, width, None)
        if slip and i == layers - 1:
            y = w.bug("fptosi", y, t, batch, width, None)
        th = w.op(f"math.tanh {y} : {t}", "th")
        r = w.op(f"arith.addf %x, {th} : {t}", "y")
        w.lines += [f"  return {r} : {t}", "}"]
        out += w.lines
    out += _main(layers, t, False)
    return "\n".join(out) + "\n"
