"""test_curve_verdict.py - curve_verdict.py on made-up ensembles (no torch).

Falling curves with small run-to-run noise pass against themselves and
against a copy within the floor; a copy 20% off in its late windows fails
those windows; a chaotic pair of ensembles whose means differ by less than
twice the runs' own spread passes, one whose means differ by more fails; a
reference that does not fall fails with a message naming the configuration;
a netc ensemble that does not fall fails; windows are 10 steps; runs of
different lengths are refused.  Exit status 0 when every check holds.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import curve_verdict as cv  # noqa: E402

failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print(f"check failed: {what}")


def curve(start, end, steps=50, wobble=0.0, phase=0.0):
    """Exponential fall from start to end, with a deterministic wobble."""
    k = math.log(end / start) / (steps - 1)
    return [start * math.exp(k * i) * (1 + wobble * math.sin(1.7 * i + phase)) for i in range(steps)]


def ensemble(start, end, noise, runs=3, scale=1.0, late_scale=1.0, chaos=0.0):
    """runs curves, each wobbling by noise; with chaos, run r drifts by
    chaos * (r - 1) * step / 49 (the runs part as a chaotic problem's do)."""
    out = []
    for r in range(runs):
        c = curve(start, end, wobble=noise, phase=r * 2.1)
        out.append([x * (scale if i < 30 else late_scale) * (1 + chaos * (r - 1) * i / 49) for i, x in enumerate(c)])
    return out


ref = ensemble(7.0, 3.0, 0.01)
check(cv.window_means(list(range(25))) == [4.5, 14.5, 22.0], "windows of 10 steps, the last shorter")

v = cv.verdict(ref, ref, 0.02)
check(v["pass"] and v["why"] == "", f"an ensemble passes against itself: {v['why']}")
check(all(d == 0 for d in v["diff"]) and len(v["crit"]) == 5, "itself: no difference, five windows")

v = cv.verdict(ensemble(7.0, 3.0, 0.01, scale=1.01, late_scale=1.01), ref, 0.02)
check(v["pass"], f"1% off passes the 2% floor: {v['why']}")

v = cv.verdict(ensemble(7.0, 3.0, 0.01, late_scale=1.2), ref, 0.02)
check(not v["pass"] and "window(s) 4, 5" in v["why"], f"20% off in the late windows fails them: {v['why']}")

v = cv.verdict(ensemble(7.0, 3.0, 0.01, late_scale=1.1, chaos=0.15), ensemble(7.0, 3.0, 0.01, chaos=0.15), 0.02)
check(v["pass"] and v["spread"][-1] > 0.1, f"chaotic runs (about 14% apart late), means 10% apart: pass: {v['why']}")
v = cv.verdict(ensemble(7.0, 3.0, 0.03, late_scale=1.5), ensemble(7.0, 3.0, 0.03), 0.02)
check(not v["pass"] and "outside" in v["why"], f"means 50% apart with a 3% spread fail: {v['why']}")

flat = ensemble(7.0, 6.5, 0.01)
v = cv.verdict(flat, flat, 0.05)
check(not v["pass"] and not v["ref_falls"] and "reference does not train" in v["why"],
      f"a reference that does not fall fails, naming the configuration: {v['why']}")

v = cv.verdict(ensemble(7.0, 6.5, 0.01), ensemble(7.0, 3.0, 0.01), 0.05)
check(not v["pass"] and v["ref_falls"] and not v["net_falls"] and "netc's loss does not fall" in v["why"],
      f"netc not falling fails: {v['why']}")

# a reference that only just crosses the 80% line (79.7% of its first window): netc within the windows'
# allowance just above the line (80.3%, a fall 97% of the reference's) passes; one falling 74% as much fails
v = cv.verdict(ensemble(7.0, 5.35, 0.01), ensemble(7.0, 5.30, 0.01), 0.02)
check(v["pass"] and v["net_falls"], f"netc at 80.3% of its start against a reference at 79.7%: pass: {v['why']}")
v = cv.verdict(ensemble(7.0, 5.75, 0.01), ensemble(7.0, 5.30, 0.01), 0.2)
check(not v["pass"] and not v["net_falls"] and "fall by 80%" in v["why"],
      f"netc falling 74% as much as the reference fails: {v['why']}")

try:
    cv.verdict([[1.0] * 20], [[1.0] * 30], 0.02)
    check(False, "runs of different lengths are refused")
except ValueError:
    pass
try:
    cv.ensemble([[1.0] * 20, [1.0] * 10])
    check(False, "an ensemble of unequal runs is refused")
except ValueError:
    pass

print(f"{'all passed' if not failed else f'{failed} failed'}")
sys.exit(1 if failed else 0)
