"""Artifact records in the store: per-tenant lookups and the expiry sweep's listing."""

from __future__ import annotations

from gateway.store.base import ArtifactKind, ArtifactRecord, Store
from tests.store.support import Run


def artifact(
    artifact_id: str,
    *,
    tenant: str = "t1",
    expires_at: float = 2_000.0,
    kind: ArtifactKind = "upload",
    task_id: str | None = None,
) -> ArtifactRecord:
    return ArtifactRecord(
        artifact_id=artifact_id,
        tenant=tenant,
        kind=kind,
        filename="fox.png",
        mime_type="image/png",
        size_bytes=12_345,
        sha256="ab" * 32,
        blob_key=f"{tenant}/{artifact_id}",
        created_at=1_000.0,
        expires_at=expires_at,
        task_id=task_id,
    )


def test_create_and_get_per_tenant(store: Store, run: Run) -> None:
    upload = artifact("art_1")
    output = artifact("art_2", kind="output", task_id="task_a")
    run(store.create_artifact(upload))
    run(store.create_artifact(output))

    assert run(store.get_artifact("t1", "art_1")) == upload
    assert run(store.get_artifact("t1", "art_2")) == output
    assert run(store.get_artifact("t2", "art_1")) is None  # another tenant's: invisible
    assert run(store.get_artifact("t1", "art_nope")) is None
    assert run(store.get_artifact(None, "art_1")) == upload  # access proved otherwise (signed)
    assert run(store.get_artifact(None, "art_nope")) is None


def test_expired_artifacts_soonest_first_then_deleted(store: Store, run: Run) -> None:
    for i, expires_at in enumerate([1_500.0, 1_200.0, 3_000.0, 1_300.0]):
        run(store.create_artifact(artifact(f"art_{i}", tenant=f"t{i}", expires_at=expires_at)))

    expired = run(store.expired_artifacts(1_500.0, 10))
    assert [a.artifact_id for a in expired] == ["art_1", "art_3", "art_0"]
    assert expired[0] == artifact("art_1", tenant="t1", expires_at=1_200.0)
    assert [a.artifact_id for a in run(store.expired_artifacts(1_500.0, 2))] == ["art_1", "art_3"]
    assert run(store.expired_artifacts(1_000.0, 10)) == []

    run(store.delete_artifact("art_1"))
    run(store.delete_artifact("art_1"))  # idempotent
    assert run(store.get_artifact("t1", "art_1")) is None
    assert [a.artifact_id for a in run(store.expired_artifacts(1_500.0, 10))] == [
        "art_3",
        "art_0",
    ]
    assert run(store.get_artifact("t2", "art_2")) is not None  # not expired, still there
