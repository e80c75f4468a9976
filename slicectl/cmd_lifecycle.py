"""``slicectl lifecycle``: a stack's day 0 to day 2, simulated offline with state carried between runs.

    slicectl lifecycle --stack prod [--change FILE] [--state FILE]

Day 0: the first `pulumi up` on an empty project, in the order the engine creates (waves), each resource
checked against what the cloud needs before it. Day 1: GKE's own changes (auto-upgrades, flex-start labels,
the autoscaler's node counts), then the same spec again: it must plan no change. Day 2 (``--change``, a
stack file for the same stack, e.g. an edited copy): what that change plans from day 1's state.
``--state`` starts from a state a previous run wrote (build/<stack>/state.json) instead of day 0.
Day 0 and day 2 also go through the deploy journey (``offline/journey.py``): ``pulumi preview --save-plan`` then
``pulumi up --plan`` by Pulumi's own rules, each refusal named with its resource and the engine's source.
Exit 0 when day 0 is in order (its journey too), day 1 plans nothing and day 2's journey passes, 1 otherwise,
2 for usage errors, 3 for a bad spec.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from offline import engine
from offline import journey as jr
from offline import lifecycle as lc
from slicectl.exits import Exit, UsageError
from stackspec import names


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("lifecycle", help="simulate day 0 (first up), day 1 (no changes) and day 2 (a spec change)")
    p.add_argument("--stack", required=True, help="the stack to simulate (a stack file under --stacks-dir)")
    p.add_argument("--change", type=Path, help="a stack file for the same stack: the day-2 plan to it")
    p.add_argument("--state", type=Path, help="start from this state (written by an earlier run) instead of day 0")
    p.add_argument("--out", type=Path, default=Path("build"), help="where the state is written (default: build/)")
    return p


def render_file(stack: str, path: Path, journey: bool = False) -> engine.Rendering:
    """The program's rendering of ``stack`` from another stack file (its lines in messages are that file's);
    ``journey``: as offline/journey.py renders it."""
    if not path.is_file():
        raise UsageError(f"--change {path}: no such stack file")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(path, Path(tmp) / names.stack_file(stack).split("/")[-1])
        return jr.render(stack, stacks_dir=Path(tmp)) if journey else engine.render(stack, stacks_dir=Path(tmp))


def print_journey(state: dict, rendering: engine.Rendering) -> bool:
    """The journey's verdict: what the plan holds, and each step `up --plan` would refuse."""
    preview, _, violations = jr.journey(state, rendering)
    changes = sum(1 for p in preview.plans.values() if p.ops != ["same"])
    print(f"  preview --save-plan, then up --plan: {changes} planned step(s), "
          f"{len(preview.unconfigured)} provider(s) unconfigured at preview")
    if violations:
        print("  `pulumi up --plan` would refuse (the first refusal stops the update):")
        print("\n".join(f"    {v}" for v in violations))
    else:
        print("  `up` applies the plan as approved")
    return not violations


def run(args: argparse.Namespace) -> int:
    ok = True
    rendering = engine.render(args.stack)
    replace_on = lc.replace_on_changes(rendering)
    if args.state:
        if not args.state.is_file():
            raise UsageError(f"--state {args.state}: no such file (slicectl lifecycle writes build/<stack>/state.json)")
        try:
            state = lc.load(args.state)
        except (ValueError, UnicodeDecodeError) as e:
            raise UsageError(f"--state {args.state}: not a state slicectl lifecycle wrote ({e})") from None
        if not isinstance(state, dict) or not all(isinstance(e, dict) and {"type", "name", "inputs", "outputs"}
                                                   <= set(e) for e in state.values()):
            raise UsageError(f"--state {args.state}: not a state slicectl lifecycle wrote (a JSON object of "
                             "URN -> {type, name, inputs, outputs, ...})")
        print(f"Day 0: skipped, starting from {args.state}")
    else:
        first = lc.first_up(rendering)
        state = first.state
        print(f"A simulation: no cloud is called; replace-on and cloud-owned fields from {lc.SCHEMA_SOURCE}\n")
        print(f"Day 0: the first `pulumi up` of {args.stack} on an empty project, "
              f"{sum(len(w) for w in first.waves)} resources in {len(first.waves)} waves")
        for i, wave in enumerate(first.waves, start=1):
            print(f"  wave {i}: " + ", ".join(state[u]["name"] for u in wave))
        if first.problems:
            ok = False
            print("  out of order (the cloud needs these first, and nothing makes them wait):")
            print("\n".join(f"    {p}" for p in first.problems))
        else:
            print("  every resource waits for what the cloud needs before it")
        ok = print_journey({}, jr.render(args.stack)) and ok

    state, changes = lc.gke_changes(state)
    print(f"\nDay 1: GKE's own changes ({len(changes)}), then the same spec again")
    for c in changes:
        print(f"  ~ {c}")
    again = lc.plan(state, rendering, replace_on)
    print(f"  plan: {again.summary()}")
    print("\n".join(s.line() for s in again.changes))
    ok = ok and not again.changes

    if args.change:
        changed = render_file(args.stack, args.change)
        day2 = lc.plan(state, changed, {**replace_on, **lc.replace_on_changes(changed)})
        print(f"\nDay 2: to {args.change}: {day2.summary()}")
        print("\n".join(s.line() for s in day2.changes))
        # The journey from the spec as deployed (day 1's state is this spec's rendering).
        ok = print_journey(jr.state_of(jr.render(args.stack)), render_file(args.stack, args.change, journey=True)) \
            and ok

    out = args.out / args.stack / "state.json"
    lc.save(state, out)
    print(f"\nwrote {out} (day 1's state: --state {out} starts the next run from it)")
    return Exit.OK if ok else Exit.POLICY_VIOLATION
