"""Built-in reductions. Each module holds one strategy; `BUILTIN` is their default order."""

from strategies.drop_ops import DropOps
from strategies.shrink_tensors import ShrinkTensors
from strategies.split_functions import SplitFunctions
from strategies.text_balanced import TextBalanced
from strategies.text_lines import TextLines
from strategies.text_tokens import TextTokens

BUILTIN = [SplitFunctions, ShrinkTensors, DropOps, TextLines, TextBalanced, TextTokens]
