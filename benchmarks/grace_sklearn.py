#!/usr/bin/env python3
"""Times scikit-learn's SpectralClustering on the affinity matrices that
`cargo bench -p moeplan --bench grace` writes to /tmp/moeplan-grace/, and
prints its affinity utilisation U (GRACE-MoE Eq. 1) next to moeplan's labels
and criterion time for the same matrices.

Run: python3 benchmarks/grace_sklearn.py (it builds its own virtual
environment, /tmp/moeplan-grace-venv or $MOEPLAN_VENV, on first use).
"""
import glob
import json
import os
import subprocess
import sys
import time
import warnings

VENV = os.environ.get("MOEPLAN_VENV", "/tmp/moeplan-grace-venv")
DATA = "/tmp/moeplan-grace"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("v2lite", "26 layers x 64 experts -> 8 groups"), ("v3", "58 layers x 256 experts -> 64 groups")]


def ensure_venv():
    """Re-runs this script inside the virtual environment, creating it first."""
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([python, "-m", "pip", "install", "--quiet", "scikit-learn", "numpy"])
    os.execv(python, [python, *sys.argv])


def utilisation(a, labels):
    """Eq. 1: intra-group affinity over all affinity, pairs i < j."""
    import numpy as np

    upper = np.triu(a, 1)
    same = labels[:, None] == labels[None, :]
    total = upper.sum()
    return float((upper * same).sum() / total) if total > 0 else 0.0


def criterion_seconds(shape):
    """moeplan's mean time for all layers, from criterion's last run."""
    pattern = os.path.join(ROOT, "target", "criterion", f"*{shape}*", "spectral_clusters", "new", "estimates.json")
    found = sorted(glob.glob(pattern))
    if not found:
        return None
    with open(found[0]) as f:
        return json.load(f)["mean"]["point_estimate"] / 1e9


def main():
    ensure_venv()
    import numpy as np
    import sklearn
    from sklearn.cluster import SpectralClustering

    warnings.filterwarnings("ignore")  # "graph is not fully connected"
    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}")
    for name, what in CASES:
        path = os.path.join(DATA, f"{name}_affinity.npy")
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: run `cargo bench -p moeplan --bench grace` first")
        mats = np.load(path)
        ours = np.load(os.path.join(DATA, f"{name}_labels.npy"))
        layers, experts, _ = mats.shape
        k = int(ours.max()) + 1
        best, theirs = None, []
        for _ in range(3):
            start = time.perf_counter()
            theirs = [
                SpectralClustering(
                    n_clusters=k, affinity="precomputed", assign_labels="kmeans", random_state=0
                ).fit_predict(a)
                for a in mats
            ]
            took = time.perf_counter() - start
            best = took if best is None else min(best, took)
        u_theirs = np.mean([utilisation(a, l) for a, l in zip(mats, theirs)])
        u_ours = np.mean([utilisation(a, l) for a, l in zip(mats, ours)])
        ours_s = criterion_seconds(f"{layers}x{experts}")
        print(f"\n{what}")
        print(f"  scikit-learn  {best * 1e3:9.1f} ms   mean U {u_theirs:.4f}")
        if ours_s is None:
            print(f"  moeplan       (no criterion result found)   mean U {u_ours:.4f}")
        else:
            print(f"  moeplan       {ours_s * 1e3:9.1f} ms   mean U {u_ours:.4f}   ({best / ours_s:.1f}x faster)")


if __name__ == "__main__":
    main()
