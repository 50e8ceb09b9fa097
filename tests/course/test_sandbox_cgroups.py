"""Every sandbox's cgroups are children of the grader's own: whatever holds the grader counts and limits its kernels.

A grader run inside a systemd slice, a container or a batch job's cgroup must
not let its kernels escape that cgroup's accounting and quotas. The test puts a
grader (a Python that runs one sandboxed cell) in cgroups of its own, one that
counts CPU time and one with a CPU quota; the cell burns a known CPU time and
prints its own cgroups. The CPU it burned is found in the grader's group, and
the kernel is inside the grader's groups in every hierarchy.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pm_course import sandbox

BURN = 3.0  # CPU seconds the student's cell burns

pytestmark = [pytest.mark.grading, pytest.mark.skipif(
    not sandbox.works() or os.geteuid() != 0 or sandbox.own_cgroup("cpuacct") is None
    or not os.access(sandbox.own_cgroup("cpuacct"), os.W_OK),
    reason="needs bubblewrap and cgroups this user may make (root)")]

GRADER = textwrap.dedent(f"""
    import asyncio, resource
    from pm_course import sandbox

    async def run():
        km = sandbox.SandboxKernelManager(kernel_name="python3")
        await km.start_kernel(cwd={{folder!r}})
        kc = km.client()
        kc.start_channels()
        out = []
        try:
            await kc.wait_for_ready(timeout=60)
            code = ("import time\\nt = time.process_time()\\nwhile time.process_time() - t < {BURN}:\\n    pass\\n"
                    "print(open('/proc/self/cgroup').read())")
            await kc.execute_interactive(code, timeout=120, output_hook=lambda m: out.append(
                m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
        return "".join(out)

    print(asyncio.run(run()))
    print("grader-self", resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(
        resource.RUSAGE_SELF).ru_stime)
""")


def relative(group: Path) -> str:
    """A cgroup folder as /proc/<pid>/cgroup names it (its path in its hierarchy)."""
    for root in sorted(Path("/sys/fs/cgroup").iterdir(), key=lambda p: -len(str(p))):
        if group.is_relative_to(root):
            return "/" + group.relative_to(root).as_posix()
    raise AssertionError(group)


def test_a_kernel_is_counted_and_limited_in_the_graders_own_cgroups(tmp_path):
    groups = {c: sandbox.own_cgroup(c) / f"pm-test-grader-{os.getpid()}" for c in ("cpuacct", "memory", "pids")}
    quota = sandbox.own_cgroup("cpu")
    quota = quota / f"pm-test-quota-{os.getpid()}" if quota and quota != sandbox.own_cgroup("cpuacct") else None
    made = [g for g in {*groups.values(), quota} if g is not None]
    for group in made:
        group.mkdir()
    try:
        if quota is not None and (quota / "cpu.cfs_quota_us").exists():  # at most 1.5 cores for all it holds
            (quota / "cpu.cfs_period_us").write_text("100000")
            (quota / "cpu.cfs_quota_us").write_text("150000")

        def enter():
            for group in made:
                (group / "cgroup.procs").write_text(str(os.getpid()))

        proc = subprocess.run([sys.executable, "-c", GRADER.replace("{folder!r}", repr(str(tmp_path)))],
                              capture_output=True, text=True, timeout=300, preexec_fn=enter)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        kernel = {line.split(":")[1]: line.split(":", 2)[2] for line in proc.stdout.splitlines()
                  if line.count(":") >= 2 and line.split(":")[0].isdigit()}
        for controller, group in groups.items():
            where = next(v for k, v in kernel.items() if controller in k.split(","))
            assert where.startswith(relative(group) + "/"), (controller, where, relative(group))
        if quota is not None:
            where = next(v for k, v in kernel.items() if "cpu" in k.split(","))
            assert where == relative(quota) or where.startswith(relative(quota) + "/"), (where, relative(quota))
        usage = int((groups["cpuacct"] / "cpuacct.usage").read_text()) / 1e9 if (
            groups["cpuacct"] / "cpuacct.usage").exists() else None
        if usage is not None:
            own = float(proc.stdout.split("grader-self")[1].split()[0])
            assert usage >= own + BURN * 0.9, (usage, own)  # the kernel's burn is in the grader's group
    finally:
        for group in made:
            for child in group.glob("pm-*"):
                sandbox.remove_cgroup([child])
            sandbox.remove_cgroup([group])
