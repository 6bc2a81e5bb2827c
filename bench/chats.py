"""Synthetic multi-tenant chat traffic for the live benches: filler text, and
conversations whose every turn resends the whole history."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

_VOCABULARY = (
    "account invoice refund shipment order customer ticket policy warranty return label "
    "carrier delivery address payment card balance credit plan upgrade downgrade seat user "
    "admin export report dashboard alert threshold region language timezone currency tax "
    "the a of to and in for on with by is are be must may should never always within days"
)
WORDS = _VOCABULARY.split()


def filler_text(seed: str, words: int) -> str:
    """`words` words of support-desk sentences, the same for the same seed."""
    rng = random.Random(seed)
    sentences = []
    while words > 0:
        n = min(words, rng.randint(8, 15))
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
        words -= n
    return " ".join(sentences)


@dataclass(frozen=True)
class Conversation:
    tenant: int
    turns: list[list[dict[str, str]]]  # the messages sent at each turn


def conversations(
    tenants: int, users: int, turns: int, words: tuple[int, int, int]
) -> list[Conversation]:
    """Each tenant's `users` conversations of `turns` turns, tenants interleaved
    (tenant 0's first user, tenant 1's, ...). `words`: the tenant's system
    prompt, each question and each answer, in words."""
    system_words, question_words, answer_words = words
    result = []
    for user, tenant in itertools.product(range(users), range(tenants)):
        system = f"You are the assistant of tenant {tenant}. " + filler_text(
            f"system-{tenant}", system_words
        )
        history = [{"role": "system", "content": system}]
        sent = []
        for turn in range(turns):
            question = filler_text(f"q-{tenant}-{user}-{turn}", question_words)
            history = [*history, {"role": "user", "content": question}]
            sent.append(history)
            answer = filler_text(f"a-{tenant}-{user}-{turn}", answer_words)
            history = [*history, {"role": "assistant", "content": answer}]
        result.append(Conversation(tenant, sent))
    return result
