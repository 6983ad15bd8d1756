"""The drain loop reads the status Lambda's answer by path: every ``$.status.*`` in the deployed definition names a QueueStatus field.

The construct generates those paths with ``status_path`` from the field names,
so a renamed field fails at synth; this reads them back from the template, as
Step Functions will, so a path spelled by hand anywhere fails here.
"""

from __future__ import annotations

import json
import re

from state_graph import all_states

from s3wq.ops.status import STATUS_RESULT_PATH, QueueStatus


def test_every_status_path_of_the_definition_names_a_field_of_queue_status(stack):
    definition = json.dumps(stack.definition())
    named = set(re.findall(re.escape(STATUS_RESULT_PATH) + r"\.(\w+)", definition))
    # The drain loop's choices: remaining, finished, released, locked, and the wait between rounds.
    assert {"remaining", "finished", "released", "locked", "wait_seconds"} <= named
    assert named <= set(QueueStatus.names()), f"status paths that name no field of QueueStatus: {sorted(named - set(QueueStatus.names()))}"


def test_the_status_task_puts_its_answer_where_the_paths_look(stack):
    result_paths = {state.get("ResultPath") for _, state in all_states(stack.definition()) if state["Type"] == "Task"}
    assert STATUS_RESULT_PATH in result_paths
