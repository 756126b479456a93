"""Which runbook steps ask for the typed "Service change" confirmation: a control-host command
that takes a node out of service (or returns it) always does, one that only reads
(``kubectl get node --show-labels``) does not; the rule is deny-by-default, so anything not
read with certainty asks. A node-side command that reboots or powers the node off asks too."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import REPO

from cockpit.runbook.loader import load_runbook
from cockpit.runbook.service import changes_service, reads_only, stops_node

READ_ONLY = [
    "kubectl get node {node_name} --show-labels",
    "kubectl get nodes -o wide",
    "kubectl describe node gpu01",
    "kubectl logs -n gpu-operator ds/nvidia-driver-daemonset",
    "kubectl top node gpu01",
    "kubectl version --client",
    "kubectl api-resources",
    "kubectl api-versions",
    "kubectl explain node.spec.taints",
    "kubectl auth can-i drain node",
    "kubectl -n kube-system get pods",
    "kubectl --context=prod --namespace gpu-operator get pods -A",
    "KUBECONFIG=/etc/kubernetes/admin.conf kubectl get node gpu01",
    "/usr/local/bin/kubectl get node gpu01",
    "kubectl get node gpu01 -o json | jq .metadata.labels",
    "kubectl get pods -A --field-selector spec.nodeName=gpu01 | grep -v Completed | wc -l",
    "kubectl get node gpu01 2>/dev/null || true",
    "kubectl get node gpu01 >/dev/null 2>&1 && echo present",
    "scontrol show node {node_name}",
    "scontrol -o show node gpu01",
    "squeue -h -w {node_name}",
    "sinfo -N -n gpu01",
    "sacct -N gpu01 -S now-1hour",
    "kubectl get node gpu01\nkubectl describe node gpu01",
]

SERVICE_CHANGE = [
    "kubectl cordon {node_name}",
    "kubectl uncordon gpu01",
    "kubectl drain {node_name} --ignore-daemonsets --delete-emptydir-data --timeout=600s",
    "kubectl delete node gpu01",
    "kubectl delete pod -n ml --field-selector spec.nodeName=gpu01",
    "kubectl taint node gpu01 nvidia.com/gpu=upgrade:NoSchedule",
    "kubectl label node gpu01 nvidia.com/gpu.deploy.driver=false",
    "kubectl label node gpu01 skip-upgrade=true --overwrite",
    "kubectl annotate node gpu01 cockpit/window=open",
    'kubectl patch node gpu01 -p \'{"spec":{"unschedulable":true}}\'',
    "kubectl apply -f maintenance.yaml",
    "kubectl edit node gpu01",
    "kubectl auth reconcile -f rbac.yaml",
    "kubectl cluster-info dump --output-directory=/tmp/dump",
    "kubectl --some-flag get drain gpu01",  # an unknown flag could take 'get' as its value
    "kubectl",
    "scontrol update nodename={node_name} state=drain reason={change_id}",
    "scontrol update nodename=gpu01 state=down reason=x",
    "scontrol update nodename={node_name} state=resume",
    "scontrol reboot gpu01",
    "scontrol -o update nodename=gpu01 state=drain",
    "ssh gpu01 systemctl reboot",
    "systemctl reboot",
    "kubectl get node gpu01 && kubectl drain gpu01",
    "kubectl get node gpu01; kubectl cordon gpu01",
    "kubectl get node gpu01 | xargs kubectl cordon",
    "kubectl get node gpu01\nkubectl cordon gpu01",
    "kubectl get node gpu01 \\\n && kubectl cordon gpu01",
    "kubectl get node $(kubectl cordon gpu01)",
    "kubectl get node `kubectl cordon gpu01`",
    "kubectl get node gpu01 > /etc/cron.d/evil",
    "kubectl get node gpu01 'unbalanced",
    "(kubectl cordon gpu01)",
    "kubectl {verb} node gpu01",
    "sh -c 'kubectl get node gpu01'",
    "sudo kubectl cordon gpu01",
    "",
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_a_read_only_command_is_not_a_service_change(command: str) -> None:
    assert reads_only(command)


@pytest.mark.parametrize("command", SERVICE_CHANGE)
def test_anything_else_on_the_control_host_is_a_service_change(command: str) -> None:
    assert not reads_only(command)


@pytest.mark.parametrize(
    ("command", "stops"),
    [
        ("systemctl reboot", True),
        ("sudo -n systemctl reboot", True),
        ("systemctl poweroff", True),
        ("systemctl start reboot.target", True),
        ("shutdown -r now", True),
        ("/sbin/reboot", True),
        ("sync; reboot -f", True),
        ("echo b > /proc/sysrq-trigger", True),
        ("systemctl restart nvidia-persistenced", False),
        ("systemctl status nvidia-fabricmanager", False),
        ("apt-get install -y nvidia-driver-580", False),
        ("cat /proc/sys/kernel/random/boot_id", False),
    ],
)
def test_a_node_side_command_that_stops_the_node(command: str, stops: bool) -> None:
    assert stops_node(command) is stops


def test_the_shipped_runbook_asks_for_cordon_drain_and_resume_not_for_reading() -> None:
    runbook = load_runbook(REPO / "checklists" / "driver-upgrade-r580.toml").runbook
    asks = {
        (stage.id, step.id)
        for stage in runbook.node_stages
        for step in stage.steps
        if changes_service(runbook, stage.id, step.id, "gpu01")
    }
    assert asks == {
        ("drain", "cordon"),
        ("drain", "drain"),
        ("drain", "slurm-drain"),
        ("expand", "uncordon"),
        ("expand", "slurm-resume"),
    }
    assert not changes_service(runbook, "record", "k8s-labels", "gpu01")  # the false prompt of issue 26
    assert not changes_service(runbook, "drain", "cordon", None)  # a window step names no node


def test_a_runbook_marking_drain_read_only_still_asks(tmp_path: Path) -> None:
    text = (REPO / "checklists" / "driver-upgrade-r580.toml").read_text()
    marked = text.replace('run = "kubectl drain', 'read_only = true\nrun = "kubectl drain', 1)
    assert marked != text
    path = tmp_path / "marked.toml"
    path.write_text(marked)
    runbook = load_runbook(path).runbook
    assert changes_service(runbook, "drain", "drain", "gpu01")
