#!/usr/bin/env python3
"""The sandbox a graded build or test runs in (./lab check, ./lab grade; docs/grading.md).

  sandbox.py run [--rw PATH]... [--hide PATH]... -- COMMAND...   runs COMMAND in a sandbox, exits with its code
  sandbox.py probe                                               exit 0 when this machine can make one

A sandbox is Linux namespaces made by util-linux's `unshare` (no root needed where the kernel lets users
make namespaces): its own PID namespace (when COMMAND ends, every process it started is killed; it sees no
process outside), no network (a loopback only), its own mounts: every file system read-only but the --rw
paths, a private empty /tmp, /var/tmp and /dev/shm, each --hide path covered by an empty read-only folder
(the grader's output folder, the run's records, solutions/), no capability left (the mounts cannot be undone
from inside), and limits: no core files, files of at most SPEEDLABS_SANDBOX_FILE_MB (4096) MiB, data memory
of at most SPEEDLABS_SANDBOX_MEMORY_MB (3/4 of this machine's memory).

Where the kernel refuses namespaces (a container without user namespaces), the sandbox cannot be made and
grading stops with a message, never grading unsandboxed in silence; SPEEDLABS_SANDBOX=off is the documented
opt-out (a machine that grades only trusted code): the command then runs bare, and the driver says so.
Standard library only.
"""
import ctypes
import fcntl
import json
import os
import resource
import socket
import struct
import subprocess
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
         "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
SKIPPED = ("/proc", "/sys", "/dev/pts", "/dev/mqueue")


def disabled():
    return os.environ.get("SPEEDLABS_SANDBOX", "") == "off"


def wrap(command, writable=(), hidden=()):
    """The argv that runs @p command in a sandbox (see the module's comment); @p command itself when the
    sandbox is switched off."""
    if disabled():
        return list(command)
    spec = json.dumps({"rw": [os.path.realpath(p) for p in writable],
                       "hide": [os.path.realpath(p) for p in hidden]})
    return ["unshare", "--map-root-user", "--pid", "--net", "--mount", "--fork", "--kill-child", "--mount-proc",
            "--", sys.executable, os.path.abspath(__file__), "inner", spec, "--", *command]


def mount(source, target, kind, flags, data=None):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(source and source.encode(), target.encode(), kind and kind.encode(), ctypes.c_ulong(flags),
                  data and data.encode()) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {kind or 'bind'} on {target}: {os.strerror(error)}")


def unescape(path):
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mounts():
    """(mount point, flags) of every mount this namespace sees, from /proc/self/mountinfo."""
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            point, options = unescape(fields[4]), fields[5].split(",")
            yield point, sum(FLAGS.get(o, 0) for o in options)


def under(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def loopback_up():
    with socket.socket() as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", 0x1 | 0x40, b"\0" * 14))  # SIOCSIFFLAGS: UP, RUNNING


def inner(spec, command):
    """Inside the new namespaces (as their root): the mounts, the limits, then COMMAND without capabilities;
    returns COMMAND's exit status."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    held = {path: os.open(path, os.O_PATH) for path in spec["rw"]}  # an --rw folder under /tmp comes back below
    for path in spec["rw"]:
        mount(path, path, None, MS_BIND | MS_REC)
    for point, flags in list(mounts()):
        if any(under(point, s) for s in SKIPPED) or any(under(point, p) for p in spec["rw"]):
            continue
        if point == "/dev":
            continue  # device nodes are written through, never stored: /dev/null stays usable
        mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
    private = ("/tmp", "/var/tmp", "/dev/shm")
    # Folders under /tmp that come back below, read-only: the whole top folder of /tmp that holds the folder the
    # command runs in (a release made there: its build folders and .venv with it), and those that hold the
    # libtorch CMAKE_PREFIX_PATH or Torch_DIR names (a release built against a checkout's .venv under /tmp:
    # CMake and ninja read its files, and a build that cannot see them configures again and finds no libtorch).
    cwd = os.getcwd()
    named = [cwd] + [p for var in ("CMAKE_PREFIX_PATH", "Torch_DIR")
                     for p in os.environ.get(var, "").replace(";", ":").split(":") if os.path.isabs(p)]
    trees = []
    for path in named:
        top = next((os.path.join(p, os.path.relpath(path, p).split("/")[0]) for p in private if under(path, p)), None)
        if top and top not in private and top not in trees and os.path.isdir(top):
            trees.append(top)
    # each with the flags of the mount that holds it (a remount inside a user namespace must keep them)
    kept = [(tree, os.open(tree, os.O_PATH),
             max(((len(point), flags) for point, flags in mounts() if under(tree, point)), default=(0, 0))[1])
            for tree in trees]
    for path in private:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=2g,mode=1777")
    for tree, fd, flags in kept:
        os.makedirs(tree, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", tree, None, MS_BIND | MS_REC)
        mount(None, tree, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        os.close(fd)
    os.chdir(cwd)
    for path, fd in held.items():
        if not os.path.isdir(path) or any(under(path, tree) for tree in trees):
            os.makedirs(path, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    for path in spec["hide"]:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
        elif os.path.exists(path):
            mount("/dev/null", path, None, MS_BIND)
    loopback_up()  # MPI's workers of one test talk over it
    memory = int(os.environ.get("SPEEDLABS_SANDBOX_MEMORY_MB", "0")) << 20 or \
        os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, ((int(os.environ.get("SPEEDLABS_SANDBOX_FILE_MB", "4096")) << 20),) * 2)
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    child = os.fork()
    if child == 0:
        os.execvp("setpriv", ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", *command])
    # This process stays the namespace's init (PID 1), so COMMAND is an ordinary process: a signal it sends
    # itself (raise(SIGSEGV), abort()) acts as it would outside, where init would ignore it. Init reaps every
    # orphan and, when COMMAND ends, ends with its status (128 + N for signal N), taking every process left.
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


def probe():
    """None when a sandbox can be made here (or it is switched off), else why not."""
    if disabled():
        return None
    try:
        done = subprocess.run(wrap(["true"]), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


def main(argv):
    if len(argv) >= 4 and argv[1] == "inner" and argv[3] == "--":
        try:
            return inner(json.loads(argv[2]), argv[4:])
        except OSError as error:
            print(f"[lab] error: the sandbox could not be set up: {error}", file=sys.stderr)
            return 126
    if len(argv) == 2 and argv[1] == "probe":
        why = probe()
        if why:
            print(f"[lab] error: cannot make the sandbox graded code runs in ({why}): this kernel or container "
                  "refuses Linux namespaces to this user. Grade where `unshare --map-root-user --pid --net --mount "
                  "--fork true` works, or, for trusted code only, set SPEEDLABS_SANDBOX=off (docs/grading.md)",
                  file=sys.stderr)
            return 2
        return 0
    if len(argv) >= 3 and argv[1] == "run":
        writable, hidden, rest = [], [], argv[2:]
        while rest and rest[0] in ("--rw", "--hide") and len(rest) >= 2:
            (writable if rest[0] == "--rw" else hidden).append(rest[1])
            rest = rest[2:]
        if rest and rest[0] == "--" and len(rest) > 1:
            os.execvp(wrap(rest[1:], writable, hidden)[0], wrap(rest[1:], writable, hidden))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
