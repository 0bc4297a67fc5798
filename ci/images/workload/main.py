"""Stand-in for the seed's `tfjob/docker/mnist/main.py` on GPU-less clusters.

The seed's image runs TensorFlow 1.5's mnist_with_summaries, which logs each visible
GPU's `Found device ... totalMemory: X freeMemory: Y` block and then trains. This
script keeps that shape with real parts only: `gpushare-probe` queries the CUDA driver
API (the mock library, through the isolation shim) and prints the same block, then a
real softmax classifier trains on scikit-learn's bundled digits data on the CPU, with
the original's flags and its `Accuracy at step N` / `Total Train-accuracy` lines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from sklearn.datasets import load_digits


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max_steps", type=int, default=1000, help="number of training steps")
    parser.add_argument("--learning_rate", type=float, default=0.001, help="initial learning rate")
    parser.add_argument("--dropout", type=float, default=0.9, help="keep probability (accepted, unused by softmax)")
    parser.add_argument(
        "--data_dir",
        default="/tmp/tensorflow/mnist/input_data",
        help="accepted for compatibility; digits ship with scikit-learn",
    )
    parser.add_argument("--log_dir", default="/tmp/tensorflow/mnist/logs", help="accepted for compatibility")
    parser.add_argument("--fake_data", action="store_true", help="accepted for compatibility")
    parser.add_argument("--batch_size", type=int, default=100)
    args = parser.parse_args()
    if args.max_steps < 1:
        parser.error(f"--max_steps must be >= 1, got {args.max_steps}")
    return args


def probe_devices() -> int:
    """Print the TF 1.x device lines for every visible card (stderr, as TF logs)."""
    probe = os.environ.get("GPUSHARE_PROBE", "gpushare-probe")
    try:
        result = subprocess.run([probe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    except FileNotFoundError:
        print(f"main.py: {probe} not found; no GPU information", file=sys.stderr)
        return 127
    sys.stderr.write(result.stdout)
    sys.stderr.flush()
    return result.returncode


def train(args: argparse.Namespace) -> float:
    digits = load_digits()
    features = digits.data / 16.0
    labels = digits.target
    rng = np.random.default_rng(0)
    order = rng.permutation(len(labels))
    split = int(len(labels) * 0.8)
    train_idx, test_idx = order[:split], order[split:]
    weights = np.zeros((features.shape[1], 10))
    bias = np.zeros(10)
    onehot = np.eye(10)
    # Pace the loop like a GPU step would (the mock image sets it), so the pod lives
    # long enough for nvidia-smi to be run in it as the seed's verification does.
    step_delay = float(os.environ.get("MNIST_STEP_DELAY_SECONDS", "0"))
    learning_rate = max(args.learning_rate, 1e-4) * 100

    def accuracy(idx: np.ndarray) -> float:
        logits = features[idx] @ weights + bias
        return float(np.mean(np.argmax(logits, axis=1) == labels[idx]))

    for step in range(args.max_steps):
        if step % 10 == 0:
            print(f"Accuracy at step {step}: {accuracy(test_idx)}", flush=True)
        batch = rng.choice(train_idx, size=min(args.batch_size, len(train_idx)), replace=False)
        logits = features[batch] @ weights + bias
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        grad = (probs - onehot[labels[batch]]) / len(batch)
        weights -= learning_rate * features[batch].T @ grad
        bias -= learning_rate * grad.sum(axis=0)
        if step_delay:
            time.sleep(step_delay)
    total = accuracy(train_idx)
    print(f"Total Train-accuracy={total}", flush=True)
    return total


def main() -> int:
    args = parse_args()
    status = probe_devices()
    if status != 0:
        print(f"main.py: device probe failed with exit status {status}", file=sys.stderr)
        return status
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
