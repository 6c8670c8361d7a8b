"""hal-executables: an export loses its workgroup-count region and still verifies."""

from __future__ import annotations

from conftest import apply_edits, workspace

from reducer.core.workspace import Candidate
from strategies.hal_executables import HalExecutables

EXECUTABLE = """#target = #hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">
#layout = #hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer>]>
hal.executable private @ex {
  hal.executable.variant public @v target(#target) {
    hal.executable.export public @f ordinal(0) layout(#layout) count(%arg0: !hal.device) -> (index, index, index) {
      %c1 = arith.constant 1 : index
      hal.return %c1, %c1, %c1 : index, index, index
    }
    builtin.module {
      func.func @f() {
        return
      }
    }
  }
}
"""


def test_the_count_region_goes_and_the_export_stays():
    edits = workspace(EXECUTABLE).opportunities(HalExecutables())
    assert [e.kind for e in edits] == ["drop-count"]
    done = apply_edits(HalExecutables(), EXECUTABLE)
    assert isinstance(done, Candidate), done
    assert "hal.return" not in done.text and "count(" not in done.text
    assert "hal.executable.export public @f ordinal(0)" in done.text
    assert workspace(done.text).opportunities(HalExecutables()) == []  # nothing left to offer
