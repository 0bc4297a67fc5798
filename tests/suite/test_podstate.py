"""Fail-fast wait logic: the state and reason read from real-shaped pod and event objects."""

from gpushare_conformance.fixtures.framework import podstate
from gpushare_conformance.fixtures.framework.podstate import format_events, pod_state, scheduling_message, sort_events

UNSCHEDULABLE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "not-integer", "namespace": "gs-x"},
    "spec": {"containers": [{"name": "share", "image": "img"}], "schedulerName": "default-scheduler"},
    "status": {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": "2026-01-10T10:00:01Z",
                "message": "0/1 nodes are available: 1 gpushare: N/M must be an integer: aliyun.com/gpu-mem=3, "
                "aliyun.com/gpu-count=2 gives 1.50 GiB per card. preemption: 0/1 nodes are available.",
            }
        ],
        "qosClass": "BestEffort",
    },
}

FAILED_SCHEDULING_EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "not-integer.17f", "namespace": "gs-x", "creationTimestamp": "2026-01-10T10:00:01Z"},
    "involvedObject": {"kind": "Pod", "name": "not-integer", "namespace": "gs-x"},
    "reason": "FailedScheduling",
    "type": "Warning",
    "message": "0/1 nodes are available: 1 gpushare: N/M must be an integer.",
    "firstTimestamp": None,
    "lastTimestamp": None,
    "eventTime": "2026-01-10T10:00:01.123456Z",
    "reportingComponent": "default-scheduler",
}


def test_unschedulable_pod_ends_the_wait_with_the_scheduler_message():
    state = pod_state(UNSCHEDULABLE_POD)
    assert state.kind == podstate.UNSCHEDULABLE and state.final
    assert "N/M must be an integer" in state.reason


def test_unschedulable_from_events_when_condition_not_written_yet():
    pod = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    state = pod_state(pod, [FAILED_SCHEDULING_EVENT])
    assert state.kind == podstate.UNSCHEDULABLE
    assert state.reason == "0/1 nodes are available: 1 gpushare: N/M must be an integer."


def test_a_refused_bind_seen_in_events_before_the_condition_is_retried_not_final():
    """The scheduler records FailedScheduling before it writes PodScheduled: a bind the
    stack refused is a scheduler error (retried), not a filter's verdict."""
    pod = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    event = dict(FAILED_SCHEDULING_EVENT, message="hami-like: node vm is locked by pod ns/twin-0-1 since 17:55:56")
    state = pod_state(pod, [event])
    assert state.kind == podstate.SCHEDULER_ERROR and not state.final
    assert "is locked by pod ns/twin-0-1" in state.reason


def test_old_failed_scheduling_event_does_not_mark_a_bound_pod():
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}}
    assert pod_state(pod, [FAILED_SCHEDULING_EVENT]).kind == podstate.PENDING


def test_running_and_ready():
    pod = {
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "share",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-01-10T10:00:05Z"}},
                }
            ],
        },
    }
    assert pod_state(pod).kind == podstate.RUNNING


def test_image_pull_failure_is_stuck_with_message():
    pod = {
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "share",
                    "ready": False,
                    "restartCount": 0,
                    "image": "localhost/x:dev",
                    "state": {
                        "waiting": {
                            "reason": "ErrImageNeverPull",
                            "message": 'Container image "localhost/x:dev" is not present with pull policy of Never',
                        }
                    },
                }
            ],
        },
    }
    state = pod_state(pod)
    assert state.kind == podstate.STUCK and state.final
    assert "ErrImageNeverPull" in state.reason and "not present" in state.reason


def test_admission_failure_from_device_plugin_gives_status_reason():
    pod = {
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Failed",
            "reason": "UnexpectedAdmissionError",
            "message": "Pod was rejected: Allocate failed due to no pod with 4 GiB pending on node n1",
        },
    }
    state = pod_state(pod)
    assert state.kind == podstate.FAILED
    assert state.reason.startswith("UnexpectedAdmissionError: Pod was rejected")


def test_failed_container_exit_code_is_in_the_reason():
    pod = {
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "tensorflow-mnist-multigpu",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 2, "reason": "Error", "message": "CUDA_ERROR_OUT_OF_MEMORY"}},
                }
            ],
        },
    }
    reason = pod_state(pod).reason
    assert "exit code 2" in reason and "CUDA_ERROR_OUT_OF_MEMORY" in reason


def test_failed_without_any_reason_still_says_so():
    assert pod_state({"status": {"phase": "Failed"}}).reason == "pod phase Failed (no reason recorded)"


def test_failed_falls_back_to_the_telling_event():
    ev = dict(FAILED_SCHEDULING_EVENT, reason="FailedCreatePodSandBox", message="failed to setup network")
    assert "FailedCreatePodSandBox: failed to setup network" in pod_state({"status": {"phase": "Failed"}}, [ev]).reason


def test_succeeded_is_final():
    assert pod_state({"status": {"phase": "Succeeded"}}).kind == podstate.SUCCEEDED


def test_pending_waiting_to_be_scheduled_is_not_final():
    state = pod_state({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}})
    assert state.kind == podstate.PENDING and not state.final


def test_events_sorted_by_their_latest_time():
    older = dict(FAILED_SCHEDULING_EVENT, eventTime=None, lastTimestamp="2026-01-10T09:00:00Z", message="older")
    series = dict(
        FAILED_SCHEDULING_EVENT,
        series={"count": 3, "lastObservedTime": "2026-01-10T11:00:00.000000Z"},
        message="newest",
    )
    ordered = sort_events([series, FAILED_SCHEDULING_EVENT, older])
    assert [e["message"] for e in ordered] == ["older", FAILED_SCHEDULING_EVENT["message"], "newest"]
    text = format_events([series, older])
    assert text.splitlines()[0].endswith("older") and "Pod/not-integer" in text


def test_scheduling_message_prefers_the_condition():
    ev = dict(FAILED_SCHEDULING_EVENT, message="event text")
    assert scheduling_message(UNSCHEDULABLE_POD, [ev]).startswith("0/1 nodes are available: 1 gpushare: N/M")


def test_a_scheduler_error_is_retried_not_final():
    """A bind the stack refused (HAMi's node lock) or an extender error: the scheduler
    tries again, so a wait for Running goes on; a refusal wait takes it as rejected."""
    pod = {
        "metadata": {"name": "p"},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulerError",
                    "message": "hami-like: node vm is locked by pod ns/burst-2",
                }
            ],
        },
    }
    state = pod_state(pod)
    assert state.kind == podstate.SCHEDULER_ERROR and not state.final
    assert state.reason == "hami-like: node vm is locked by pod ns/burst-2"
