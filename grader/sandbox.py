#!/usr/bin/env python3
"""The sandbox a graded build or test runs in (./lab check, ./lab grade; docs/grading.md, "Threat model").

  sandbox.py run [--rw PATH]... [--hide PATH]... -- COMMAND...   runs COMMAND in a sandbox, exits with its code
  sandbox.py probe                                               exit 0 when this machine can make one
  sandbox.py phony-references BUILD_NINJA                        the earlier labs' reference objects made phony

Least privilege, an allowlist, limits. The sandbox is bubblewrap's (`bwrap`, Debian's package: a small,
audited setuid-free tool that Flatpak uses, so its mounts are not ours to get wrong):
- **Unprivileged.** A grader running as root hands the command to uid/gid 65534 (nobody, which owns nothing on
  the host) with every capability dropped and no_new_privs; a user grading as themselves stays themselves.
  In the sandbox: its own PID, IPC, UTS, cgroup and network namespaces (a loopback only; MPI's workers of one
  test talk over it), a fresh /proc (its /proc/sys read-only), a read-only /sys, bubblewrap's minimal /dev,
  and no nested user namespace.
- **Allowlist.** Only these are mounted, read-only: the system's folders (/usr, /etc, /opt and the /lib, /bin
  links), the checkout's sources a build needs (ALLOWED_SOURCES), its .venv, the libtorch CMAKE_PREFIX_PATH or
  Torch_DIR names, the data folder; the reference build tree only for a program of its own (a timed or raced
  side of the reference's, never graded code). Nothing else of the machine is there: not .git, not solutions/
  (a lab's build needs none: phony_references), not the kept runs, no other clone. --hide PATH
  covers a path inside the allowed ones (a run's records, a lab's reference objects); --rw PATH is mounted
  writable (it must belong to the sandbox's user). /tmp, /var/tmp and /dev/shm are private, size-capped tmpfs.
- **A lab's own tree.** With SPEEDLABS_SANDBOX_TREE (the graded build tree) and SPEEDLABS_SANDBOX_COPIES set, a
  program that lies in COPIES/labNN/ (a graded program of lab NN), or any command given SPEEDLABS_SANDBOX_LAB=NN
  (lab NN's build), runs with COPIES/labNN mounted in the tree's place: the copy lab NN's code was built in, so
  no lab's code can touch another's.
- **Limits** (each a variable): at most SPEEDLABS_SANDBOX_PROCESSES (512) processes and threads in one sandbox
  (each has a user namespace of its own, which the kernel counts apart), SPEEDLABS_SANDBOX_MEMORY_MB of data
  memory a process (3/8 of this machine's memory less the tmpfs: two tests run at once), files of at most
  SPEEDLABS_SANDBOX_FILE_MB (2048) MiB, no core files, and where a sandbox has writable folders (a build) at most
  SPEEDLABS_SANDBOX_WRITE_MB (4096) MiB more in them than they held at its start: read every WRITE_POLL_S
  seconds, so a sandbox may pass it by what it writes in that time before it is stopped (exit WROTE_TOO_MUCH).

- **Nothing outlives it.** The process a grader starts stays, as the subreaper of bwrap and all under it, until
  bwrap ends; a stop signal, or the death of the grader that started it, kills every process under it first.

Where bwrap is missing or the kernel refuses user namespaces, the sandbox cannot be made and grading stops with
a message (exit 2), never grading unsandboxed in silence; SPEEDLABS_SANDBOX=off is the documented opt-out (a
machine that grades only trusted code): the command then runs bare, and the driver says so.
Standard library only.
"""
import ctypes
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SANDBOX_UID = 65534  # nobody: owns nothing on the host
# The checkout's entries a graded build or test reads; everything else of it (.git, solutions/, docs/ with the
# kept runs, reference/, .cache/, other build trees, the grade's output) is simply not there.
ALLOWED_SOURCES = ("CMakeLists.txt", "CMakePresets.json", "cmake", "common", "datasets", "docs/CMakeLists.txt", "labs",
                   "tests", ".venv")
SYSTEM = ("/usr", "/etc", "/opt", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
TMPFS_MB = {"/tmp": 1024, "/var/tmp": 256, "/dev/shm": 512}
STAGE = "/run/speedlabs-sandbox"  # where a root grader's private mount namespace stages the sources
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
WRITE_POLL_S = 0.5  # how often the writable folders' size is read
WROTE_TOO_MUCH = 120  # the exit code of a sandbox stopped for writing past SPEEDLABS_SANDBOX_WRITE_MB
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36  # prctl(2)


def disabled():
    return os.environ.get("SPEEDLABS_SANDBOX", "") == "off"


def limit(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() and int(value) > 0 else default


def memory_mb():
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    return limit("SPEEDLABS_SANDBOX_MEMORY_MB", max(512, machine * 3 // 8 - sum(TMPFS_MB.values())))


def unprivileged():
    """setpriv's argv that drops a root grader to the sandbox's user; nothing for a user grading as themselves."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


def torch_prefixes():
    """The libtorch a build was configured with, whole: for each CMAKE_PREFIX_PATH or Torch_DIR entry, the Python
    environment it lies in (a release built against another checkout's .venv), else the libtorch folder whose
    lib/ holds libtorch.so (a downloaded libtorch), else the entry itself."""
    named = [p for var in ("CMAKE_PREFIX_PATH", "Torch_DIR")
             for p in os.environ.get(var, "").replace(";", ":").split(":") if os.path.isabs(p)]
    roots = []
    for path in (Path(p) for p in named if os.path.exists(p)):
        ancestors = [path, *path.parents]
        root = next((a for a in ancestors if (a / "pyvenv.cfg").is_file()), None) or \
            next((a for a in ancestors if (a / "lib" / "libtorch.so").exists()), path)
        roots.append(str(root))
    return roots


def data_folder():
    return os.environ.get("SPEEDLABS_DATA_DIR") or str(ROOT / "data")


def lab_copy(build, lab):
    """Where lab @p lab's graded programs are: its own copy of the graded tree @p build when ./lab made one
    (SPEEDLABS_SANDBOX_COPIES/labNN), else @p build. The grader reads and runs them from there."""
    copies = os.environ.get("SPEEDLABS_SANDBOX_COPIES")
    copy = Path(copies) / f"lab{lab}" if copies else None
    return copy if copy and copy.is_dir() else Path(build)


def lab_tree(command):
    """(copy, tree): the copy of the graded tree a command runs in, mounted in the tree's place: lab
    SPEEDLABS_SANDBOX_LAB's (its build), or the one @p command's program lies in; None otherwise."""
    tree, copies = os.environ.get("SPEEDLABS_SANDBOX_TREE"), os.environ.get("SPEEDLABS_SANDBOX_COPIES")
    if not tree or not copies or not command:
        return None
    lab = os.environ.get("SPEEDLABS_SANDBOX_LAB")
    if not lab:
        match = re.match(re.escape(os.path.realpath(copies)) + r"/lab(\d\d)/", os.path.realpath(command[0]))
        lab = match.group(1) if match else None
    copy = os.path.join(os.path.realpath(copies), f"lab{lab}") if lab else None
    return (copy, os.path.realpath(tree)) if copy and os.path.isdir(copy) else None


def inside(path, own):
    """@p path as the sandbox sees it: a path in the lab's copy becomes the same path in the tree."""
    path = os.path.realpath(path)
    if own and (path == own[0] or path.startswith(own[0] + "/")):
        return own[1] + path[len(own[0]):]
    return path


def mounts(command, writable, hidden, reach=lambda path: path):
    """bwrap's mount arguments for @p command: the private folders, the allowlist, the lab's own tree, the
    writable and hidden paths. @p reach gives the path bwrap binds a source from (see stage())."""
    args = ["--proc", "/proc", "--ro-bind", "/sys", "/sys", "--dev", "/dev"]
    for path, size in TMPFS_MB.items():
        args += ["--size", str(size << 20), "--tmpfs", path]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    allowed = [str(ROOT / name) for name in ALLOWED_SOURCES if (ROOT / name).exists()]
    allowed += torch_prefixes() + [data_folder()]
    for path in dict.fromkeys(os.path.realpath(p) for p in allowed if os.path.exists(p)):
        args += ["--ro-bind", reach(path), path]
    reference = os.path.realpath(ROOT / "build")
    if command and os.path.realpath(command[0]).startswith(reference + "/"):
        args += ["--ro-bind", reach(reference), reference]  # a side the reference runs (timed, raced): its tree
    own = lab_tree(command)
    if own:  # the lab's own copy in the tree's place (writable for its build)
        args += ["--bind" if own[1] in writable else "--ro-bind", reach(own[0]), own[1]]
    for path in writable:
        if not own or path != own[1]:
            args += ["--bind", reach(path), path]
    bound = [args[i + 2] for i in range(len(args) - 2) if args[i] in ("--ro-bind", "--bind")]
    for path in hidden:  # only what lies in a mounted folder needs covering: the rest is not there
        if not any(path == b or path.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def wrap(command, writable=(), hidden=(), parent=None):
    """The argv that runs @p command in a sandbox (see the module's comment); @p command itself when the
    sandbox is switched off. @p parent: the process that will start it (this one unless given)."""
    if disabled():
        return list(command)
    spec = json.dumps({"rw": [os.path.realpath(p) for p in writable],
                       "hide": [os.path.realpath(p) for p in hidden], "parent": parent or os.getpid()})
    return [sys.executable, os.path.abspath(__file__), "enter", spec, "--", *command]


def stage():
    """For a root grader: a private mount namespace in which each source is bind-mounted under STAGE, a
    folder the sandbox's user can reach whatever the folders above the checkout allow (a clone under a 0700
    folder); returns the function that gives a source's staged path. As the user grading, the path itself."""
    if os.geteuid() != 0:
        return lambda path: path
    libc = ctypes.CDLL(None, use_errno=True)

    def call(result, what):
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    call(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    call(libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None), "making / private")
    os.makedirs(STAGE, mode=0o755, exist_ok=True)
    call(libc.mount(b"tmpfs", STAGE.encode(), b"tmpfs", ctypes.c_ulong(0), b"size=1m,mode=755"), "tmpfs on " + STAGE)
    staged = {}

    def reach(path):
        if path not in staged:
            target = os.path.join(STAGE, str(len(staged)))
            os.mkdir(target) if os.path.isdir(path) else open(target, "w").close()
            call(libc.mount(path.encode(), target.encode(), None, ctypes.c_ulong(MS_BIND | MS_REC), None),
                 "binding " + path)
            staged[path] = target
        return staged[path]

    return reach


def written(folders):
    """Bytes the files under @p folders take on disk (a file linked twice counted once)."""
    seen, total, stack = set(), 0, list(folders)
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def stop(number, _):
    """A stop signal's handler in the supervisor: every process under it killed, then its exit."""
    processes.kill_tree(os.getpid(), spare_root=True)
    os._exit(128 + number)


def supervise(child, folders):
    """Waits for @p child (bwrap) as the subreaper of everything under it, and exits with its code. A stop (the
    driver's SIGINT, SIGTERM or SIGHUP, or SIGTERM when the grader that started this sandbox dies) kills every
    process under this one first: bwrap's sandbox leaves the session (--new-session), and its --die-with-parent
    is set only once bwrap runs, so neither a process group nor bwrap alone can end it at every moment. With
    writable @p folders, their size stays within SPEEDLABS_SANDBOX_WRITE_MB of what they held at the start; past it
    the sandbox is killed (exit WROTE_TOO_MUCH)."""
    cap = limit("SPEEDLABS_SANDBOX_WRITE_MB", 4096) << 20
    start = written(folders) if folders else 0
    while True:
        pid, status = os.waitpid(-1, os.WNOHANG if folders else 0)  # orphans handed to this subreaper too
        if pid == child:
            processes.kill_tree(os.getpid(), spare_root=True)  # whatever left bwrap's namespaces on the way
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
        if pid:
            continue
        if written(folders) - start > cap:
            processes.kill_tree(os.getpid(), spare_root=True)
            print(f"[lab] the sandbox wrote more than SPEEDLABS_SANDBOX_WRITE_MB ({cap >> 20} MiB) into "
                  f"{', '.join(folders)}: stopped", file=sys.stderr)
            os._exit(WROTE_TOO_MUCH)
        time.sleep(WRITE_POLL_S)


def enter(spec, command):
    """Sets the limits and runs bwrap, with a root grader's privileges dropped, in a child that this process
    supervises (never returns)."""
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
            "--hostname", "sandbox", "--setenv", "HOME", "/tmp", "--setenv", "CCACHE_DISABLE", "1",
            *mounts(command, spec["rw"], spec["hide"], stage())]
    if os.environ.get("SPEEDLABS_DATA_DIR"):  # mounted at its resolved path: a symlink's own path is not there
        argv += ["--setenv", "SPEEDLABS_DATA_DIR", os.path.realpath(data_folder())]
    own = lab_tree(command)
    program = inside(command[0], own) if own and "/" in command[0] else command[0]
    argv += ["--chdir", inside(os.getcwd(), own), "--", program, *command[1:]]
    data, files = memory_mb() << 20, limit("SPEEDLABS_SANDBOX_FILE_MB", 2048) << 20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (files, files))
    resource.setrlimit(resource.RLIMIT_DATA, (data, data))
    count = limit("SPEEDLABS_SANDBOX_PROCESSES", 512)
    resource.setrlimit(resource.RLIMIT_NPROC, (count, count))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != spec["parent"]:  # the grader ended before the line above: nothing to run for
        os._exit(128 + signal.SIGTERM)
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, stop)  # before the fork: no moment at which a stop leaves bwrap behind
    child = os.fork()
    if child:
        supervise(child, [own[0] if own and path == own[1] else path for path in spec["rw"]])
    os.execvp(*(lambda a: (a[0], a))(unprivileged() + argv))


def phony_references(build_ninja):
    """Rewrites @p build_ninja (a lab's copy of the graded tree's, replaced, never written through its link) so
    that the earlier labs' reference objects, built outside the sandbox, are phony: ninja then needs none of
    their sources (solutions/, which a sandbox does not have) to know they are up to date."""
    lines, kept, skipping = Path(build_ninja).read_text().splitlines(keepends=True), [], False
    for line in lines:
        if line.startswith("build ") and "_exercise_reference.dir/" in line.split(":", 1)[0]:
            kept.append(line.split(":", 1)[0] + ": phony\n")
            skipping = True
        elif skipping and line.startswith("  "):
            continue  # the compile's variables
        else:
            skipping = False
            kept.append(line)
    temporary = Path(build_ninja).with_suffix(".phony")
    temporary.write_text("".join(kept))
    os.replace(temporary, build_ninja)


def probe():
    """None when a sandbox can be made here (or it is switched off), else why not."""
    if disabled():
        return None
    if not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed: ./lab setup installs it"
    try:
        done = subprocess.run(wrap(["true"]), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


def main(argv):
    if len(argv) == 2 and argv[1] == "probe":
        why = probe()
        if why:
            print(f"[lab] error: cannot make the sandbox graded code runs in ({why}). Grade where bubblewrap can "
                  "make an unprivileged sandbox (`bwrap --unshare-all --ro-bind / / true` works), or, for trusted "
                  "code only, set SPEEDLABS_SANDBOX=off (docs/grading.md)", file=sys.stderr)
            return 2
        return 0
    if len(argv) == 3 and argv[1] == "phony-references":
        phony_references(argv[2])
        return 0
    if len(argv) >= 4 and argv[1] == "enter" and argv[3] == "--":
        try:
            enter(json.loads(argv[2]), argv[4:])
        except OSError as error:
            print(f"[lab] error: the sandbox could not be set up: {error}", file=sys.stderr)
            return 126
    if len(argv) >= 3 and argv[1] == "run":
        writable, hidden, rest = [], [], argv[2:]
        while rest and rest[0] in ("--rw", "--hide") and len(rest) >= 2:
            (writable if rest[0] == "--rw" else hidden).append(rest[1])
            rest = rest[2:]
        if rest and rest[0] == "--" and len(rest) > 1:
            command = wrap(rest[1:], writable, hidden, parent=os.getppid())  # this process becomes the sandbox
            os.execvp(command[0], command)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
