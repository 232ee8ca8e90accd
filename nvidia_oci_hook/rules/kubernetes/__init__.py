"""K8S: Kubernetes manifests, judged for what the kubelet and the node's engine will do with their GPU containers.

Each module is one concern; every rule walks objects, pod templates and containers through kinds/kubernetes/objects
and reports the field itself, which lint attributes to its object and container.
"""
