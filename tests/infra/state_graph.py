"""A tiny walker over an Amazon States Language definition: States, Next, Choices, Default and Catch."""

from __future__ import annotations

import operator
from collections.abc import Iterator

TERMINAL_TYPES = ("Succeed", "Fail")
NUMERIC_TESTS = {
    "NumericEquals": operator.eq,
    "NumericLessThan": operator.lt,
    "NumericLessThanEquals": operator.le,
    "NumericGreaterThan": operator.gt,
    "NumericGreaterThanEquals": operator.ge,
}


def all_states(machine: dict) -> Iterator[tuple[str, dict]]:
    """Every state, including those inside Map item processors and Parallel branches."""
    for name, state in machine["States"].items():
        yield name, state
        for inner in (state.get("ItemProcessor"), state.get("Iterator"), *state.get("Branches", [])):
            if inner:
                yield from all_states(inner)


class StateGraph:
    """The top-level states of a definition as a directed graph."""

    def __init__(self, machine: dict):
        self.start: str = machine["StartAt"]
        self.states: dict[str, dict] = machine["States"]

    def of_type(self, state_type: str) -> list[str]:
        return [name for name, state in self.states.items() if state["Type"] == state_type]

    def successors(self, name: str) -> list[str]:
        state = self.states[name]
        found = [rule["Next"] for rule in state.get("Choices", [])]
        found += [state[key] for key in ("Next", "Default") if key in state]
        found += [catcher["Next"] for catcher in state.get("Catch", [])]
        return found

    def is_terminal(self, name: str) -> bool:
        state = self.states[name]
        return state["Type"] in TERMINAL_TYPES or state.get("End", False)

    def reachable(self, start: str | None = None, *, avoiding: set[str] | frozenset[str] = frozenset()) -> set[str]:
        """The states reachable from ``start`` (itself included) on paths that never enter ``avoiding``."""
        seen: set[str] = set()
        todo = [self.start if start is None else start]
        while todo:
            name = todo.pop()
            if name in seen or name in avoiding:
                continue
            seen.add(name)
            todo.extend(self.successors(name))
        return seen

    def reaches(self, source: str, target: str, *, avoiding: set[str] | frozenset[str] = frozenset()) -> bool:
        """A path of at least one transition leads from ``source`` to ``target``."""
        return any(target in self.reachable(after, avoiding=avoiding) for after in self.successors(source))

    def most_entries(self, target: str, counter: str, *, max_steps: int = 100_000) -> int:
        """How often one execution can enter ``target`` at most, following only ``$.<counter>``.

        Choice rules on the counter are evaluated; any other rule is decided
        against us: taken exactly when it leads back to ``target``. Pass
        states update the counter (a literal, itself, or ``States.MathAdd``
        of itself and 1) or drop it when they replace the state's data.
        Raises if the walk never ends: then the loop is unbounded.
        """
        path = f"$.{counter}"
        value: int | None = None
        entries = 0
        name = self.start
        for _ in range(max_steps):
            state = self.states[name]
            if any(state.get(key, "$") != "$" for key in ("InputPath", "OutputPath")):
                raise NotImplementedError(f"{name}: InputPath/OutputPath are not followed by this walker")
            if name == target:
                entries += 1
            if self.is_terminal(name):
                return entries
            if state["Type"] == "Choice":
                name = self._choose(name, path, value, target)
                continue
            if state.get("ResultPath", "$") == "$":  # the state's output replaces its input
                value = self._counter_after(name, state, counter, value)
            name = state["Next"]
        raise AssertionError(f"no end after {max_steps} steps: the loop through {target} is not bounded by {path}")

    def _choose(self, name: str, path: str, value: int | None, target: str) -> str:
        for rule in self.states[name]["Choices"]:
            tests = [key for key in NUMERIC_TESTS if key in rule]
            if rule.get("Variable") == path and tests:
                assert value is not None, f"{name} reads {path} before any state sets it"
                taken = NUMERIC_TESTS[tests[0]](value, rule[tests[0]])
            else:
                taken = rule["Next"] == target or self.reaches(rule["Next"], target)
            if taken:
                return rule["Next"]
        return self.states[name]["Default"]

    @staticmethod
    def _counter_after(name: str, state: dict, counter: str, value: int | None) -> int | None:
        if state["Type"] == "Wait":
            return value
        if state["Type"] != "Pass":  # a Task's or Map's result replaces the data
            return None
        fields = state.get("Parameters", state.get("Result"))
        if fields is None:  # a plain Pass hands its input on
            return value
        if counter in fields:
            return fields[counter]
        expression = fields.get(f"{counter}.$")
        if expression is None:
            return None
        if expression == f"$.{counter}":
            return value
        if expression == f"States.MathAdd($.{counter}, 1)":
            assert value is not None, f"{name} increments $.{counter} before any state sets it"
            return value + 1
        raise NotImplementedError(f"{name}: {counter} = {expression!r} is not followed by this walker")
