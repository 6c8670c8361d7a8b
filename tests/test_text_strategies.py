from reducer.core.strategy import Program
from strategies._text import cut, line_spans
from strategies.text_balanced import TextBalanced, balanced_spans
from strategies.text_lines import TextLines
from strategies.text_tokens import TextTokens

TEXT = "a {\n  b (c, d)\n}\ne\n"


def test_lines_deletes_chosen_lines():
    s = TextLines()
    edits = s.opportunities(Program(TEXT))
    assert len(edits) == 4
    assert s.apply(Program(TEXT), [edits[1], edits[3]]) == "a {\n}\n"


def test_balanced_spans_and_edits():
    assert balanced_spans(TEXT) == [(2, 15), (8, 13)]
    s = TextBalanced()
    edits = s.opportunities(Program(TEXT))
    delete_outer = next(e for e in edits if e.kind == "delete" and e.arg == (2, 15))
    hollow_inner = next(e for e in edits if e.kind == "hollow" and e.arg == (8, 13))
    assert s.apply(Program(TEXT), [delete_outer, hollow_inner]) == "a \ne\n"  # the outer cut covers the inner
    assert s.apply(Program(TEXT), [hollow_inner]) == "a {\n  b ()\n}\ne\n"


def test_tokens():
    s = TextTokens()
    edits = s.opportunities(Program('%x = "str" @f'))
    assert [e.arg for e in edits] == [(0, 2), (3, 4), (5, 10), (11, 13)]
    assert s.apply(Program('%x = "str" @f'), edits[1:3]) == "%x   @f"


def test_cut_removes_the_union_of_spans_given_in_any_order():
    # [1,3), [2,5) and [3,4) overlap and nest: together they are [1,5).
    assert cut("0123456789", [(6, 8), (1, 3), (2, 5), (3, 4)]) == "0589"
    assert cut("abc", []) == "abc"
    assert cut("abc", [(0, 3)]) == ""


def test_line_spans_cover_the_text_with_their_line_breaks():
    text = "a\n\nbc"
    spans = line_spans(text)
    assert spans == [(0, 2), (2, 3), (3, 5)]
    assert "".join(text[s:e] for s, e in spans) == text
