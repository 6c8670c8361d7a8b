"""Built-in reductions, one module each. `BUILTIN` is the one list of them, and its order
is the run order (as llvm-reduce's DeltaPasses.def): a strategy not yet tried in a run goes
before the ones after it. Coarse cuts come first (whole functions, pass pipelines, shapes,
returning a value), then op-level removal, then operand and type rewrites, then attribute
polish. values-to-arguments waits until after those: every untried strategy runs before
the tried ones, and after drop-ops its full sweep of a small function cost more checks
than returning a value again would (issue 13). The text
strategies, for input that does not parse, keep their own order at the end. Plug-ins from
the `ireereduce.strategies` entry points run after all of these."""

from reducer.core.strategy import Strategy
from strategies.arguments_to_constants import ArgumentsToConstants
from strategies.attributes import Attributes
from strategies.blocks import Blocks
from strategies.codegen_config import CodegenConfig
from strategies.drop_ops import DropOps
from strategies.forward_operands import ForwardOperands
from strategies.generic_to_ops import GenericToOps
from strategies.globals import Globals
from strategies.hal_executables import HalExecutables
from strategies.inline_parameters import InlineParameters
from strategies.iree_simplify import IreeSimplify
from strategies.opt_passes import OptPasses
from strategies.regions import Regions
from strategies.remove_results_and_arguments import RemoveResultsAndArguments
from strategies.replace_with_zero import ReplaceWithZero
from strategies.shrink_tensors import ShrinkTensors
from strategies.shrink_values import ShrinkValues
from strategies.split_functions import SplitFunctions
from strategies.text_balanced import TextBalanced
from strategies.text_lines import TextLines
from strategies.text_tokens import TextTokens
from strategies.types import Types
from strategies.unused_results import UnusedResults
from strategies.values_to_arguments import ValuesToArguments
from strategies.values_to_return import ValuesToReturn

BUILTIN: list[type[Strategy]] = [
    InlineParameters,
    SplitFunctions,
    OptPasses,
    ShrinkTensors,
    ShrinkValues,
    Globals,
    Regions,
    Blocks,
    HalExecutables,
    CodegenConfig,
    UnusedResults,
    RemoveResultsAndArguments,
    GenericToOps,
    ValuesToReturn,
    DropOps,
    ForwardOperands,
    IreeSimplify,
    ReplaceWithZero,
    Types,
    ArgumentsToConstants,
    ValuesToArguments,
    Attributes,
    TextLines,
    TextBalanced,
    TextTokens,
]
