"""The sandbox that learner code runs in while a notebook is graded: bubblewrap (``bwrap``).

Only the *kernel* is sandboxed.  nbgrader, the job's gradebook copy (with the hidden tests)
and the per-cell facts stay outside, in the worker process; the kernel talks to the worker
over jupyter_client's ``ipc`` transport (Unix sockets).  The kernel spec of a graded notebook
runs this module on the host (``python -m course_tools.sandbox CONFIG CONNECTION_FILE``),
which

1. ties itself to the worker (``PR_SET_PDEATHSIG``: if the worker dies, so does the job);
2. puts itself into a control group of its own when one can be made (cgroup v2, or v1's
   ``pids`` and ``memory`` hierarchies; usually only as root): at most ``processes`` tasks and
   ``memory`` bytes for the job as a whole, tmpfs pages included;
3. starts ``bwrap`` with new user, PID, network, IPC, UTS and cgroup namespaces, no
   capabilities, no further user namespaces, and a file system made of the Python
   environment and ``course_lib`` (read-only), a fresh ``/proc`` and ``/dev``, and tmpfs
   scratch space capped at ``scratch`` bytes (``/tmp``, the working folder ``/tmp/work``,
   ``HOME``; ``/dev/shm`` and the socket folder have small caps of their own).  Nothing
   else of the host is there: no submissions, no course checkout, no gradebook, no home
   folder, no host ``/tmp``;
4. makes the kernel's sockets reachable from the host *without* binding any host folder
   writable into the sandbox: the kernel binds its sockets in a tmpfs inside, at the path
   the connection file names, and the host's copy of that path becomes a symbolic link to
   ``/proc/<sandbox pid>/root/<path>``, i.e. the same tmpfs seen from outside;
5. waits for the sandbox to end, watching how full the scratch space is, and writes a small
   JSON report (peak scratch bytes, whether the memory or process cap was hit) for the
   worker; the report lives in the job's private folder, which the sandbox cannot see.

The sandbox's PID 1 is bwrap's own reaper: when the kernel exits or is killed, every process
in the sandbox dies with it, however it detached (``setsid``, double fork), and none of them
can see, signal or trace a process outside (a PID namespace of its own).  There is no network
(an empty network namespace: its own loopback only).

:func:`probe` says whether the sandbox can be had on this machine (and if not, why and how to
get it); :func:`kernel_spec` writes the kernel spec a job's worker uses.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BWRAP_ENV = "COURSE_GRADE_BWRAP"
"""Environment variable naming the bwrap executable (default: ``bwrap`` on PATH)."""

KERNEL_NAME = "course-sandbox"
"""Name of the kernel spec a sandboxed job's notebooks run with."""

SCRATCH = "/tmp"
WORKDIR = "/tmp/work"
HOME = "/tmp/home"

EXIT_GRACE = 2.0
"""Seconds a job's processes get to exit on their own once its kernel has ended, before the
sandbox kills them and counts them as left running."""
_PR_SET_PDEATHSIG = 1
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_ENV_KEEP = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_NUM_THREADS", "PYTHONHASHSEED", "PYDEVD_DISABLE_FILE_VALIDATION",
             "COURSE_CHECK_RECORDS", "MPLBACKEND", "NBGRADER_EXECUTION",
             "JPY_SESSION_NAME")
# COURSE_CHECK_RECORDS is course_lib.checks.records.ENV (not imported here: the launcher
# starts with the standard library only, to start fast)
"""Variables of the worker's environment the kernel keeps (everything else is cleared)."""


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot be had on this machine (the message says why and how to get it)."""


def bwrap_path() -> str | None:
    """The bwrap executable to use, or None if there is none."""
    name = os.environ.get(BWRAP_ENV, "bwrap")
    return shutil.which(name) if os.sep not in name else (name if os.access(name, os.X_OK)
                                                          else None)


def probe() -> str:
    """Check that bwrap can build the grader's sandbox here; returns bwrap's version line.

    Raises :class:`SandboxUnavailable` with one line saying why and what to do: not Linux,
    bwrap not installed (``apt-get install bubblewrap``), or namespaces refused (user
    namespaces disabled for unprivileged users)."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"sandboxed grading needs Linux (this is {sys.platform}); "
                                 "grade on a Linux machine, or pass --sandbox none to grade "
                                 "without a sandbox")
    exe = bwrap_path()
    if exe is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed: run  sudo apt-get "
                                 "install bubblewrap  (or pass --sandbox none to grade "
                                 "without a sandbox)")
    argv = [exe, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bwrap ({exe}) could not be run: {exc}") from None
    if run.returncode != 0:
        why = (run.stderr.strip().splitlines() or ["no message"])[-1]
        raise SandboxUnavailable(
            f"bwrap cannot create the sandbox's namespaces here ({why}): allow unprivileged "
            "user namespaces (sudo sysctl -w kernel.unprivileged_userns_clone=1, and on "
            "Ubuntu kernel.apparmor_restrict_unprivileged_userns=0) or grade as root; or "
            "pass --sandbox none to grade without a sandbox")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    return version or "bubblewrap"


def _system_binds() -> list[str]:
    """bwrap arguments for the read-only system folders a Python kernel needs."""
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        p = Path(top)
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), top]
        elif p.is_dir():
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/alternatives", "/etc/fonts"):  # fonts: matplotlib's text, without a warning
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    return args


@dataclass
class SandboxConfig:
    """What one kernel's launcher needs (written by the worker as JSON, read by :func:`main`).

    Sizes are bytes; ``processes`` counts tasks (threads included, as the pids controller
    does); 0 means no cap of that kind."""
    bwrap: str
    ro_paths: list[str]
    """Host paths bound read-only at the same place (the Python prefixes, course_lib)."""
    argv: list[str]
    """The kernel command inside the sandbox (``{connection_file}`` already filled in)."""
    socket_dir: str
    """Folder the connection file's ``ip`` points into (``transport="ipc"``)."""
    report: str
    """Host file the launcher writes its :class:`SandboxReport` to."""
    scratch: int = 2**30
    processes: int = 512
    memory: int = 0
    cgroup_kind: str = ""
    cgroup_dirs: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    font_cache: str = ""
    """A folder of matplotlib's font cache, built on the host (:func:`font_cache`), bound
    read-only into the kernel's ``MPLCONFIGDIR``: each kernel would otherwise rebuild it."""

    def to_file(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self)), encoding="utf-8")

    @classmethod
    def from_file(cls, path: Path) -> "SandboxConfig":
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


@dataclass
class SandboxReport:
    """What the launcher saw of one kernel's sandbox (for the job's status and detail; the
    cgroup's counters are read by the worker, :meth:`JobCgroup.counters`)."""
    started: bool = False
    exit_code: int | None = None
    cgroup: str = ""
    """``v1``, ``v2`` or "" (none could be made: per-process limits only)."""
    peak_scratch: int = 0
    scratch: int = 0
    error: str = ""

    @classmethod
    def read(cls, path: Path) -> "SandboxReport | None":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (OSError, ValueError, TypeError):
            return None


def kernel_spec(folder: Path, config_path: Path) -> Path:
    """Write the kernel spec :data:`KERNEL_NAME` into ``folder/kernels/`` (put ``folder`` on
    ``JUPYTER_PATH``); its argv runs :func:`main` with ``config_path``.  Interrupts are sent
    as messages (no signal crosses into the sandbox)."""
    d = Path(folder) / "kernels" / KERNEL_NAME
    d.mkdir(parents=True, exist_ok=True)
    # the launcher needs the standard library only: -I -S start it without site-packages
    spec = {"argv": [sys.executable, "-I", "-S", str(Path(__file__).resolve()),
                     str(config_path), "{connection_file}"],
            "display_name": "Python 3 (grading sandbox)", "language": "python",
            "interrupt_mode": "message", "metadata": {"debugger": False}}
    (d / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return d


def default_ro_paths() -> list[str]:
    """Host folders a kernel needs, bound read-only: this interpreter's prefixes (the venv and
    the Python it was made from) and the course_lib package (which an editable install keeps
    in the course checkout: only that folder is bound, not the checkout)."""
    import course_lib

    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.realpath(sys.exec_prefix), str(Path(course_lib.__file__).resolve().parent)}
    system = ("/usr", "/bin", "/lib", "/lib64", "/sbin")
    keep = sorted(p for p in paths if not any(p == s or p.startswith(s + "/") for s in system))
    # a folder inside another is bound with it
    return [p for p in keep if not any(p != q and p.startswith(q + "/") for q in keep)]


def font_cache() -> str:
    """A folder holding matplotlib's font cache for this machine and matplotlib version,
    built once (in ``~/.cache/course-grade/``, else the temporary folder); "" if it cannot
    be built.  A fresh sandbox has an empty ``MPLCONFIGDIR``, and rebuilding the cache costs
    each kernel about a third of a second."""
    import tempfile
    try:
        from importlib.metadata import version
        tag = f"matplotlib-{version('matplotlib')}-{sys.version_info[0]}.{sys.version_info[1]}"
    except Exception:  # noqa: BLE001 - no matplotlib: nothing to cache
        return ""
    for base in (Path.home() / ".cache" / "course-grade", Path(tempfile.gettempdir()) /
                 f"course-grade-{os.getuid()}"):
        d = base / tag
        if d.is_dir() and any(d.glob("fontlist-*.json")):
            return str(d)
        try:
            base.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=base))
            subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"],
                           env={**os.environ, "MPLCONFIGDIR": str(tmp)}, timeout=120,
                           capture_output=True)
            if any(tmp.glob("fontlist-*.json")):
                try:
                    tmp.rename(d)
                except OSError:  # another job built it first
                    shutil.rmtree(tmp, ignore_errors=True)
                if d.is_dir():
                    return str(d)
            shutil.rmtree(tmp, ignore_errors=True)
        except (OSError, subprocess.SubprocessError):
            continue
    return ""


# --- control groups ---------------------------------------------------------------------------

class JobCgroup:
    """A job's control group: v2 (one folder) or v1 (a folder in ``pids`` and ``memory``),
    made by the worker under its own cgroup before the kernel starts, joined by the launcher
    (so the kernel and all it starts are inside), read and removed by the worker after."""

    def __init__(self, kind: str = "", dirs: list[str] | None = None):
        self.kind, self.dirs = kind, [Path(d) for d in (dirs or [])]

    @classmethod
    def create(cls, name: str, processes: int, memory: int) -> "JobCgroup":
        """Make the group (empty: ``kind == ""`` when none can be made here)."""
        group = cls()
        try:
            if (_CGROUP_ROOT / "cgroup.controllers").is_file():
                group._make_v2(name, processes, memory)
            else:
                group._make_v1(name, processes, memory)
        except OSError:
            group.remove()
            return cls()
        return group

    @staticmethod
    def _own(controller: str) -> Path:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if (controller and controller in ctrls.split(",")) or (not controller and not ctrls):
                return Path(path.lstrip("/"))
        raise OSError(f"no {controller or 'v2'} cgroup")

    def _make_v1(self, name: str, processes: int, memory: int) -> None:
        for ctrl in ("pids", "memory"):
            base = _CGROUP_ROOT / ctrl
            if not base.is_dir():
                raise OSError(f"no {ctrl} hierarchy")
            d = base / self._own(ctrl) / name
            d.mkdir()
            self.dirs.append(d)
        pids, mem = self.dirs
        (pids / "pids.max").write_text(str(processes) if processes else "max")
        if memory:
            (mem / "memory.limit_in_bytes").write_text(str(memory))
            sw = mem / "memory.memsw.limit_in_bytes"
            if sw.exists():
                try:
                    sw.write_text(str(memory))
                except OSError:
                    pass
        self.kind = "v1"

    def _make_v2(self, name: str, processes: int, memory: int) -> None:
        parent = _CGROUP_ROOT / self._own("")
        wanted = {"pids"} | ({"memory"} if memory else set())
        if not wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
            raise OSError("controllers not delegated")
        d = parent / name
        d.mkdir()
        self.dirs.append(d)
        (d / "pids.max").write_text(str(processes) if processes else "max")
        if memory:
            (d / "memory.max").write_text(str(memory))
            try:
                (d / "memory.swap.max").write_text("0")
            except OSError:
                pass
        self.kind = "v2"

    def join(self) -> None:
        """Move this process into the group (its children follow)."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def counters(self) -> dict:
        """``memory_events`` (times the memory cap was hit), ``oom_kills``,
        ``process_cap_hits`` (forks refused by the process cap)."""
        out = {"memory_events": 0, "oom_kills": 0, "process_cap_hits": 0}

        def read(path: Path) -> dict:
            try:
                pairs = [ln.split() for ln in path.read_text().splitlines()]
            except OSError:
                return {}
            return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
        if self.kind == "v1":
            pids, mem = self.dirs
            try:
                out["memory_events"] = int((mem / "memory.failcnt").read_text())
            except (OSError, ValueError):
                pass
            out["oom_kills"] = read(mem / "memory.oom_control").get("oom_kill", 0)
            out["process_cap_hits"] = read(pids / "pids.events").get("max", 0)
        elif self.kind == "v2":
            ev = read(self.dirs[0] / "memory.events")
            out["memory_events"] = ev.get("max", 0) + ev.get("oom", 0)
            out["oom_kills"] = ev.get("oom_kill", 0)
            out["process_cap_hits"] = read(self.dirs[0] / "pids.events").get("max", 0)
        return out

    def destroy(self, grace: float = EXIT_GRACE) -> int:
        """Kill whatever is still inside, remove the folders; returns how many processes
        were still there ``grace`` seconds after the call (a kernel that was told to stop may
        take a moment to exit on a loaded machine: it is not a process left running)."""
        deadline = time.monotonic() + grace
        while _members(self.dirs) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = kill_cgroup(self.dirs)
        self.remove()
        return left

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    kill_cgroup([d])
                    time.sleep(0.02)


def _members(dirs: list[Path]) -> set[int]:
    """The processes in these cgroup folders (a v1 group lists each in both), this one left out."""
    pids: set[int] = set()
    for d in dirs:
        try:
            pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            continue
    return pids - {os.getpid()}


def kill_cgroup(dirs: list[Path]) -> int:
    """SIGKILL every process in these cgroup folders; returns how many were found."""
    for d in dirs:
        kill = d / "cgroup.kill"
        if kill.exists():
            try:
                kill.write_text("1")
            except OSError:
                pass
    found = _members(dirs)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(found)


def leftover_cgroups(prefix: str, exact: bool = False) -> list[Path]:
    """Job cgroup folders (under this process's own cgroups) whose name starts with
    ``prefix`` (or is it, ``exact``): after grading there should be none."""
    v2 = (_CGROUP_ROOT / "cgroup.controllers").is_file()
    found = []
    for ctrl in ("",) if v2 else ("pids", "memory"):
        try:
            base = _CGROUP_ROOT / ctrl / JobCgroup._own(ctrl)
        except OSError:
            continue
        if base.is_dir():
            found += [d for d in base.iterdir() if d.is_dir() and
                      (d.name == prefix if exact else d.name.startswith(prefix))]
    return found


def destroy_leftovers(prefix: str, exact: bool = False) -> int:
    """Kill what is in the :func:`leftover_cgroups` and remove them; returns how many
    processes were still there."""
    return sum(JobCgroup("leftover", [str(d)]).destroy()
               for d in leftover_cgroups(prefix, exact))


# --- the launcher ------------------------------------------------------------------------------

def bwrap_argv(cfg: SandboxConfig, connection_file: str) -> list[str]:
    """The bwrap command line for one kernel (see the module docstring)."""
    argv = [cfg.bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL", *_system_binds()]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(cfg.scratch or 2**30), "--tmpfs", SCRATCH,
             "--size", str(64 * 2**20), "--tmpfs", "/dev/shm",
             "--size", str(4 * 2**20), "--tmpfs", cfg.socket_dir]
    for p in cfg.ro_paths:  # after the tmpfs mounts: a checkout under /tmp stays visible
        argv += ["--ro-bind", p, p]
    argv += ["--dir", WORKDIR, "--dir", HOME,
             "--ro-bind", connection_file, connection_file,
             "--chdir", WORKDIR, "--clearenv"]
    # the notebook's folder (nbgrader's copy of the submission): its other files, read-only
    here = Path.cwd()
    for p in sorted(here.rglob("*"))[:1000]:
        rel = p.relative_to(here)
        if p.is_file() and not p.is_symlink() and p.suffix != ".ipynb" \
                and not any(part.startswith(".") for part in rel.parts):
            argv += ["--ro-bind", str(p), f"{WORKDIR}/{rel.as_posix()}"]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]  # only the tmpfs mounts are writable
    if cfg.font_cache and os.path.isdir(cfg.font_cache):
        for f in sorted(os.listdir(cfg.font_cache)):
            if f.endswith(".json"):
                argv += ["--ro-bind", os.path.join(cfg.font_cache, f), f"{HOME}/.matplotlib/{f}"]
    for k, v in _sandbox_env(cfg).items():
        argv += ["--setenv", k, str(v)]
    return argv + ["--", *cfg.argv]


def _sandbox_env(cfg: SandboxConfig) -> dict[str, str]:
    """The whole environment inside the sandbox (nothing else of the worker's is kept)."""
    return {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
            "HOME": HOME, "TMPDIR": SCRATCH, "IPYTHONDIR": f"{HOME}/.ipython",
            "MPLCONFIGDIR": f"{HOME}/.matplotlib", "LANG": "C.UTF-8",
            **{k: os.environ[k] for k in _ENV_KEEP if k in os.environ},
            **{k: str(v) for k, v in cfg.env.items()}}


def _write_report(cfg: SandboxConfig, report: SandboxReport) -> None:
    try:
        tmp = cfg.report + ".tmp"
        Path(tmp).write_text(json.dumps(asdict(report)), encoding="utf-8")
        os.replace(tmp, cfg.report)
    except OSError:
        pass


def _scratch_used(pid: int, cap: int) -> int:
    """Bytes used in the sandbox's scratch tmpfs, or -1 (not mounted yet, or gone)."""
    try:
        st = os.statvfs(f"/proc/{pid}/root{SCRATCH}")
    except OSError:
        return -1
    if st.f_blocks * st.f_frsize > cap + 2**20:  # still the host's file system
        return -1
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def main(argv: list[str] | None = None) -> int:
    """``python -m course_tools.sandbox CONFIG CONNECTION_FILE``: run one kernel sandboxed
    (the kernel spec's argv; see the module docstring).  Exits with the kernel's status."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m course_tools.sandbox CONFIG.json CONNECTION_FILE", file=sys.stderr)
        return 2
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the worker is already gone
        return 1
    cfg = SandboxConfig.from_file(Path(args[0]))
    conn = args[1]
    cfg.argv = [a.replace("{connection_file}", conn) for a in cfg.argv]
    report = SandboxReport(scratch=cfg.scratch)
    group = JobCgroup(cfg.cgroup_kind, cfg.cgroup_dirs)
    try:
        group.join()
    except OSError as exc:
        report.error = f"could not join the job's cgroup: {exc}"
        _write_report(cfg, report)
        return 1
    report.cgroup = group.kind
    if not group.kind and cfg.processes:
        import resource
        try:  # without a cgroup: a per-user cap (ignored for root; see course_tools/README.md)
            resource.setrlimit(resource.RLIMIT_NPROC, (cfg.processes, cfg.processes))
        except (ValueError, OSError):
            pass
    sock = Path(cfg.socket_dir)
    r, w = os.pipe()
    proc = None
    try:
        cmd, env = bwrap_argv(cfg, conn), _sandbox_env(cfg)
        # bwrap's own PID 1 in the sandbox keeps the environment bwrap was started with
        # (learner code can read /proc/1/environ): start it with the sandbox's, not ours
        proc = subprocess.Popen([cmd[0], "--info-fd", str(w), *cmd[1:]], pass_fds=(w,),
                                stdin=subprocess.DEVNULL, env=env)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            info = f.read(65536)
        try:
            child = int(json.loads(info.decode() or "{}").get("child-pid", 0))
        except ValueError:
            child = 0
        if child:
            report.started = True
            if sock.is_symlink() or sock.exists():
                sock.unlink()
            os.symlink(f"/proc/{child}/root{cfg.socket_dir}", sock)

        def stop(signum, frame):  # jupyter_client's terminate: end the sandbox
            if proc.poll() is None:
                proc.kill()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts travel as messages
        _write_report(cfg, report)
        while proc.poll() is None:
            used = _scratch_used(child, cfg.scratch) if child else -1
            if used > report.peak_scratch:
                report.peak_scratch = used
                _write_report(cfg, report)
            try:
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
        report.exit_code = proc.returncode
    except BaseException as exc:  # noqa: BLE001 - report, then end the sandbox
        report.error = f"{type(exc).__name__}: {exc}"
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    _write_report(cfg, report)
    code = report.exit_code if report.exit_code is not None else 1
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
