"""ImageLocality: prefer nodes that already have the pod's images.

For each container image (init and regular, normalised with ':latest' when
untagged) present on the node: size * (nodes having it / all nodes); the sum
is clamped to [23MB, 1000MB * containers] and scaled to 0..100.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from webhook.policy.interface import MAX_NODE_SCORE, CycleState, IntArray, SlotArray

NAME: Final = "ImageLocality"
MB: Final = 1024 * 1024
MIN_THRESHOLD: Final = 23 * MB
MAX_CONTAINER_THRESHOLD: Final = 1000 * MB


@dataclass(frozen=True)
class ImageLocality:
    name: str = NAME

    def score(self, state: CycleState, slots: SlotArray) -> IntArray | None:
        snap = state.snapshot
        total_nodes = len(snap)
        sums = np.zeros(len(slots), dtype=np.int64)
        if total_nodes:
            pos = {s: i for i, s in enumerate(slots.tolist())} if state.pod.images else {}
            for image in state.pod.images:
                holders = snap.image_nodes(image)
                if not holders:
                    continue
                spread = len(holders) / total_nodes
                for node_name, size in holders.items():
                    slot = snap.slot_of(node_name)
                    i = pos.get(slot) if slot is not None else None
                    if i is not None:
                        sums[i] += int(size * spread)
        n = state.pod.num_containers
        max_threshold = MAX_CONTAINER_THRESHOLD * n
        clamped = np.clip(sums, MIN_THRESHOLD, max(max_threshold, MIN_THRESHOLD))
        if max_threshold <= MIN_THRESHOLD:
            return np.zeros(len(slots), dtype=np.int64)
        return (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // (max_threshold - MIN_THRESHOLD)

    def normalize(self, state: CycleState, scores: IntArray) -> IntArray:
        return scores


def build(args: Any) -> ImageLocality:
    return ImageLocality()
