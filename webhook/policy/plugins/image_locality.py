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
        per_slot = np.zeros(len(snap.alive), dtype=np.int64)
        if total_nodes:
            for image in state.pod.images:
                holder_slots, sizes = snap.image_slots(image)
                if len(holder_slots) == 0:
                    continue
                spread = len(holder_slots) / total_nodes
                # int64(float64(size) * spread): truncation, sizes are non-negative
                np.add.at(per_slot, holder_slots, (sizes * spread).astype(np.int64))
        sums = per_slot[slots]
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
