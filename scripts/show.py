#!/usr/bin/env python3
"""What the demo and image-rootfs.sh print from JSON.

  curl .../plugins | show.py plugins            the operator's loaded workflow types
  show.py group --file group.json               a group's targets and params
  kubectl get wf -o json | show.py steps        what each step of the Workflows reported
  show.py entrypoint --config config.json       an OCI runtime bundle's entrypoint
"""
import argparse
import json
import sys


def plugins(_):
    for t in json.load(sys.stdin)["types"]:
        print("  %-12s %-8s sha256:%s" % (t["typeName"], t["version"], t["digest"][:12]))


def group(a):
    g = json.load(open(a.file))
    print("    targets:", ", ".join(t["name"] + " " + t["ip"] for t in g["spec"]["targets"]))
    print("    params:", json.dumps(g["spec"]["params"]))


def steps(_):
    for wf in sorted(json.load(sys.stdin)["items"], key=lambda w: w["metadata"]["creationTimestamp"]):
        for step, detail in (wf.get("status", {}).get("stepDetails") or {}).items():
            print("  %s/%s:" % (wf["spec"]["type"], step))
            for line in (detail.get("message") or "").splitlines():
                print("      " + line)


def entrypoint(a):
    # process.args of the runtime configuration are the image's entrypoint then its cmd.
    print(json.load(open(a.config))["process"]["args"][0])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("plugins", help="the operator's /plugins (JSON on stdin), one type a line")
    p.set_defaults(run=plugins)
    p = commands.add_parser("group", help="a group's targets and params")
    p.add_argument("--file", required=True, help="the group's JSON file")
    p.set_defaults(run=group)
    p = commands.add_parser("steps", help="each step's message, from a Workflow list (JSON on stdin)")
    p.set_defaults(run=steps)
    p = commands.add_parser("entrypoint", help="the first of process.args of an OCI runtime configuration")
    p.add_argument("--config", required=True, help="the bundle's config.json")
    p.set_defaults(run=entrypoint)
    a = parser.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
