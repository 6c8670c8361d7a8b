"""A model whose op refers to a weight blob the file does not hold (issue 30): one line
naming the file, exit 3, before any check runs."""

from __future__ import annotations

from pathlib import Path

from conftest import make_script
from test_weights import MODULE, SECTION, cli

from reducer import session


def test_a_reference_with_no_blob_is_one_line_naming_the_file(tmp_path: Path):
    path = tmp_path / "model.mlir"
    path.write_text(MODULE + SECTION.replace("bias:", "bais:"))
    make_script(tmp_path / "check.sh", f"touch {tmp_path}/ran; exit 0")
    proc = cli(tmp_path, "model.mlir", "--check", "check.sh")
    assert proc.returncode == session.EXIT_BAD_INPUT == 3, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ireereduce: error")]
    assert len(errors) == 1 and "model.mlir" in errors[0] and "dense_resource<bias>" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "ran").exists()
    (tmp_path / "none.mlir").write_text(MODULE)  # no section at all
    proc = cli(tmp_path, "none.mlir", "--check", "check.sh")
    assert proc.returncode == 3 and "none.mlir" in proc.stderr and "dense_resource<" in proc.stderr, proc.stderr
