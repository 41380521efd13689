"""bench/epoch_table.py A.jsonl B.jsonl NAME_A NAME_B TITLE ALLOWANCE [--one-sided]

Two training runs' JSON-lines logs (netrun's --log, or a PyTorch script's
rows with the same keys) side by side: per epoch the mean loss and the test
top-1 of each, then the final top-1 difference A - B in points against
ALLOWANCE: |A - B| <= ALLOWANCE, or with --one-sided A - B >= -ALLOWANCE (A
may be better by any amount).  Exit status 1 when a log has no epoch rows,
else 0 (the verdict is printed, not the exit status)."""
import json
import sys


def epochs(path):
    rows = {}
    try:
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "epoch" in r and "test_accuracy" in r and "loss_mean" in r:
                rows[r["epoch"]] = r
    except OSError:
        pass
    return rows


def main(argv):
    if len(argv) < 7:
        print(__doc__)
        return 2
    a_rows, b_rows = epochs(argv[1]), epochs(argv[2])
    na, nb, title, allowance = argv[3], argv[4], argv[5], float(argv[6])
    one_sided = "--one-sided" in argv[7:]
    print(f"\n=== {title}")
    print(f"{'epoch':>5s} {na + ' loss':>12s} {nb + ' loss':>12s} {na + ' top-1':>12s} {nb + ' top-1':>12s}")
    f = lambda r, k, m=1: f"{r[k] * m:.4f}" if k in r else "-"
    for e in sorted(set(a_rows) | set(b_rows)):
        a, b = a_rows.get(e, {}), b_rows.get(e, {})
        print(f"{e:5d} {f(a, 'loss_mean'):>12s} {f(b, 'loss_mean'):>12s} {f(a, 'test_accuracy', 100):>12s} "
              f"{f(b, 'test_accuracy', 100):>12s}")
    if not a_rows or not b_rows:
        print("a run has no epoch rows: no comparison")
        return 1
    a, b = a_rows[max(a_rows)]["test_accuracy"] * 100, b_rows[max(b_rows)]["test_accuracy"] * 100
    ok = a - b >= -allowance if one_sided else abs(a - b) <= allowance
    print(f"final: {na} {a:.2f}%, {nb} {b:.2f}%, {na} - {nb} {a - b:+.2f} points "
          f"({'within' if ok else 'NOT within'} {allowance:g} point{'' if allowance == 1 else 's'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
