#!/usr/bin/env python3
"""The WorkflowGroups, target lists and pods that the demo and the benchmarks apply.

  groups.py on-hosts --hosts FILE --name NAME < group.json     the seed sample on target hosts
  groups.py demo-join --kubelet PATH --images DIR < group.json  + setup that joins them as Nodes
  groups.py copies --sample FILE --count N                     N copies, targets of their own
  groups.py contended --sample FILE --count N --targets T      N copies over T shared targets
  groups.py fleet-rollout --sample FILE --targets N --wave W   one group on N targets, in waves
  groups.py fleet-shared --sample FILE --count G --targets T --machines M
                                                               G groups of T targets out of M
  groups.py join --hosts FILE --run R --kubelet PATH --images DIR   bench-join.sh's group
  groups.py targets --hosts FILE --count N --prefix P          a runner targets file
  groups.py targets-of --group FILE                            a group's targets, as a targets file
  groups.py hand-pods --workflows FILE --out DIR               the Workflows' steps as pods

FILE arguments named --hosts hold target-hosts.sh's "name address" lines. `groups.py <command>
--help` lists the arguments.
"""
import argparse
import json
import random
import sys

# Steps on the local cluster's real node (tests/cluster/node.sh labels and taints it so).
REAL_NODE = {
    "nodeSelector": {"workflow.rxg456.cn/node": "real"},
    "tolerations": [{"key": "workflow.rxg456.cn/real-node", "operator": "Exists", "effect": "NoSchedule"}],
}
PAUSE_IMAGE = "localhost/workflow-pause:1.0"


def host_addresses(path):
    return [line.split()[1] for line in open(path) if line.strip()]


def sample_text(path):
    """The seed sample's YAML, without its namespace (the benchmarks apply it in their own)."""
    return "".join(l for l in open(path) if not l.startswith("  namespace:"))


def on_hosts(a):
    group = json.load(sys.stdin)
    for target, address in zip(group["spec"]["targets"], host_addresses(a.hosts)):
        target["ip"] = address
    group["metadata"] = {"name": a.name}
    group["spec"]["podTemplate"] = REAL_NODE
    json.dump(group, sys.stdout)


def demo_join(a):
    group = json.load(sys.stdin)
    images = a.images
    group["spec"]["params"] = {
        "setup": {"packages": ["workflow-test-marker"], "scriptFile": "/etc/workflow/scripts/configure.sh",
                  "join": {"kubelet": a.kubelet, "sandboxImage": PAUSE_IMAGE,
                           "images": [images + "/pause.tar", images + "/busybox.tar"],
                           "nodeLabels": ["workflow.rxg456.cn/joined-by=demo"]}},
        "post-check": {"packages": ["workflow-test-marker"], "files": ["/etc/node-configured"],
                       "commands": ["workflow-test-marker"], "nodeReady": True},
    }
    group["spec"]["podTemplates"] = {"setup": {
        "serviceAccountName": "workflow-node-joiner",
        "volumes": [{"name": "scripts", "configMap": {"name": "node-scripts"}}],
        "volumeMounts": [{"name": "scripts", "mountPath": "/etc/workflow/scripts", "readOnly": True}],
    }, "post-check": {"serviceAccountName": "workflow-node-joiner"}}
    json.dump(group, sys.stdout)


def copies(a):
    # Copy i on three targets of its own, 10.<i/250>.<i%250>.1-3: no group waits for another's lock.
    sample = sample_text(a.sample)
    for i in range(a.count):
        print("---")
        print(sample.replace("name: workflowgroup-sample", f"name: group-{i:04d}")
                    .replace("ip: 192.168.1.10", f"ip: 10.{i // 250}.{i % 250}."))


def contended(a):
    # Copy i on the one target shared-<i % targets>: the groups on one target take turns.
    head, _ = sample_text(a.sample).split("  targets:\n", 1)
    for i in range(a.count):
        t = i % a.targets
        print("---")
        print(head.replace("name: workflowgroup-sample", f"name: contended-{i:04d}")
              + f"  targets:\n  - name: shared-{t}\n    ip: 10.250.0.{t + 1}\n    role: Worker\n")


def wide(a):
    # One copy of the seed sample on `targets` targets of its own, 10.200+<i/62500>.<i/250%250>.<i%250+1>.
    head, _ = sample_text(a.sample).split("  targets:\n", 1)
    lines = [head.replace("name: workflowgroup-sample", "name: wide"), "  targets:\n"]
    for i in range(a.targets):
        ip = f"10.{200 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"
        lines.append(f"  - name: wide-{i:05d}\n    ip: {ip}\n    role: Worker\n")
    print("".join(lines))


def fleet_target(i):
    """Machine i of the fleet: 10.<100 + i/62500>.<i/250%250>.<i%250+1>. Data only: nothing connects."""
    return f"fleet-{i:05d}", f"10.{100 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"


def fleet_group(sample, name, machines, extra=""):
    head, _ = sample_text(sample).split("  targets:\n", 1)
    lines = [head.replace("name: workflowgroup-sample", f"name: {name}"), extra, "  targets:\n"]
    for i in machines:
        target, ip = fleet_target(i)
        lines.append(f"  - name: {target}\n    ip: {ip}\n    role: Worker\n")
    return "".join(lines)


def fleet_rollout(a):
    # The seed sample on `targets` machines in rolling waves.
    rollout = f"  rollout:\n    waveSize: \"{a.wave}\"\n"
    print(fleet_group(a.sample, "rollout", range(a.targets), rollout))
    json.dump({"rollout": [fleet_target(i)[1] for i in range(a.targets)]}, open(a.targets_out, "w"))


def fleet_shared(a):
    # `count` groups of `targets` machines each, drawn at random (seeded: every run the same) from
    # `machines`: groups that share one take turns.
    rng = random.Random(a.seed)
    chosen = {}
    for g in range(a.count):
        name = f"shared-{g:03d}"
        machines = sorted(rng.sample(range(a.machines), a.targets))
        chosen[name] = [fleet_target(i)[1] for i in machines]
        print("---")
        print(fleet_group(a.sample, name, machines))
    json.dump(chosen, open(a.targets_out, "w"))


def join(a):
    joiner = {"serviceAccountName": "workflow-node-joiner"}
    print(json.dumps({
        "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "WorkflowGroup",
        "metadata": {"name": "expand"},
        "spec": {
            "type": "cluster-expansion", "clusterName": "local",
            "workflowSteps": ["pre-check", "setup", "post-check"],
            "targets": [{"name": f"bench-{a.run}-{i + 1}", "ip": ip, "role": "Worker"}
                        for i, ip in enumerate(host_addresses(a.hosts))],
            "params": {
                "setup": {"join": {"kubelet": a.kubelet, "sandboxImage": PAUSE_IMAGE,
                                   "images": [a.images + "/pause.tar"],
                                   "nodeLabels": ["workflow.rxg456.cn/joined-by=bench-join"]}},
                "post-check": {"nodeReady": True},
            },
            "podTemplate": REAL_NODE,
            "podTemplates": {"setup": joiner, "post-check": joiner},
        },
    }))


def targets(a):
    # Round robin over the hosts.
    addresses = host_addresses(a.hosts)
    print(json.dumps([{"name": f"{a.prefix}-{i}", "ip": addresses[i % len(addresses)], "role": "Worker"}
                      for i in range(a.count)]))


def targets_of(a):
    group = json.load(open(a.group))
    print(json.dumps([{k: t[k] for k in ("name", "ip", "role")} for t in group["spec"]["targets"]]))


def hand_pods(a):
    # Each step of the Workflows, in the order of the sample's types, as the pod a script would
    # run by hand: the step image, its command and environment, the targets file of the
    # ConfigMap hand-targets and the Secret workflow-ssh. Written to <out>/step-<n>.json, named
    # STEP-<n>; prints how many.
    order = ["pre-check", "setup", "post-check"]
    workflows = sorted(json.load(open(a.workflows))["items"], key=lambda w: order.index(w["spec"]["type"]))
    n = 0
    for wf in workflows:
        for step in wf["spec"]["steps"]:
            n += 1
            env = [{"name": e["name"], "value": e["value"]} for e in step.get("env", [])]
            env.append({"name": "WORKFLOW_TARGETS_FILE", "value": "/etc/workflow/targets.json"})
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "STEP-%d" % n},
                   "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, **REAL_NODE,
                            "volumes": [{"name": "targets", "configMap": {"name": "hand-targets"}},
                                        {"name": "ssh", "secret": {"secretName": "workflow-ssh", "defaultMode": 288}}],
                            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                                "fsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
                            "containers": [{"name": "step", "image": "workflow-step:dev",
                                            "command": ["/bin/sh", "-c", step["command"]], "env": env,
                                            "volumeMounts": [{"name": "targets", "mountPath": "/etc/workflow", "readOnly": True},
                                                             {"name": "ssh", "mountPath": "/etc/workflow/ssh", "readOnly": True}],
                                            "securityContext": {"allowPrivilegeEscalation": False,
                                                                "capabilities": {"drop": ["ALL"]}},
                                            "terminationMessagePolicy": "FallbackToLogsOnError"}]}}
            with open("%s/step-%d.json" % (a.out, n), "w") as out:
                json.dump(pod, out)
    print(n)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    hosts_help = "file: target-hosts.sh's \"name address\" lines"

    p = commands.add_parser("on-hosts", help="a group (JSON on stdin) on target hosts and the real node")
    p.add_argument("--hosts", required=True, help=hosts_help + ", one per target in order")
    p.add_argument("--name", required=True, help="the group's name")
    p.set_defaults(handler=on_hosts)

    p = commands.add_parser("demo-join", help="a group (JSON on stdin) whose setup joins its hosts as Nodes")
    p.add_argument("--kubelet", required=True, help="the kubelet binary the hosts run")
    p.add_argument("--images", required=True, help="directory of pause.tar and busybox.tar")
    p.set_defaults(handler=demo_join)

    p = commands.add_parser("copies", help="copies of the seed sample, each on targets of its own (YAML)")
    p.add_argument("--sample", required=True, help="the seed sample's YAML file")
    p.add_argument("--count", type=int, required=True, help="how many copies")
    p.set_defaults(handler=copies)

    p = commands.add_parser("contended", help="copies of the seed sample over a few shared targets (YAML)")
    p.add_argument("--sample", required=True, help="the seed sample's YAML file")
    p.add_argument("--count", type=int, required=True, help="how many copies")
    p.add_argument("--targets", type=int, required=True, help="how many shared targets")
    p.set_defaults(handler=contended)

    p = commands.add_parser("wide", help="one copy of the seed sample on many targets of its own (YAML)")
    p.add_argument("--sample", required=True, help="the seed sample's YAML file")
    p.add_argument("--targets", type=int, required=True, help="how many targets")
    p.set_defaults(handler=wide)

    p = commands.add_parser("fleet-rollout", help="one copy of the seed sample on a fleet, in rolling waves (YAML)")
    p.add_argument("--sample", required=True, help="the seed sample's YAML file")
    p.add_argument("--targets", type=int, required=True, help="how many machines")
    p.add_argument("--wave", required=True, help="spec.rollout.waveSize: a count or a percentage")
    p.add_argument("--targets-out", required=True, help="file to write the group's target addresses to (JSON)")
    p.set_defaults(handler=fleet_rollout)

    p = commands.add_parser("fleet-shared", help="copies of the seed sample on machines drawn from a fleet (YAML)")
    p.add_argument("--sample", required=True, help="the seed sample's YAML file")
    p.add_argument("--count", type=int, required=True, help="how many groups")
    p.add_argument("--targets", type=int, required=True, help="how many machines each")
    p.add_argument("--machines", type=int, required=True, help="how many machines in the fleet")
    p.add_argument("--seed", type=int, default=1, help="the draw's seed")
    p.add_argument("--targets-out", required=True, help="file to write each group's target addresses to (JSON)")
    p.set_defaults(handler=fleet_shared)

    p = commands.add_parser("join", help="a cluster-expansion group that joins the hosts as Nodes")
    p.add_argument("--hosts", required=True, help=hosts_help)
    p.add_argument("--run", required=True, help="the run's number, in the targets' names")
    p.add_argument("--kubelet", required=True, help="the kubelet binary the hosts run")
    p.add_argument("--images", required=True, help="directory of pause.tar")
    p.set_defaults(handler=join)

    p = commands.add_parser("targets", help="a runner targets file, round robin over the hosts")
    p.add_argument("--hosts", required=True, help=hosts_help)
    p.add_argument("--count", type=int, required=True, help="how many targets")
    p.add_argument("--prefix", required=True, help="targets are named <prefix>-<i>")
    p.set_defaults(handler=targets)

    p = commands.add_parser("targets-of", help="a group's targets (name, ip, role), as a runner targets file")
    p.add_argument("--group", required=True, help="the group's JSON file")
    p.set_defaults(handler=targets_of)

    p = commands.add_parser("hand-pods", help="the steps of Workflows as pods of their own")
    p.add_argument("--workflows", required=True, help="file: kubectl get wf -o json")
    p.add_argument("--out", required=True, help="directory to write step-<n>.json into")
    p.set_defaults(handler=hand_pods)

    a = parser.parse_args()
    a.handler(a)


if __name__ == "__main__":
    main()
