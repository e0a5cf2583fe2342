"""The op families ``python -m search.tune`` tunes: the search's part of each tiledsl family record.

Each :class:`SearchFamily` is attached to its :class:`tiledsl.family.Family` record (``extensions["search"]``)
and ties together what the tuner needs for that family:
its search space (``search.space``), the bench its GPU worker verifies and times with
(``search.measure``), its sub-command's arguments and the op they build, how the op is named in study
names and reports, and the launch configuration the exported host launcher uses. The tuner itself
(``search.tune``) is the same for every family.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

import tiledsl
from tiledsl import GemmOp
from tiledsl import family as tiledsl_family
from tiledsl.gemm.op import max_align
from tiledsl.reduce import OPS, ReduceOp
from tiledsl.reduce.kernel_plan import acc_numpy_dtype, identity_value
from tiledsl.spec import widest_dividing
from tiledsl.transpose import TransposeOp

from . import measure
from .space import GEMM_SPACE, REDUCE_SPACE, TRANSPOSE_SPACE, Space

LAYOUTS = {"NN": ("row", "row"), "NT": ("row", "col"), "TN": ("col", "row"), "TT": ("col", "col")}
# dtypes CuPy can make and check (bfloat16 has no CuPy dtype, hence no reference in the worker)
REDUCE_TUNE_DTYPES = ("float32", "float64", "float16", "int32", "int64")
TRANSPOSE_TUNE_DTYPES = ("float32", "float64", "float16", "int32", "int64")


@dataclass(frozen=True)
class SearchFamily:
    """How the tuner handles one op family.

    Attributes:
        name: the family ("gemm", "reduce", "transpose"), also the sub-command.
        help: one line for ``python -m search.tune --help``.
        description: the sub-command's description.
        example: a command line for the epilog.
        space: the search space (``search.space``).
        bench: worker-side class ``(op) -> Bench`` (``search.measure``).
        add_arguments: adds the op's arguments (shape, dtype, ...) to the sub-command's parser.
        op_from_args: parsed arguments -> the op ``tiledsl``'s public call builds for fresh arrays.
        study_shape: op -> the op part of the default study name.
        op_text: op -> a short human description for reports.
        launch_grid: (op, schedule, target) -> grid of the exported launcher, or None for a launcher
            computing it at run time (GEMM).
        launch_notes: (op, schedule, target) -> comment lines for the launcher (argument values,
            scratch buffers).
    """

    name: str
    help: str
    description: str
    example: str
    space: Space
    bench: type
    add_arguments: Callable[[argparse.ArgumentParser], None]
    op_from_args: Callable[[argparse.Namespace], object]
    study_shape: Callable[[object], str]
    op_text: Callable[[object], str]
    launch_grid: Callable[[object, object, object], tuple[int, int, int]] | None = None
    launch_notes: Callable[[object, object, object], list[str]] | None = None


# ---------------------------------------------------------------- shared argument parsing


def parse_shape(text: str) -> tuple[int, ...]:
    """``"16384x16384"`` -> (16384, 16384) (also ``,`` or ``*`` between sizes).

    Raises:
        argparse.ArgumentTypeError: not sizes ≥ 0 separated by x.
    """
    parts = text.lower().replace("*", "x").replace(",", "x").split("x")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r} must be sizes separated by x, e.g. 16384x16384") from None
    if not shape or any(n < 0 for n in shape):
        raise argparse.ArgumentTypeError(f"shape {text!r}: every size must be an integer ≥ 0")
    return shape


def positive_int(text: str) -> int:
    """An integer ≥ 1 (argparse type: anything else is a usage error, exit code 2)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return v


def finite_above(text: str, low: float, what: str, why: str = "") -> float:
    """A finite number > ``low`` parsed from ``text`` (argparse type helper); ``what`` names it in the error ("a number
    of seconds"), ``why`` may add a reason."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not (math.isfinite(v) and v > low):
        raise argparse.ArgumentTypeError(f"{text!r} must be {what} > {low:g}{why}")
    return v


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 (argparse type)."""
    return finite_above(text, 0, "a number of seconds")


def parse_axis(text: str) -> int | None:
    """``"1"`` -> 1, ``"-1"`` -> -1, ``"none"``/``"all"`` -> None (every element)."""
    if text.lower() in ("none", "all"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"axis {text!r} must be an integer or 'none'") from None


def _dims(shape) -> str:
    return "x".join(str(n) for n in shape)


# ---------------------------------------------------------------- GEMM


def gemm_op(m: int, n: int, k: int, dtype: str = "float32", layout: str = "NN", precision: str = "ieee"):
    """The GemmOp that ``tiledsl.gemm`` builds for fresh contiguous operands of this shape and layout.

    Alignment follows ``tiledsl.gemm``: the widest vector dividing the operand's leading dimension
    and contiguous extent (row-major A: K; column-major A: M; row-major B: N; column-major B: K; C: N).
    ``precision="tf32"``: the op of the kernel, whose operands are K-major (``tiledsl.gemm`` copies an
    M-major A or N-major B first; the tuned kernel does not include that copy).
    """
    la, lb = LAYOUTS[layout]
    if precision == "tf32":
        la, lb = "row", "col"
    w = max_align(dtype)
    return GemmOp(m, n, k, dtype=dtype, layout_a=la, layout_b=lb,
                  align_a=widest_dividing(w, k if la == "row" else m),
                  align_b=widest_dividing(w, n if lb == "row" else k), align_c=widest_dividing(w, n),
                  precision=precision)


def rows_instead(family: str, op, target) -> GemmOp | None:
    """The op ``schedule=None`` runs in place of ``op`` when ``tiledsl.gemm`` computes a few-column product as the
    rows Cᵀ = Bᵀ·Aᵀ on the GEMV-style kernel (``tiledsl.gemm.family.runs_as_row``), else None. The op's own (tiled)
    search space cannot express that kernel, so a tune of such an op neither times nor replaces it; ``--lookup``
    reports a stored record of the rows product itself."""
    from tiledsl.gemm.family import rows_op, runs_as_row

    if family != "gemm" or not runs_as_row(op, target):
        return None
    return rows_op(op)


def rows_unused(family: str, op, target) -> str | None:
    """Why ``schedule=None`` will not read a record of ``op``, the rows of a few-column product (``--as-rows``:
    a column-major C), on ``target``: the product it stands for is not run as rows there
    (``tiledsl.gemm.family.runs_as_row``: too few columns with this layout and K, too small, or a record of the
    product itself). None where it will, or for any other op."""
    from dataclasses import replace

    from tiledsl.gemm.family import rows_op, runs_as_row

    if family != "gemm" or op.layout_c != "col":  # (an N = 1 product's single row is an ordinary row-major op)
        return None
    product = replace(rows_op(op), layout_c="row")  # transposing twice: the user's product, row-major C
    if runs_as_row(product, target):
        return None
    return (f"schedule=None does not run {op_text(product)} as these rows on {target.name} (runs_as_row): the record "
            "is stored for the rows product, which no call of that product reads")


def _gemm_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument("--m", type=positive_int, required=True, help="rows of A and C (>= 1)")
    g.add_argument("--n", type=positive_int, required=True, help="columns of B and C (>= 1)")
    g.add_argument("--k", type=positive_int, required=True, help="columns of A, rows of B (>= 1)")
    g.add_argument("--dtype", default="float32", choices=("float32", "float16"),
                   help="element type of A, B, C (float32 accumulation); float16 searches the tensor-core kernels")
    g.add_argument("--precision", default="ieee", choices=("ieee", "tf32", "3xtf32"),
                   help="float32 only: ieee (exact FMA kernels), tf32 (tensor cores on sm_90, operands K-major; "
                        "the layout's copy to K-major is not part of the timed kernel) or 3xtf32 (9-16 rows of x @ W "
                        "or x @ W.T on the tensor cores, each input in two TF32 parts)")
    g.add_argument("--mma", default="auto", choices=("auto", "dmma"),
                   help="auto: the kernels schedule=None chooses among; dmma: the GEMV kernel on the FP64 tensor cores "
                        "(IEEE float32, 1-16 rows, x @ W or x @ W.T, A 16-byte aligned and x @ W.T's B (x @ W's is "
                        "read 4 bytes at a time where it is not), sm_90): inputs widened "
                        "exactly, float64 sums per K slice rounded to float32; its winner is exported, never stored "
                        "for schedule=None")
    g.add_argument("--layout", default="NN", choices=tuple(LAYOUTS),
                   help="storage of A then B, seen from C = A·B in row-major (numpy) terms: N = row-major operand, "
                        "T = column-major operand (a .T view of a contiguous array). DeepBench's cuBLAS "
                        "column-major flags map as a_t=1 -> A row-major (N), a_t=0 -> A column-major (T), same for "
                        "b_t and B: e.g. a_t=0, b_t=1 is --layout TN")
    g.add_argument("--as-rows", action="store_true",
                   help="tune the rows Cᵀ = Bᵀ·Aᵀ (N×M, written into C's column-major view) that schedule=None runs "
                        "for a few-column product (N < M; tiledsl.gemm.family.runs_as_row) on the GEMV kernel's "
                        "space: its record is what schedule=None then reads for this product")


def _gemm_op(args: argparse.Namespace):
    from tiledsl.gemm.family import effective_op, gemv_mma_refusal

    if args.precision != "ieee" and args.dtype != "float32":
        raise ValueError(f"--precision {args.precision} applies to --dtype float32, not {args.dtype}")
    op = gemm_op(args.m, args.n, args.k, args.dtype, args.layout, args.precision)
    effective = effective_op(op)  # a 3xtf32 product the tensor-core kernel does not take: the IEEE product's
    if effective is not op:
        print(f"--precision 3xtf32: {op.m}x{op.n}x{op.k} {args.layout} is not on the tensor-core GEMV kernel "
              f"({gemv_mma_refusal(op)}); tiledsl.gemm computes it as the IEEE product, so that is what is tuned and "
              "stored")
        op = effective
    if not getattr(args, "as_rows", False):
        return op
    return as_rows_op(op)


def as_rows_op(op):
    """``--as-rows``: the op of the rows Cᵀ = Bᵀ·Aᵀ of a few-column product (``tiledsl.gemm.family.rows_op``): a
    column-major Cᵀ, which only the GEMV kernel writes, or for N = 1 the single row yᵀ = xᵀ·Aᵀ (a row-major C).

    Raises:
        ValueError: ``op`` has N ≥ M (its rows would be more than its columns), or is not IEEE float32 (``--dtype``
            float32 without ``--precision tf32``: the only products run as rows).
    """
    from tiledsl.gemm.family import rows_op

    if not 1 <= op.n < op.m:
        raise ValueError(f"--as-rows: N={op.n} must be below M={op.m} (a few-column product)")
    if op.dtype != "float32" or op.precision != "ieee":
        raise ValueError(f"--as-rows: only IEEE float32 few-column products run as rows, not --dtype {op.dtype} "
                         f"--precision {op.precision}")
    return rows_op(op)


# ---------------------------------------------------------------- reduce


def reduce_op(shape: tuple[int, ...], op: str = "sum", axis: int | None = None, dtype: str = "float32"):
    """The ReduceOp ``tiledsl.reduce(x, op, axis)`` builds for a fresh contiguous ``x`` (align 8)."""
    return ReduceOp(shape=tuple(shape), op=op, axis=axis, dtype=dtype)


def _reduce_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument("--shape", type=parse_shape, required=True, metavar="D0xD1x...",
                   help="shape of the C-contiguous input, e.g. 16384x16384")
    g.add_argument("--axis", type=parse_axis, default=None, metavar="AXIS",
                   help="the reduced axis (negative counts from the end), or 'none' for every element")
    g.add_argument("--op", default="sum", choices=OPS, help="the reduction (numpy semantics)")
    g.add_argument("--dtype", default="float32", choices=REDUCE_TUNE_DTYPES,
                   help="input element type (result dtype as numpy: int sums give int64, int means float64)")


def _reduce_op(args: argparse.Namespace):
    return reduce_op(args.shape, args.op, args.axis, args.dtype)


def _reduce_study(op) -> str:
    return f"{_dims(op.shape)}-{op.op}-axis{'all' if op.axis is None else op.axis}-{op.dtype}"


def _reduce_text(op) -> str:
    where = "all elements" if op.axis is None else f"axis {op.axis}"
    return f"{op.op} over {where} of {_dims(op.shape)} {op.dtype} -> {op.out_dtype} ({op.kind})"


def _grid(op, s, target) -> tuple[int, int, int]:
    """The grid of the kernel's plan on ``target``."""
    return tiledsl.plan(op, s, device=target).grid


def _reduce_notes(op, s, target) -> list[str]:
    p = tiledsl.plan(op, s, device=target).detail  # the reduction's launch plan
    segments = op.outer if op.kind == "contiguous" else op.outer * p.col_tiles
    notes = [f"arguments for the tuned op ({op.op}, shape {_dims(op.shape)}, axis {op.axis}) on {target.name}: "
             f"segments={segments}, length={op.length}, inner={op.inner}, col_tiles={p.col_tiles}, split={p.split}"]
    if p.partials:
        fill = f"filled with {identity_value(op)} before each launch" if p.fill_identity else "uninitialized"
        notes.append(f"partials: {p.partials} elements of {acc_numpy_dtype(op)} ({fill})")
    else:
        notes.append("partials: unused (pass nullptr)")
    notes.append(f"tickets: {p.tickets} unsigned ints, zeroed once before the first launch (each launch leaves "
                 "them zero)" if p.tickets
                 else "tickets: unused (pass nullptr)")
    return notes


# ---------------------------------------------------------------- transpose


def transpose_op(shape: tuple[int, ...], dtype: str = "float32"):
    """The TransposeOp ``tiledsl.transpose(x)`` builds for a fresh contiguous ``x`` and output."""
    return TransposeOp(shape=tuple(shape), dtype=dtype)


def _transpose_arguments(g: argparse.ArgumentParser) -> None:
    g.add_argument("--shape", type=parse_shape, required=True, metavar="RxC",
                   help="shape of the C-contiguous input: RxC, or BxRxC for a batch (last two axes swapped)")
    g.add_argument("--dtype", default="float32", choices=TRANSPOSE_TUNE_DTYPES, help="element type")


def _transpose_op(args: argparse.Namespace):
    return transpose_op(args.shape, args.dtype)


def _transpose_study(op) -> str:
    return f"{_dims(op.shape)}-{op.dtype}"


def _transpose_text(op) -> str:
    return f"{_dims(op.shape)} {op.dtype} -> {_dims(op.out_shape)}"


def _transpose_notes(op, s, target) -> list[str]:
    pad = (0,) * (3 - len(op.shape))
    return [f"arguments for the tuned op (shape {_dims(op.shape)}, {op.dtype}): rows={op.rows}, cols={op.cols}, "
            f"batch={op.batch}, x strides (batch, row, col)={pad + op.in_strides}, "
            f"y strides={pad + op.out_strides} (elements)"]


# ---------------------------------------------------------------- the table


def _gemm_study(op) -> str:
    c_col = "-ccol" if op.layout_c == "col" else ""  # the rows of a few-column product (--as-rows)
    return f"{op.m}x{op.n}x{op.k}-{op.dtype if op.precision == 'ieee' else op.precision}-{op.layout}{c_col}"


def _gemm_text(op) -> str:
    c_col = ", C column-major" if op.layout_c == "col" else ""
    return f"{op.m}x{op.n}x{op.k} {op.dtype}{'' if op.precision == 'ieee' else f' ({op.precision})'} {op.layout}{c_col}"


SEARCH_FAMILIES: dict[str, SearchFamily] = {
    "gemm": SearchFamily(
        "gemm", "C = A @ B (float32 / float16)", "Tune a GEMM C[M,N] = A[M,K] @ B[K,N].",
        "python -m search.tune gemm --m 4096 --n 4096 --k 4096 --dtype float32 --trials 200 --export best/",
        GEMM_SPACE, measure.GemmBench, _gemm_arguments, _gemm_op, _gemm_study, _gemm_text),
    "reduce": SearchFamily(
        "reduce", "out = op(x, axis): sum / mean / max / min / prod / norm2 with numpy semantics",
        "Tune a reduction of one axis (or all) of a C-contiguous array, against cupy.<op> (CUB) in the same run.",
        "python -m search.tune reduce --shape 16384x16384 --axis 1 --op sum --trials 100",
        REDUCE_SPACE, measure.ReduceBench, _reduce_arguments, _reduce_op, _reduce_study, _reduce_text,
        _grid, _reduce_notes),
    "transpose": SearchFamily(
        "transpose", "Y = X.T of a 2-D (or the last two axes of a 3-D) array",
        "Tune a transpose of a C-contiguous array into a C-contiguous output, against "
        "cupy.ascontiguousarray(x.T) in the same run.",
        "python -m search.tune transpose --shape 16384x16384 --dtype float32 --trials 100",
        TRANSPOSE_SPACE, measure.TransposeBench, _transpose_arguments, _transpose_op, _transpose_study,
        _transpose_text, _grid, _transpose_notes),
}


for _sf in SEARCH_FAMILIES.values():  # the search's part of each family record
    tiledsl_family.get(_sf.name).attach("search", _sf)


def get(name: str) -> SearchFamily:
    """The search's part of the family record ``name`` (attached as ``extensions["search"]``).

    Raises:
        KeyError: the tuner has no such family (the message lists those it has).
    """
    try:
        return tiledsl_family.get(name).extensions["search"]
    except (tiledsl.SpecTypeError, KeyError):
        raise KeyError(f"search.tune has no op family {name!r}; families: {sorted(SEARCH_FAMILIES)}") from None


def family_of_op(op) -> SearchFamily:
    """The search's part of ``op``'s family record."""
    return get(tiledsl_family.of(op).name)



def op_text(op) -> str:
    """``op`` as the report names it (the family's ``op_text``; the op's dict when it has no family)."""
    import json

    try:
        return family_of_op(op).op_text(op)
    except (KeyError, TypeError, ValueError):
        return json.dumps(op.to_dict())


def vendor_name(family: str, op) -> str:
    """The vendor call the worker times next to the candidates (``Bench.vendor_name``)."""
    return get(family).bench(op).vendor_name
