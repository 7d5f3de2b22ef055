#!/usr/bin/env python3
"""Free TCP ports, for the scripts (scripts/lib.sh's free_ports and port_free).

  free_ports.py pick --count 4 [--address 127.0.0.1]   4 distinct free ports, on one line
  free_ports.py check --port 8080                      exit status 0 when 8080 is free
"""
import argparse
import socket
import sys


def pick(a):
    # All are held open until all are picked, so they differ.
    socks = []
    for _ in range(a.count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((a.address, 0))
        socks.append(s)
    print(" ".join(str(s.getsockname()[1]) for s in socks))
    for s in socks:
        s.close()


def check(a):
    try:
        socket.socket().bind(("", a.port))
    except OSError:
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("pick", help="distinct free ports, on one line")
    p.add_argument("--count", type=int, default=1, help="how many ports")
    p.add_argument("--address", default="127.0.0.1", help="the address they are free on")
    p.set_defaults(run=pick)
    p = commands.add_parser("check", help="exit status 0 when the port can be bound on every address")
    p.add_argument("--port", type=int, required=True, help="the port")
    p.set_defaults(run=check)
    a = parser.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
