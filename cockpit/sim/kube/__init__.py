"""A simulated Kubernetes cluster with the NVIDIA GPU Operator, served over HTTP on 127.0.0.1.

- :mod:`cockpit.sim.kube.api`: the Kubernetes API emulator (list, get, watch, patch, delete,
  eviction) over a :class:`~cockpit.sim.kube.api.KubeStore`, with a kubeconfig to reach it;
- :mod:`cockpit.sim.kube.objects`: the cluster's objects as the operator creates them;
- :mod:`cockpit.sim.kube.gpu_operator`: the operator's driver upgrade controller, the
  DaemonSet controller and the kubelet, walking k8s-operator-libs' real state sequence
  (per ClusterPolicy, or per NVIDIADriver pool), and an Argo CD that reverts the policy;
- :mod:`cockpit.sim.kube.run_pods`: the kubelet running a one-shot pod (the cockpit's smoke);
- :mod:`cockpit.sim.kube.rules`: the API server's rules (merge patch, selectors, limits).

The backend's tests (tests/kube_cluster.py) and ``cockpit demo --backend kubernetes``
(:mod:`cockpit.session.kube_demo`) run against it. Not :mod:`cockpit.sim.kubernetes`, which is
the SSH simulator's ``kubectl`` on the control host.
"""
