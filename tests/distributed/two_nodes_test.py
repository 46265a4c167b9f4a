#!/usr/bin/env python3
"""Two machines on one: data-parallel training across two network namespaces.

Each "node" is a network namespace with its own host name (a UTS namespace per process), its own
/etc/hosts (ip netns exec binds /etc/netns/<name>/hosts) naming both nodes, and one end of a veth
pair; GLOO_SOCKET_IFNAME names that end, as docs/distributed.md tells a user of several machines
to do. torchrun runs on each node with the c10d rendezvous served by node A, as the docs' command
for several machines, and starts tests/tools/distributed_trainer (the linear model on 64
examples). The test checks what a user of two machines relies on:

  - 1 and 2 processes per node: every rank ends with the same variables, bit for bit, equal to
    the same training on one machine, and only the chief's node writes checkpoints;
  - a node lost mid-run (its torchrun and workers killed) and started again: the group restarts
    from the newest checkpoint and ends bit for bit where a run never interrupted ends;
  - the link between the nodes cut for less than the group's timeout: training goes on, same
    result; cut for longer: every rank ends with a `trainhooks distributed:` error within the
    timeout (plus a margin for this machine's load), none hangs;
  - elastic `--nnodes 1:2`: a node leaves (the other trains on alone) and comes back; every
    example is read exactly once per epoch across the changes (the ids each rank printed, of the
    group that last ran each step), and with the global batch kept the training follows a run on
    one process to rounding.

It needs root, `ip` with network namespaces, `unshare` and torchrun; without them it prints why
and exits 77 (ctest reports the test as skipped with that reason, never as passed). The
namespaces, the veth pair and the hosts files are removed however the test ends, and those left
by a test that was killed are removed at the next start.

usage: two_nodes_test.py TRAINER [TORCHRUN]
"""

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
PREFIX = "thtest"
PORT = 29400  # the rendezvous port, inside node A's fresh namespace


def log(msg):
    print(msg, flush=True)


def skip(reason):
    log(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def sh(*argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


class Nodes:
    """Namespaces <prefix>-<pid>-a and -b joined by a veth pair: nodea 10.231.x.1, nodeb .2."""

    def __init__(self):
        pid = os.getpid()
        self.ns = {"a": f"{PREFIX}-{pid}-a", "b": f"{PREFIX}-{pid}-b"}
        self.dev = {"a": f"th{pid}a", "b": f"th{pid}b"}
        subnet = 16 + pid % 200
        self.addr = {"a": f"10.231.{subnet}.1", "b": f"10.231.{subnet}.2"}
        self.procs = []

    def create(self):
        for ns in self.ns.values():
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", self.dev["a"], "type", "veth", "peer", "name", self.dev["b"])
        for n in "ab":
            ns, dev = self.ns[n], self.dev[n]
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[n]}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            with open(f"/etc/netns/{ns}/hosts", "w") as f:
                f.write(f"127.0.0.1 localhost\n{self.addr['a']} nodea\n{self.addr['b']} nodeb\n")

    def link(self, up):
        sh("ip", "-n", self.ns["a"], "link", "set", self.dev["a"], "up" if up else "down")

    def start(self, n, argv, out, env=()):
        """argv on node n under its host name, in a process group of its own; output to `out`."""
        script = 'hostname "$0" && exec "$@"'
        full = ["ip", "netns", "exec", self.ns[n], "unshare", "--uts", "sh", "-c", script,
                f"node{n}", "/usr/bin/env"]
        for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
                     "GLOO_SOCKET_IFNAME", "TORCHELASTIC_RESTART_COUNT",
                     "TORCHELASTIC_USE_AGENT_STORE"):
            full += ["-u", name]
        full += [f"GLOO_SOCKET_IFNAME={self.dev[n]}", *env, *argv]
        p = subprocess.Popen(full, stdout=open(out, "ab"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        p.out = out
        self.procs.append(p)
        return p

    def destroy(self):
        for p in self.procs:
            kill(p)
        for ns in self.ns.values():
            remove_namespace(ns)


def kill(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def remove_namespace(ns):
    # Whatever still runs inside (a worker torchrun left behind) goes first.
    r = sh("ip", "netns", "pids", ns, check=False)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    sh("ip", "netns", "del", ns, check=False)  # also removes the veth pair
    shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def remove_stale():
    """Namespaces of an earlier run of this test that was killed (its pid is gone)."""
    r = sh("ip", "netns", "list", check=False)
    for line in r.stdout.splitlines():
        m = re.match(rf"({PREFIX}-(\d+)-[ab])\b", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            remove_namespace(m.group(1))


def wait(p, timeout):
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        kill(p)
        return None


def text(path):
    with open(path, errors="replace") as f:
        return f.read()


def wait_for(path, pattern, timeout, after=0):
    """Waits until the file holds a line matching `pattern` past its first `after` characters;
    the match, or None."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = re.search(pattern, text(path)[after:], re.M)
        if m:
            return m
        time.sleep(0.05)
    return None


def finals(*paths):
    """rank -> "<step> <variables>" of the `final <rank> ...` lines."""
    out = {}
    for path in paths:
        for m in re.finditer(r"^final (\d+) (.*)$", text(path), re.M):
            out[int(m.group(1))] = m.group(2)
    return out


def steps(path):
    out = {}
    for m in re.finditer(r"^step (\d+) (.*)$", text(path), re.M):
        out[int(m.group(1))] = m.group(2)
    return out


def floats(line):
    return [float.fromhex(w) for w in line.split()]


class Test:
    def __init__(self, trainer, torchrun):
        self.trainer, self.torchrun = trainer, torchrun
        self.tmp = tempfile.mkdtemp(prefix="two_nodes_")
        self.nodes = Nodes()
        self.failures = []
        self.serial = 0

    def file(self, name):
        self.serial += 1
        return os.path.join(self.tmp, f"{self.serial:02d}-{name}")

    def check(self, ok, what, *logs):
        if not ok:
            detail = "".join(f"\n--- {p}:\n{text(p)[-4000:]}" for p in logs)
            self.failures.append(what)
            log(f"FAILED: {what}{detail}")
        return ok

    def torchrun_argv(self, nnodes, nproc, rdzv_id, trainer_args, extra=()):
        return [self.torchrun, "--no_python", "--redirects", "2", "--tee", "2",
                f"--nnodes={nnodes}", f"--nproc_per_node={nproc}", "--rdzv_backend=c10d",
                f"--rdzv_endpoint=nodea:{PORT}", f"--rdzv_id={rdzv_id}", *extra,
                "--log_dir", self.file("torchrun-logs"), self.trainer, *trainer_args]

    def reference(self, world, args):
        """The same training on this machine: `world` processes over a file store."""
        store = self.file("store")
        procs, outs = [], []
        for r in range(world):
            outs.append(self.file(f"reference-{r}.log"))
            env = {k: v for k, v in os.environ.items()
                   if k not in ("MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME",
                                "LOCAL_RANK", "TORCHELASTIC_RESTART_COUNT")}
            env.update(RANK=str(r), WORLD_SIZE=str(world))
            procs.append(subprocess.Popen([self.trainer, *args, "--file-store", store],
                                          stdout=open(outs[-1], "wb"), stderr=subprocess.STDOUT,
                                          env=env))
        for p, out in zip(procs, outs):
            if wait(p, 120) != 0:
                raise RuntimeError(f"the reference run failed:\n{text(out)}")
        return finals(*outs)[0], steps(outs[0])

    # 1 and 2 processes per node: the same bits on every rank and as on one machine, and only
    # the chief's node writes.
    def ranks_agree_and_only_the_chief_writes(self, nproc):
        args = ["--save-steps", "3", "--last-step", "10", "--batch", str(8 // nproc),
                "--timeout", "60"]
        outs, dirs, procs = {}, {}, {}
        for n in "ab":
            outs[n], dirs[n] = self.file(f"node{n}.log"), self.file(f"ckpt-{n}")
            procs[n] = self.nodes.start(n, self.torchrun_argv(2, nproc, f"agree{nproc}",
                                                              ["--dir", dirs[n], *args]), outs[n])
        status = {n: wait(procs[n], 120) for n in "ab"}
        if not self.check(status == {"a": 0, "b": 0},
                          f"{nproc} per node: torchrun exit {status}", outs["a"], outs["b"]):
            return
        got = finals(outs["a"], outs["b"])
        world = 2 * nproc
        self.check(sorted(got) == list(range(world)), f"{nproc} per node: final lines of {world} "
                   f"ranks, got {sorted(got)}", outs["a"], outs["b"])
        self.check(len(set(got.values())) == 1, f"{nproc} per node: ranks differ: {got}")
        want, _ = self.reference(world, args)
        self.check(got.get(0) == want, f"{nproc} per node: two nodes ended at {got.get(0)}, one "
                   f"machine at {want}")
        chief = "a" if re.search(r"^final 0 ", text(outs["a"]), re.M) else "b"
        other = "b" if chief == "a" else "a"
        written = sorted(os.listdir(dirs[chief])) if os.path.isdir(dirs[chief]) else []
        self.check("model.ckpt-10" in written, f"{nproc} per node: the chief's node (node{chief}) "
                   f"has no model.ckpt-10: {written}")
        self.check(not os.path.exists(dirs[other]) or not os.listdir(dirs[other]),
                   f"{nproc} per node: node{other}, without the chief, wrote "
                   f"{os.listdir(dirs[other]) if os.path.exists(dirs[other]) else ''}")

    # Node b lost mid-run and started again: the group goes on from the newest checkpoint and
    # ends where an uninterrupted run ends, bit for bit.
    def a_lost_node_restarts_and_resumes(self):
        ckpt = self.file("ckpt-shared")
        args = ["--dir", ckpt, "--save-steps", "5", "--last-step", "40", "--batch", "8",
                "--timeout", "30", "--step-delay-ms", "50"]
        extra = ["--max_restarts=3"]
        a_out, b_out, b2_out = self.file("nodea.log"), self.file("nodeb.log"), self.file(
            "nodeb-again.log")
        a = self.nodes.start("a", self.torchrun_argv(2, 1, "lost", args, extra), a_out)
        b = self.nodes.start("b", self.torchrun_argv(2, 1, "lost", args, extra), b_out)
        if not self.check(wait_for(b_out, r"^step 1[2-9] ", 90), "lost node: no step 12 on node b",
                          a_out, b_out):
            kill(a), kill(b)
            return
        kill(b)
        lost_at = max(steps(b_out))
        b2 = self.nodes.start("b", self.torchrun_argv(2, 1, "lost", args, extra), b2_out)
        status = (wait(a, 180), wait(b2, 180))
        if not self.check(status == (0, 0), f"lost node: torchrun exit {status}", a_out, b2_out):
            return
        got = finals(a_out, b2_out)
        want, _ = self.reference(2, ["--last-step", "40", "--batch", "8"])
        self.check(got.get(0) == want and got.get(1) == want,
                   f"lost node (killed after step {lost_at}): ended at {got}, uninterrupted at "
                   f"{want}", a_out, b2_out)
        first_again = min(steps(b2_out)) if steps(b2_out) else None
        self.check(first_again is not None and first_again <= lost_at + 1 and first_again % 5 == 1,
                   f"lost node: the restarted node began at step {first_again}, not after a "
                   f"checkpoint at or before step {lost_at}", b2_out)

    # The link cut for less than the timeout, then for more, with ranks started by hand.
    def a_link_cut(self, cut_secs, timeout):
        args = ["--last-step", "40", "--batch", "8", "--timeout", str(timeout),
                "--step-delay-ms", "50"]
        outs, procs = {}, {}
        env = ["MASTER_ADDR=nodea", "MASTER_PORT=29500", "WORLD_SIZE=2"]
        for r, n in enumerate("ab"):
            outs[n] = self.file(f"cut{cut_secs}-node{n}.log")
            procs[n] = self.nodes.start(n, [self.trainer, *args], outs[n], env + [f"RANK={r}"])
        if not self.check(wait_for(outs["b"], r"^step 10 ", 60), f"cut {cut_secs} s: no step 10",
                          outs["a"], outs["b"]):
            return
        self.nodes.link(False)
        cut = time.monotonic()
        ended = {}
        # Until the cut's end, or until both ranks ended (a cut longer than the timeout).
        while time.monotonic() - cut < cut_secs and len(ended) < 2:
            for n in "ab":
                if n not in ended and procs[n].poll() is not None:
                    ended[n] = time.monotonic() - cut
            time.sleep(0.05)
        self.nodes.link(True)
        status = {n: wait(procs[n], 120) for n in "ab"}
        for n in "ab":
            ended.setdefault(n, time.monotonic() - cut)
        if cut_secs < timeout:
            if not self.check(status == {"a": 0, "b": 0}, f"cut {cut_secs} s < timeout "
                              f"{timeout} s: exit {status}", outs["a"], outs["b"]):
                return
            want, _ = self.reference(2, ["--last-step", "40", "--batch", "8"])
            got = finals(outs["a"], outs["b"])
            self.check(got.get(0) == want and got.get(1) == want,
                       f"cut {cut_secs} s: ended at {got}, uncut at {want}")
        else:
            # The bound: the timeout, 10 % more, and a margin for a loaded 2-core machine.
            bound = timeout * 1.1 + 5
            for n in "ab":
                self.check(status[n] == 1 and "trainhooks distributed:" in text(outs[n]),
                           f"cut {cut_secs} s > timeout {timeout} s: node{n} exit {status[n]} "
                           f"without a trainhooks error", outs[n])
                self.check(ended[n] <= bound, f"cut {cut_secs} s: node{n} ended {ended[n]:.1f} s "
                           f"after the cut, bound {bound:.1f} s", outs[n])
            log(f"  the ranks ended {ended['a']:.1f} s and {ended['b']:.1f} s after the cut")
            for n in "ab":
                said = re.search(r"^error: (.*)$", text(outs[n]), re.M)
                log(f"  node{n}: {said.group(1) if said else '(no error line)'}")

    # --nnodes 1:2: node b leaves, node a trains on alone, node b comes back.
    def elastic_shrink_and_grow(self):
        ckpt = self.file("ckpt-elastic")
        # Node a alone steps slowly, so that node b's new start (torchrun and LibTorch loading,
        # seconds on a loaded machine) comes well before the last step.
        last = 96
        args = ["--dir", ckpt, "--save-steps", "4", "--last-step", str(last), "--global-batch",
                "8", "--print-ids", "2", "--timeout", "20", "--step-delay-ms", "50",
                "--alone-delay-ms", "400"]
        extra = ["--max_restarts=5", "--monitor_interval=1", "--rdzv_conf=last_call_timeout=3"]
        a_out, b_out, b2_out = (self.file("nodea.log"), self.file("nodeb.log"),
                                self.file("nodeb-again.log"))
        a = self.nodes.start("a", self.torchrun_argv("1:2", 1, "elastic", args, extra), a_out)
        b = self.nodes.start("b", self.torchrun_argv("1:2", 1, "elastic", args, extra), b_out)
        # Node b leaves once the two ranks have written a checkpoint (every 4 steps: within 5
        # steps), so that node a alone resumes from a 2-rank one.
        first = wait_for(b_out, r"^ids (\d+) \d+ \d+ 2 ", 90)
        ok = self.check(first, "elastic: no step on two ranks", a_out, b_out)
        if ok:
            step = max(int(first.group(1)) + 5, 10)
            ok = self.check(wait_for(b_out, rf"^ids {step} \d+ \d+ 2 ", 90),
                            f"elastic: no step {step} on two ranks", a_out, b_out)
        if ok:
            # Only what node a prints from now on: it may have begun alone (below).
            seen = len(text(a_out))
            kill(b)
            ok = self.check(wait_for(a_out, r"^ids (\d+) \d+ 0 1 ", 120, after=seen),
                            "elastic: node a did not go on alone", a_out)
        if not ok:
            kill(a), kill(b)
            return
        b2 = self.nodes.start("b", self.torchrun_argv("1:2", 1, "elastic", args, extra), b2_out)
        status = (wait(a, 240), wait(b2, 240))
        if not self.check(status == (0, 0), f"elastic: torchrun exit {status}", a_out, b2_out):
            return
        alog = text(a_out)
        self.check("Resuming a 2-rank checkpoint on 1 rank" in alog,
                   "elastic: no 'Resuming a 2-rank checkpoint on 1 rank'", a_out)
        self.check(re.search(r"Resuming a 1-rank checkpoint on 2 ranks", alog + text(b2_out)),
                   "elastic: no 'Resuming a 1-rank checkpoint on 2 ranks'", a_out, b2_out)
        # The lines that count: of each step, those of the last group that ran it.
        lines = {}
        for path in (a_out, b_out, b2_out):
            for m in re.finditer(r"^ids (\d+) (\d+) (\d+) (\d+)((?: \d+)*)$", text(path), re.M):
                step, group, rank, world = map(int, m.groups()[:4])
                lines.setdefault(step, {}).setdefault(group, {})[rank] = (
                    world, [int(i) for i in m.group(5).split()])
        worlds, read = [], []
        for step in range(1, last + 1):
            if not self.check(step in lines, f"elastic: no ids of step {step}", a_out, b2_out):
                return
            group = lines[step][max(lines[step])]
            world = next(iter(group.values()))[0]
            worlds.append(world)
            if not self.check(sorted(group) == list(range(world)),
                              f"elastic: step {step}: ids of ranks {sorted(group)} of {world}"):
                return
            for rank in range(world):
                read += group[rank][1]
        # When node b's torchrun comes up more than last_call_timeout after node a's (a loaded
        # machine), node a begins alone and the group grows at b's arrival: a first run of 1s.
        grown = worlds[worlds.index(2):] if 2 in worlds else []
        self.check(1 in grown and grown[-1] == 2,
                   f"elastic: the number of ranks per step did not go 2, 1, 2: {worlds}")
        epochs = [sorted(read[i:i + 64]) for i in range(0, len(read), 64)]
        self.check(len(read) == last * 8 and all(e == list(range(64)) for e in epochs),
                   f"elastic: an epoch did not read each of the 64 examples once: "
                   f"{[e for e in epochs if e != list(range(64))][:1]}")
        log(f"  ranks per step: {''.join(map(str, worlds))}")
        got = finals(a_out, b2_out)
        _, want = self.reference(1, ["--last-step", str(last), "--global-batch", "8"])
        self.check(len(set(got.values())) == 1, f"elastic: ranks differ at the end: {got}")
        end = got.get(0, "").split()
        if self.check(len(end) == 5 and int(end[0]) == last, f"elastic: final {got}"):
            have, expected = floats(" ".join(end[1:])), floats(want[last])
            self.check(all(abs(h - e) <= 1e-5 + 1e-5 * abs(e) for h, e in zip(have, expected)),
                       f"elastic: ended at {have}, one process at {expected}")

    def run(self):
        remove_stale()
        atexit.register(self.nodes.destroy)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: sys.exit(1))
        self.nodes.create()
        cases = [
            ("one process per node", lambda: self.ranks_agree_and_only_the_chief_writes(1)),
            ("two processes per node", lambda: self.ranks_agree_and_only_the_chief_writes(2)),
            ("a node lost and started again", self.a_lost_node_restarts_and_resumes),
            ("the link cut for 3 s, timeout 20 s", lambda: self.a_link_cut(3, 20)),
            ("the link cut for 20 s, timeout 6 s", lambda: self.a_link_cut(20, 6)),
            ("elastic --nnodes 1:2, shrink and grow", self.elastic_shrink_and_grow),
        ]
        only = os.environ.get("TWO_NODES_ONLY")
        for name, case in cases:
            if only and only not in name:
                continue
            before, start = len(self.failures), time.monotonic()
            case()
            log(f"{'ok' if len(self.failures) == before else 'FAILED'}: {name} "
                f"({time.monotonic() - start:.1f} s)")
        if self.failures:
            log(f"{len(self.failures)} failed; logs in {self.tmp}")
            return 1
        shutil.rmtree(self.tmp, ignore_errors=True)
        return 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    trainer = sys.argv[1]
    torchrun = sys.argv[2] if len(sys.argv) > 2 else shutil.which("torchrun") or "/usr/bin/torchrun"
    if os.geteuid() != 0:
        skip("needs root to create network namespaces")
    for tool in ("ip", "unshare"):
        if not shutil.which(tool):
            skip(f"no `{tool}` on this machine")
    if not os.path.exists(torchrun):
        skip(f"no {torchrun} (python3-torch)")
    probe = f"{PREFIX}-probe-{os.getpid()}"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        skip(f"`ip netns add` is refused here: {r.stderr.strip()}")
    sh("ip", "netns", "del", probe, check=False)
    sys.exit(Test(trainer, torchrun).run())


if __name__ == "__main__":
    main()
