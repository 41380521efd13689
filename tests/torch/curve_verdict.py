"""curve_verdict.py - the judgement of two ensembles of loss curves.

compare_resnet50.py --curve runs the same SGD steps several times in each
implementation: once on the images as they are and once on each of a few
copies changed by 1e-6 relative noise (the same copies on both sides).
Training-mode batch norm on small batches makes the trajectory chaotic: a
1e-6 change moves later losses by percents, and run-to-run summation order
(atomics) does the same to a single implementation.  So neither side is
one curve: each is an ensemble, and its own spread says how far two equally
valid runs land apart.

The verdict, per window of 10 steps (two passes over the 5 cycled batches,
averaging out which batch a step saw):

  mean[side][w]  the window's mean loss, averaged over the side's runs
  spread[w]      the largest relative distance of any single run's window
                 mean from its own side's mean (both sides' runs)
  diff[w]        |mean[netc][w] - mean[ref][w]| / mean[ref][w]
  pass           diff[w] <= max(floor, 2 * spread[w]) in every window

and the reference must train: its mean loss in the last window below 80%
of the first window's (otherwise the configuration says nothing and the
verdict is a failure naming it), and netc's must fall by at least 80% as
much as the reference's did (NET_SHARE; not netc below the same 80% line:
a reference that only just crosses it would leave an equally good netc on
either side of it by chance).  The floor is 2% for
fp32 and 5% for fp16 (compare_resnet50.py).  Pure Python: its test,
test_curve_verdict.py, runs without torch.
"""

WINDOW = 10
FALL = 0.8
NET_SHARE = 0.8


def window_means(losses):
    """Mean of each window of WINDOW consecutive losses (the last may be shorter)."""
    return [sum(losses[i:i + WINDOW]) / len(losses[i:i + WINDOW]) for i in range(0, len(losses), WINDOW)]


def ensemble(runs):
    """(per-run window means, their mean per window)."""
    if not runs or any(len(r) != len(runs[0]) or not r for r in runs):
        raise ValueError("an ensemble needs runs of one non-zero length")
    per_run = [window_means(r) for r in runs]
    mean = [sum(w[i] for w in per_run) / len(per_run) for i in range(len(per_run[0]))]
    return per_run, mean


def spread_of(per_run, mean):
    """Per window: the largest |run - mean| / mean over the runs."""
    return [max(abs(w[i] - mean[i]) / abs(mean[i]) for w in per_run) for i in range(len(mean))]


def verdict(net_runs, ref_runs, floor):
    """Judges netc's ensemble against the reference's; returns a dict with
    'pass', 'diff', 'crit', 'spread', 'net_mean', 'ref_mean', 'net_falls',
    'ref_falls' and 'why' (empty when it passes)."""
    if len(net_runs[0]) != len(ref_runs[0]):
        raise ValueError("netc's and the reference's runs differ in length")
    net_w, net_mean = ensemble(net_runs)
    ref_w, ref_mean = ensemble(ref_runs)
    spread = [max(a, b) for a, b in zip(spread_of(net_w, net_mean), spread_of(ref_w, ref_mean))]
    diff = [abs(a - b) / abs(b) for a, b in zip(net_mean, ref_mean)]
    crit = [max(floor, 2 * s) for s in spread]
    ref_falls = ref_mean[-1] < FALL * ref_mean[0]
    net_falls = net_mean[0] - net_mean[-1] >= NET_SHARE * (ref_mean[0] - ref_mean[-1])
    why = []
    if not ref_falls:
        why.append(f"the reference does not train here (last window {ref_mean[-1]:.4f} against a first of "
                   f"{ref_mean[0]:.4f}): choose another --curve-lr or --curve-batch")
    elif not net_falls:
        why.append(f"netc's loss does not fall by {NET_SHARE:.0%} of the reference's fall "
                   f"({net_mean[0]:.4f} -> {net_mean[-1]:.4f} against {ref_mean[0]:.4f} -> {ref_mean[-1]:.4f})")
    bad = [i + 1 for i, (d, c) in enumerate(zip(diff, crit)) if d > c]
    if bad:
        why.append("window(s) " + ", ".join(str(i) for i in bad) + " outside the allowance")
    return {"pass": not why, "diff": diff, "crit": crit, "spread": spread, "net_mean": net_mean,
            "ref_mean": ref_mean, "net_falls": net_falls, "ref_falls": ref_falls, "why": "; ".join(why)}
