"""`archscout calibrate --part accuracy` (search/cli/calibrate.py): refits the loss proxy on its
declared calibration set and writes the coefficient file the proxy reads; the shipped file is
exactly what the command writes, so a refit is reproducible byte for byte."""

import csv
import json

from objectives.accuracy_fit import shipped_calibration_set
from search.cli.main import main
from search.errors import EXIT_BAD_INPUT


SHIPPED = shipped_calibration_set().with_name("accuracy_coefficients.toml")


def test_refit_writes_exactly_the_shipped_file(tmp_path, capsys):
    assert main(["calibrate", "--part", "accuracy", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "depth_width" in out and "45 rows" in out  # the verified rows of the set
    assert (tmp_path / "accuracy_coefficients.toml").read_text() == SHIPPED.read_text()


def test_another_calibration_set_moves_what_it_changes(tmp_path, capsys):
    """Halving every published depth effect changes the fitted depth coefficient, and leaves a
    family fitted before it (families are fitted in name order; attention's rows do not vary
    depth) where the shipped fit has it."""
    rows = list(csv.DictReader(shipped_calibration_set().open()))
    for row in rows:
        if row["family"] == "depth_width" and row["metric"] == "loss":
            a, b = float(row["value_a"]), float(row["value_b"])
            row["value_b"] = str(a + (b - a) / 2)
    source = tmp_path / "rows.csv"
    with source.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["calibrate", "--part", "accuracy", "--source", str(source), "--output",
                 str(tmp_path), "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert main(["calibrate", "--part", "accuracy", "--output", str(tmp_path / "ref"),
                 "--json"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert mine["calibration_set"] == str(source)
    assert mine["coefficients"]["depth_scale"] < 0.9 * shipped["coefficients"]["depth_scale"]
    assert mine["coefficients"]["kv_width_coef"] == shipped["coefficients"]["kv_width_coef"]


def test_a_bad_calibration_set_is_one_line_and_writes_nothing(tmp_path, capsys):
    source = tmp_path / "rows.csv"
    source.write_text("id,family,metric\nx,moe,loss\n")
    assert main(["calibrate", "--part", "accuracy", "--source", str(source), "--output",
                 str(tmp_path / "out")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "needs columns" in err and "shape_a" in err
    assert not (tmp_path / "out").exists()
    rows = shipped_calibration_set().read_text().splitlines()
    rows[1] = rows[1].replace(rows[1].split(",")[5], "many", 1)  # tokens_a of the first row
    source.write_text("\n".join(rows) + "\n")
    assert main(["calibrate", "--part", "accuracy", "--source", str(source), "--output",
                 str(tmp_path / "out")]) == EXIT_BAD_INPUT
    assert "line 2: `tokens_a` must be a number; got 'many'" in capsys.readouterr().err
