"""Built-in reductions. Each module holds one strategy; `BUILTIN` is their default order."""

from strategies.arguments_to_constants import ArgumentsToConstants
from strategies.attributes import Attributes
from strategies.drop_ops import DropOps
from strategies.forward_operands import ForwardOperands
from strategies.generic_to_ops import GenericToOps
from strategies.globals import Globals
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

BUILTIN = [
    SplitFunctions,
    OptPasses,
    ShrinkTensors,
    ShrinkValues,
    Globals,
    RemoveResultsAndArguments,
    ValuesToReturn,
    Regions,
    UnusedResults,
    GenericToOps,
    DropOps,
    ValuesToArguments,
    ForwardOperands,
    IreeSimplify,
    ReplaceWithZero,
    Types,
    Attributes,
    ArgumentsToConstants,
    TextLines,
    TextBalanced,
    TextTokens,
]
