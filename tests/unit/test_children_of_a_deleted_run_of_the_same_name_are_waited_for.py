"""A child object left by a deleted TuningRun of the same name (GitOps deletes a run and applies it
again; the garbage collector removes the old run's children seconds later) is waited for: only when
its controlling owner is a TuningRun of this name with another uid and it carries the labels this
run's child would. A user's object, or one of another owner, kind or name, is not."""

from enginewright.controller.children import RunRef, labels, left_by_a_deleted_run, owner_uid
from enginewright.controller.status import condition, is_true, waiting_on_cluster

RUN = RunRef("gitops", "ns", "uid-new")
WANTED = labels(RUN, "cpu", component="cache")
EARLIER = RunRef("gitops", "ns", "uid-old").owner_reference()


def test_the_child_of_the_deleted_run_of_this_name_is_waited_for():
    assert left_by_a_deleted_run({"ownerReferences": [EARLIER], "labels": dict(WANTED)}, RUN, WANTED)
    assert owner_uid({"ownerReferences": [EARLIER]}) == "uid-old"


def test_this_runs_own_a_users_and_other_owners_children_are_not():
    assert not left_by_a_deleted_run({"ownerReferences": [RUN.owner_reference()], "labels": dict(WANTED)}, RUN, WANTED)
    assert not left_by_a_deleted_run({"labels": dict(WANTED)}, RUN, WANTED)  # a user's, labels copied
    assert not left_by_a_deleted_run({"ownerReferences": [EARLIER], "labels": {}}, RUN, WANTED)
    for change in ({"name": "other"}, {"kind": "Deployment"}, {"apiVersion": "apps/v1"}, {"controller": False}):
        owner = {**EARLIER, **change}
        assert not left_by_a_deleted_run({"ownerReferences": [owner], "labels": dict(WANTED)}, RUN, WANTED), change


def test_waiting_keeps_the_run_reconciling_not_stalled():
    previous = {"phase": "Running", "targets": [{"gpuType": "cpu", "stage": "probing"}]}
    status = waiting_on_cluster(previous, 1, "DeletedRunsChildren", "waiting for the garbage collector")
    assert is_true(status, "Reconciling") and not is_true(status, "Stalled") and not is_true(status, "Ready")
    assert condition(status, "Reconciling")["reason"] == "DeletedRunsChildren"
    assert status["targets"] == previous["targets"] and status["phase"] == "Running"


def test_a_deleted_runs_config_map_is_adopted_unless_it_is_being_deleted():
    from enginewright.controller.cache import existing_config_map

    leftover = {"ownerReferences": [EARLIER], "labels": dict(WANTED), "resourceVersion": "7"}
    assert existing_config_map(leftover, RUN, WANTED) == "deleted run's"
    going = {**leftover, "deletionTimestamp": "2026-12-02T16:00:00Z"}
    assert existing_config_map(going, RUN, WANTED) == "being deleted"
    assert (
        existing_config_map({"ownerReferences": [RUN.owner_reference()], "labels": dict(WANTED)}, RUN, WANTED) == "ours"
    )
    assert existing_config_map({"labels": dict(WANTED)}, RUN, WANTED) == "not ours"  # a user's: NameTaken
