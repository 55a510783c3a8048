"""Inside the broker the order an agent reads is attested by us: each ranking's hash,
signed with the cursor keys under a purpose of its own, in the accessor and the ranked
answer; nothing is hashed, signed or written when every knob is unset (the real
broker: tests/upstream/inside/)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs
from test_ranked_answer import Response, outcome
from test_upstream_parts import FakeBroker

from nautilus_ranking import NautilusSettings
from nautilus_ranking.ranking_hash import ranking_hash
from nautilus_ranking.request.cursor_keys import KEY_FILE, cursor_keys
from nautilus_ranking.upstream import attach_ranking
from nautilus_ranking.upstream.ranked_answer import ranked_answer, recompute_ranking_hash

KEY = "k" * 40


def ranked(settings: NautilusSettings, intent: str) -> Any:
    broker = FakeBroker(["r1"])
    with capture_logs():  # the broker is not installed here: the version warning
        attached = attach_ranking(broker, settings)
    asyncio.run(broker.arequest("agent", intent))
    return attached.ranking("r1")


def test_each_ranking_is_hashed_and_signed_with_the_cursor_keys(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=4, cursor_key=KEY, data_dir=tmp_path)
    disk = ranked(settings, "disk full on orders-db")
    kafka = ranked(settings, "kafka lag")
    assert disk is not None and kafka is not None
    for found in (disk, kafka):
        rows = [(r.source_id, r.row) for r in found.ranking]
        assert found.ranking_hash == ranking_hash(rows)
        assert found.to_dict()["ranking_signature"] == found.ranking_signature
    assert disk.ranking[0].row["id"] == "T-1"
    assert kafka.ranking[0].row["id"] == "RB-1"
    assert disk.ranking_hash != kafka.ranking_hash
    keys = cursor_keys(settings)
    assert keys.verify_ranking_hash(disk.ranking_signature, disk.ranking_hash)
    # another order's hash, another key, and a cursor's tag do not pass
    assert not keys.verify_ranking_hash(disk.ranking_signature, kafka.ranking_hash)
    other = cursor_keys(NautilusSettings(cursor_key="o" * 40))
    assert not other.verify_ranking_hash(disk.ranking_signature, disk.ranking_hash)
    tag = bytes.fromhex(disk.ranking_signature)
    assert not keys.verify(tag, disk.ranking_hash.encode())
    # a rotated key still verifies what the previous one signed
    rotated = cursor_keys(NautilusSettings(cursor_key="n" * 40, cursor_previous_keys=KEY))
    assert rotated.verify_ranking_hash(disk.ranking_signature, disk.ranking_hash)


def test_the_ranked_answer_carries_the_hash_and_its_signature(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=4, cursor_key=KEY, data_dir=tmp_path)
    found = ranked(settings, "disk full on orders-db")
    assert found is not None

    class Answered:
        def model_dump(self, mode: str) -> dict[str, Any]:
            data: dict[str, list[Any]] = {}
            for r in found.ranking:
                data.setdefault(r.source_id, []).append(r.row)
            return {"request_id": "r1", "data": data, "attestation_token": "x"}

    answer = ranked_answer(Answered(), found)
    assert answer["ranking_hash"] == found.ranking_hash
    assert answer["ranking_signature"] == found.ranking_signature
    assert recompute_ranking_hash(answer) == answer["ranking_hash"]
    # the profile is part of it: a ranking said to be another profile's does not match
    answer["ranking"]["profile"] = "support"
    assert recompute_ranking_hash(answer) != found.ranking_hash


def test_a_passthrough_is_neither_hashed_nor_signed_and_writes_no_key(
    tmp_path: Path,
) -> None:
    assert ranked(NautilusSettings(data_dir=tmp_path), "disk full") is None
    assert not (tmp_path / KEY_FILE).exists()
    answer = ranked_answer(Response(), None)
    assert "ranking_hash" not in answer and "ranking_signature" not in answer
    fallback = outcome(None)
    assert "ranking_hash" not in ranked_answer(Response(), fallback)  # never hashed


def test_without_a_key_setting_the_data_dirs_key_file_signs(tmp_path: Path) -> None:
    settings = NautilusSettings(ranking_top_k=4, data_dir=tmp_path)
    found = ranked(settings, "disk full on orders-db")
    assert found is not None and (tmp_path / KEY_FILE).exists()
    assert cursor_keys(settings).verify_ranking_hash(found.ranking_signature, found.ranking_hash)
