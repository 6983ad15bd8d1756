"""Counts read as English: "1 path in 1 group", never "1 paths in 1 groups"."""

from __future__ import annotations

from support import run_cli


def test_populate_and_inspect_say_one_in_the_singular(tmp_path):
    (tmp_path / "only.txt").write_text("one line\n")

    populated = run_cli("populate", "ws", "only.txt", cwd=tmp_path)
    worked = run_cli("work", "ws", "--processor", "text", cwd=tmp_path)
    [flag] = (tmp_path / "ws" / "done_flags").iterdir()
    inspected = run_cli("inspect", "ws", flag.name.removeprefix("done_").removesuffix(".flag"), cwd=tmp_path)

    assert populated.returncode == 0, populated.stderr
    assert populated.stdout == "added 1 path in 1 group (0 already indexed); index now holds 1 path in 1 group\n"
    assert worked.returncode == 0, worked.stderr
    [result_line] = [line for line in inspected.stdout.splitlines() if line.startswith("result: ")]
    assert " (1 record, " in result_line, result_line
