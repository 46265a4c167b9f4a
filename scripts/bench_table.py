#!/usr/bin/env python3
"""The budget table of `make bench`, and the section of docs/benchmarks.md generated from it.

scripts/bench.sh runs the benchmarks and leaves their raw results in one directory (Google
Benchmark JSON with every repetition, JSON lines of the other programs, callgrind's counts, the
load average before and after each stage). This script turns them into one table: metric, budget
as DESIGN.md (or the issue that set it) states it, what was measured, verdict, load.

  bench_table.py --results DIR [--markdown FILE]    the table (printed; written as Markdown)
  bench_table.py --results DIR --summary STAGE       the details of one stage, as bench.sh runs
  bench_table.py --update-docs DOC --markdown FILE   FILE's section into DOC, between the markers
  bench_table.py --check DOC                         fails unless DOC's generated section is whole
  bench_table.py --self-test                         the generator's output passes the check

BUDGETS below is the one list of budgets: the table always has a row for each (marked "not
measured" when a stage was skipped), and --check fails when the documentation lacks one.
"""

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, Optional

BEGIN, END = "<!-- budgets:begin -->", "<!-- budgets:end -->"
HEADING = "## Budgets on this machine"
COLUMNS = ("metric", "budget", "measured", "verdict", "load (1 min)")
MET, NOT_MET, REPORTED, NOT_MEASURED = "met", "NOT met", "reported", "not measured"
VERDICTS = (MET, NOT_MET, REPORTED, NOT_MEASURED)


@dataclass(frozen=True)
class Budget:
    key: str
    metric: str  # the row's first cell; rows per checkpoint size append ", <size> state"
    budget: str  # as DESIGN.md §7 states it, or the issue that set it
    short: str  # its name in the generated sentence
    ok: Callable[[float], bool]  # judged on the median
    per_size: bool = False


def at_most(limit):
    return lambda v: v <= limit


def at_least(limit):
    return lambda v: v >= limit


# Budgets worded as DESIGN.md §7 words them ("DESIGN §7: ..."); the rest were set by an issue,
# named in the cell, with the figure that issue gave.
BUDGETS = [
    Budget("session_run", "Session bookkeeping per run, CPU ns (`run_into` on chains of 1 and 10 ops "
           "against the same closures called directly)", "DESIGN §7: ≤ 1 µs per run",
           "Session ≤ 1 µs per run", at_most(1000)),
    Budget("session_node", "Session bookkeeping per evaluated node, CPU ns",
           "DESIGN §7: ≤ 0.2 µs per evaluated node", "Session ≤ 0.2 µs per node", at_most(200)),
    Budget("idle_hook", "a hook that does not fire (`before_run` returns `{}`, empty `after_run`), "
           "CPU ns per step", "DESIGN §7: a hook that does not fire costs ≤ 0.1 µs per step",
           "idle hook ≤ 0.1 µs", at_most(100)),
    Budget("idle_stock_hook", "a stock hook that does not fire (`TimeLimitHook`, `EarlyStoppingHook`, "
           "`MetricsLoggerHook`, `ProfilerHook`), CPU ns per step each",
           "DESIGN §7: a hook that does not fire costs ≤ 0.1 µs per step",
           "idle stock hook ≤ 0.1 µs", at_most(100)),
    Budget("seed_wall", "seed model step, MonitoredTrainingSession / hand-written loop keeping its "
           "loss, wall time interleaved in one process (`BM_SeedInterleaved/3`)",
           "DESIGN §7: within 2 % of a hand-written LibTorch loop on the seed's linear model",
           "seed model within 2 % (wall)", at_most(1.02)),
    Budget("seed_instructions", "seed model step as the seed program runs it (MonitoredTrainingSession "
           "with a hook fetching the loss every step, `seed_hook`) / hand-written loop keeping its "
           "loss, instructions (callgrind)", "issue 30: ≤ 1.003",
           "seed with its hook ≤ 1.003 (instructions)", at_most(1.003)),
    Budget("idle_hook_instructions", "an idle hook that overrides neither per-run call and declares "
           "nothing (`calls()` left as it is), instructions per step", "per-step issue: ≤ 50",
           "idle hook ≤ 50 instructions", at_most(50)),
    Budget("node_instructions", "session bookkeeping per node, instructions",
           "per-step issue: ≤ 100", "≤ 100 instructions per node", at_most(100)),
    Budget("run_instructions", "monitored run bookkeeping with no hook, instructions",
           "per-step issue: ≤ 500", "≤ 500 instructions per run", at_most(500)),
    Budget("fashion_parity", "Fashion-MNIST step, MonitoredTrainingSession / hand-written loop, wall "
           "time interleaved in one process (the example's malloc settings)",
           "DESIGN §7: within 0.5 % on the Fashion-MNIST model",
           "Fashion-MNIST within 0.5 % of the loop", at_most(1.005)),
    Budget("fashion_pytorch", "Fashion-MNIST step, trainhooks / PyTorch peer, median step of each "
           "program per round (the example's malloc settings)",
           "Fashion-MNIST issue: ≤ 1.0 (as fast as PyTorch)", "Fashion-MNIST ≤ 1.0× PyTorch",
           at_most(1.0)),
    Budget("fashion_malloc", "Fashion-MNIST step, trainhooks with no malloc setting (the library "
           "tunes glibc's malloc itself) / with mallopt by hand (`--keep-freed-memory`, as the example did before), median "
           "`--mode mts` step per round, the two interleaved in each round",
           "issue 30: ≤ 1.02 (no allocator tuning needed)",
           "Fashion-MNIST without allocator tuning ≤ 1.02× with it", at_most(1.02)),
    Budget("fashion_pytorch_default", "Fashion-MNIST step, trainhooks / PyTorch peer, both with no "
           "malloc setting (glibc's defaults; the library tunes its own process), median step of "
           "each program per round", "issue 30: ≤ 0.95× PyTorch, both with glibc's defaults",
           "Fashion-MNIST ≤ 0.95× PyTorch (glibc's defaults)", at_most(0.95)),
    Budget("events_per_second", "event writer: scalar events per second through the writer "
           "(`max_queue` 10, bursts of 100 000 then `flush()`)",
           "DESIGN §7: ≥ 1 M scalar events per second through the writer",
           "≥ 1 M events/s", at_least(1.0)),  # measured in millions
    Budget("add_scalar", "event writer: `add_scalar` on the calling thread, wall ns",
           "DESIGN §7: ≤ 1 µs on the training thread per scalar", "add_scalar ≤ 1 µs",
           at_most(1000)),
    Budget("checkpoint_save", "checkpoint: synchronous save / `dd conv=fsync` of the same size, "
           "rate ratio of neighbouring runs",
           "DESIGN §7: a synchronous save writes at ≥ 70 % of the disk's sequential bandwidth",
           "save ≥ 0.70× dd", at_least(0.70), per_size=True),
    Budget("checkpoint_stall", "checkpoint: asynchronous-save stall (`Saver::snapshot`) / "
           "in-memory copy (`clone()`), neighbouring runs",
           "DESIGN §7: an asynchronous save stalls training for at most twice an in-memory copy "
           "of the state", "async stall ≤ 2× copy", at_most(2.0), per_size=True),
    Budget("checkpoint_restore", "checkpoint: restore / `cat` of the same files, alternating pairs",
           "restore issue: ≤ 1.5× cat", "restore ≤ 1.5× cat", at_most(1.5), per_size=True),
    Budget("board_runs", "board: tag list (`GET /api/runs`), 20 runs × 50 tags, ms",
           "board issue: < 1 s", "board tag list < 1 s", lambda v: v < 1000),
    Budget("board_series", "board: a 100 k-point series downsampled to 2 000 points, ms",
           "board issue: < 0.5 s", "board series < 0.5 s", lambda v: v < 500),
    Budget("board_series_full", "board: the same series in full (`max_points=100000`), ms",
           "board issue: < 0.5 s", "board full series < 0.5 s", lambda v: v < 500),
    # "Bounded" is judged as: memory grows with the points kept and nothing else, 20 B a scalar
    # point (step, wall time, value) plus a fifth for the containers' slack.
    Budget("board_memory", "board: peak memory after reading 100 M scalar points, bytes per point "
           "above the memory before the read (bounded read as ≤ 24: 20 B kept per point, plus a "
           "fifth)", "board issue: bounded", "board memory bounded", at_most(24)),
    Budget("averaging_cnn", "gradient averaging / one allreduce per gradient, 2 processes, the "
           "Fashion-MNIST CNN's 6 gradients", "distributed issue: ≤ 1.05",
           "averaging ≤ 1.05 (CNN)", at_most(1.05)),
    Budget("averaging_large", "gradient averaging / one allreduce per gradient, 2 processes, 40 "
           "gradients of 8.2 M elements", "distributed issue: ≤ 1.05",
           "averaging ≤ 1.05 (large)", at_most(1.05)),
]
BY_KEY = {b.key: b for b in BUDGETS}


@dataclass
class Row:
    metric: str
    budget: str
    measured: str
    verdict: str
    load: str
    label: str = ""  # the budget's name in the generated sentence; empty for reported rows
    after: str = ""  # the budget key this row belongs to, or follows (reported rows)


# ---- Formatting -------------------------------------------------------------------------------


def num(v, digits=3):
    """A figure to `digits` significant digits; larger ones whole, thousands apart by spaces."""
    if abs(v) >= 10 ** digits:
        return f"{round(v):,}".replace(",", " ")
    # '#' keeps trailing zeros (85.0 beside 50.9, not 85), and with them a bare point (100.).
    return f"{v:#.{digits}g}".rstrip(".")


def fixed(decimals):
    return lambda v: f"{v:.{decimals}f}"


def spread(values, fmt=num, unit=""):
    """'median (min–max, n runs)': what every wall-clock row shows."""
    m = statistics.median(values)
    runs = "run" if len(values) == 1 else "runs"
    return f"{fmt(m)}{unit} ({fmt(min(values))}–{fmt(max(values))}, {len(values)} {runs})"


def load_of(loads, *stages):
    """The 1-minute load averages recorded around these stages, as 'low–high'."""
    values = [v for s in stages for v in loads.get(s, [])]
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if lo == hi else f"{lo:.2f}–{hi:.2f}"


def size_label(mb):
    return f"{mb // 1024} GB" if mb >= 1024 and mb % 1024 == 0 else f"{mb} MB"


# ---- Reading the results ----------------------------------------------------------------------


def warn(message):
    print(f"bench_table.py: {message}", file=sys.stderr)


def read_jsonl(path, prefix=""):
    """The JSON objects of a program's output (lines starting with `prefix`, when given).

    A line cut short by a crashed benchmark is skipped with a warning: the table still comes out,
    with that row "not measured".
    """
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        line = line.strip()
        if prefix:
            if not line.startswith(prefix):
                continue
            line = line[len(prefix):]
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                warn(f"{path}: skipped a line that is not JSON ({e})")
    return rows


def read_tsv(results, name):
    """(key, value) pairs of a two-column results file; none when the stage did not run."""
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return []
    return [line.rstrip("\n").partition("\t")[::2] for line in open(path) if line.strip()]


def read_loads(results):
    loads = {}
    for stage, value in read_tsv(results, "load.tsv"):
        loads.setdefault(stage, []).append(float(value))
    return loads


def read_meta(results):
    return dict(read_tsv(results, "meta.tsv"))


def gbench_repetitions(*paths):
    """Google Benchmark's per-repetition entries (not its aggregates), by benchmark name.

    The name drops the suffixes Google Benchmark adds for how it timed (`/manual_time`,
    `/iterations:N`, `/min_time:X`), so that the code below names benchmarks as they are declared.
    """
    reps = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        try:
            benchmarks = json.load(open(path)).get("benchmarks", [])
        except ValueError as e:  # the benchmark died while writing it
            warn(f"{path}: not JSON ({e}); its rows are not measured")
            continue
        for b in benchmarks:
            if b.get("run_type") != "iteration" or b.get("error_occurred"):
                continue
            name = "/".join(p for p in b["run_name"].split("/")
                            if ":" not in p and p not in ("manual_time", "real_time"))
            reps.setdefault(name, []).append(b)
    return reps


def ns(entry, key="cpu_time"):
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[entry.get("time_unit", "ns")]
    return entry[key] * scale


def per_repetition(reps, names, fn):
    """fn applied to the i-th repetition of each named benchmark, for every i all of them have.

    A figure derived from several benchmarks (a difference of two, a fit of four) gets one value
    per repetition this way, hence a range. Google Benchmark runs the repetitions of one benchmark
    back to back, so the i-th ones of two benchmarks are seconds apart, not interleaved: the range
    includes the machine's drift between them.
    """
    if not all(reps.get(n) for n in names):
        return []
    count = min(len(reps[n]) for n in names)
    return [fn(*(reps[n][i] for n in names)) for i in range(count)]


def callgrind_per_step(results):
    """Events per step of each callgrind program: (count at 3N − count at N) / 2N, by name."""
    runs = {}
    path = os.path.join(results, "callgrind.tsv")
    if os.path.exists(path):
        for line in open(path):
            name, steps, counts = line.rstrip("\n").split("\t")
            runs.setdefault(name, {})[int(steps)] = list(map(int, counts.split()))
    per_step = {}
    for name, by_steps in runs.items():
        if len(by_steps) == 2:
            (n1, c1), (n3, c3) = sorted(by_steps.items())
            per_step[name] = [(b - a) / (n3 - n1) for a, b in zip(c1, c3)]
    return per_step


# bench.sh's Fashion-MNIST configurations, in the order each round runs them: no malloc setting
# (the library tunes its process), mallopt by hand (the peer the same through
# GLIBC_TUNABLES), and the library's tuning turned off (TRAINHOOKS_MALLOC_TUNING=0).
FASHION_CONFIGS = ("default", "keep", "off")
FASHION_CONFIG_NAMES = {
    "default": "no setting (the library tunes malloc; the peer and the loop by hand: glibc's defaults)",
    "keep": "mallopt by hand (--keep-freed-memory; the peer: GLIBC_TUNABLES)",
    "off": "TRAINHOOKS_MALLOC_TUNING=0 (glibc's defaults throughout)",
}


def fashion_runs(rows):
    """fashion.jsonl as {config: {round: {program: its JSON object}}}."""
    runs = {}
    for r in rows:
        runs.setdefault(r.get("config"), {}).setdefault(r.get("round"), {})[r.get("program")] = r
    return runs


def per_round(runs, a, b):
    """Median step of (config, program) a over that of b, for each round that ran both."""
    (config_a, program_a), (config_b, program_b) = a, b
    ratios = []
    for rnd, programs in sorted(runs.get(config_a, {}).items()):
        other = runs.get(config_b, {}).get(rnd, {})
        if program_a in programs and program_b in other:
            ratios.append(programs[program_a]["median_ms_per_step"] / other[program_b]["median_ms_per_step"])
    return ratios


# ---- The rows ---------------------------------------------------------------------------------


class Table:
    def __init__(self, results):
        self.results = results
        self.loads = read_loads(results)
        self.meta = read_meta(results)
        self.rows = []
        self.measured = set()  # budget keys with at least one measured row

    def path(self, name):
        return os.path.join(self.results, name)

    def budget(self, key, values, fmt, stages, unit="", extra="", size=None):
        """A budget row from repeated measurements, judged on their median."""
        b = BY_KEY[key]
        metric = b.metric if size is None else f"{b.metric}, {size} state"
        label = b.short if size is None else f"{b.short} at {size}"
        verdict = MET if b.ok(statistics.median(values)) else NOT_MET
        self.rows.append(Row(metric, b.budget, spread(values, fmt, unit) + extra, verdict,
                             load_of(self.loads, *stages), label, key))
        self.measured.add(key)

    def exact(self, key, value, measured, stages):
        """A budget row from callgrind: one deterministic count, no range to give."""
        b = BY_KEY[key]
        verdict = MET if b.ok(value) else NOT_MET
        self.rows.append(Row(b.metric, b.budget, measured, verdict, load_of(self.loads, *stages),
                             b.short, key))
        self.measured.add(key)

    def reported(self, after, metric, measured, stages):
        """A row without a budget of its own, shown after the budget row `after`."""
        self.rows.append(Row(metric, "reported", measured, REPORTED, load_of(self.loads, *stages),
                             after=after))

    def build(self):
        self.session()
        self.callgrind()
        self.fashion()
        self.event_writer()
        self.checkpoint()
        self.board()
        self.distributed()
        # Every budget has its row, measured or not: the documentation never loses one silently.
        for b in BUDGETS:
            if b.key not in self.measured:
                self.rows.append(Row(b.metric, b.budget, "not measured in this run", NOT_MEASURED,
                                     "–", b.short, b.key))
        # In the order of BUDGETS, each reported row after the budget rows it qualifies (a stable
        # sort keeps the order of checkpoint sizes and of the reported rows among themselves).
        order = {b.key: i for i, b in enumerate(BUDGETS)}
        self.rows.sort(key=lambda r: (order[r.after], r.verdict == REPORTED))
        return self

    # Session micro benchmarks and the seed model, wall clock (session_bench).
    def session(self):
        reps = gbench_repetitions(self.path("session_micro.json"), self.path("session_seed.json"))
        stages = ("session_micro",)

        def overheads(d1, d10, s1, s10):
            per_node = ((ns(s10) - ns(d10)) - (ns(s1) - ns(d1))) / 9
            return (ns(s1) - ns(d1)) - per_node, per_node

        fits = per_repetition(reps, ["BM_DirectClosures/1", "BM_DirectClosures/10",
                                     "BM_SessionRunInto/1", "BM_SessionRunInto/10"], overheads)
        if fits:
            self.budget("session_run", [f[0] for f in fits], num, stages)
            self.budget("session_node", [f[1] for f in fits], num, stages)
        per_hook = per_repetition(reps, ["BM_MonitoredStepIdleHooks/0", "BM_MonitoredStepIdleHooks/10"],
                                  lambda h0, h10: (ns(h10) - ns(h0)) / 10)
        if per_hook:
            self.budget("idle_hook", per_hook, num, stages)
        per_stock = per_repetition(reps, ["BM_MonitoredStepIdleStockHooks/0",
                                          "BM_MonitoredStepIdleStockHooks/1"],
                                   lambda h0, h4: (ns(h4) - ns(h0)) / 4)
        if per_stock:
            self.budget("idle_stock_hook", per_stock, num, stages)
        # The instruction ratio beside the wall-clock one, when callgrind ran.
        ips = callgrind_per_step(self.results)
        extra = ""
        if "mts" in ips and "raw_keep" in ips:
            mts, keep = ips["mts"][0], ips["raw_keep"][0]
            extra = f"; instructions {num(mts)} / {num(keep)} = {mts / keep:.4f}"
        seed = [b["ratio"] for b in reps.get("BM_SeedInterleaved/3", [])]
        if seed:
            self.budget("seed_wall", seed, fixed(4), ("session_seed",), extra=extra)
        dropping = [b["ratio"] for b in reps.get("BM_SeedInterleaved/0", [])]
        if dropping:
            extra = ""
            if "mts" in ips and "raw" in ips:
                extra = f"; instructions {num(ips['mts'][0])} / {num(ips['raw'][0])} = " \
                        f"{ips['mts'][0] / ips['raw'][0]:.4f}"
            self.reported("seed_wall",
                          "the same against the loop that drops its loss (`BM_SeedInterleaved/0`)",
                          spread(dropping, fixed(4)) + extra, ("session_seed",))

    # Instructions per step with callgrind (session_bench --seed-steps=N --mode=M): exact.
    def callgrind(self):
        ips = callgrind_per_step(self.results)
        stages = ("callgrind",)
        exact = "callgrind, deterministic: one run, exact"
        if "seed_hook" in ips and "raw_keep" in ips:
            seed, keep = ips["seed_hook"][0], ips["raw_keep"][0]
            self.exact("seed_instructions", seed / keep,
                       f"{seed / keep:.4f}: {num(seed)} / {num(keep)} instructions per step ({exact})",
                       stages)
            if "seed_hook_value" in ips and "raw_keep_value" in ips:
                value, keep_value = ips["seed_hook_value"][0], ips["raw_keep_value"][0]
                self.reported("seed_instructions",
                              "the same with the hook recording the loss's value (`item()`, as the "
                              "seed's MyHook) against the loop recording it too, instructions",
                              f"{value / keep_value:.4f}: {num(value)} / {num(keep_value)} ({exact})",
                              stages)
            if "raw_keep_none" in ips:
                none = ips["raw_keep_none"][0]
                self.reported("seed_instructions",
                              "the same against the loop that also drops its gradients instead of "
                              "zeroing them (`raw_keep_none`, as the library's train op does): the "
                              "library's bookkeeping alone, instructions",
                              f"{seed / none:.4f}: {num(seed)} / {num(none)} ({exact})", stages)
            # Callgrind's event order with --cache-sim=yes --branch-sim=yes.
            names = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm",
                     "Bi", "Bim"]
            if len(ips["seed_hook"]) == len(names) and len(ips["raw_keep"]) == len(names):
                d = dict(zip(names, (m - k for m, k in zip(ips["seed_hook"], ips["raw_keep"]))))
                self.reported("seed_instructions",
                              "added per seed step (with its hook) against the loop keeping its "
                              "loss: L1d read / write misses, branch mispredicts (callgrind's "
                              "simulated caches)",
                              f"{d['D1mr']:+.0f} / {d['D1mw']:+.0f} / {d['Bcm'] + d['Bim']:+.0f}",
                              stages)
        if "mts" in ips and "raw_keep" in ips:
            mts, keep = ips["mts"][0], ips["raw_keep"][0]
            self.reported("seed_instructions",
                          "seed model step with no hook of the program's own (the default hooks "
                          "only, `mts`) / hand-written loop keeping its loss, instructions",
                          f"{mts / keep:.4f}: {num(mts)} / {num(keep)} ({exact})", stages)
            if "raw" in ips:
                self.reported("seed_instructions",
                              "the same against the loop that drops its loss, instructions",
                              f"{mts / ips['raw'][0]:.4f}: {num(mts)} / {num(ips['raw'][0])} ({exact})",
                              stages)
        idle0 = ips.get("idle_hooks_0", [None])[0]
        if idle0 is not None and "idle_hooks_10" in ips:
            idle10 = ips["idle_hooks_10"][0]
            # Rounded, then + 0.0: no "-0.0" when the two counts differ by a rounding error.
            per = round((idle10 - idle0) / 10, 1) + 0.0
            self.exact("idle_hook_instructions", per,
                       f"{per:.1f}: ({num(idle10)} − {num(idle0)}) / 10 ({exact})", stages)
        for mode, what in (("declared_idle_hooks_10", "an idle hook that also declares its calls "
                            "(`calls()` returns `{false, false}`)"),
                           ("called_idle_hooks_10", "a hook whose overridden `before_run` and "
                            "`after_run` do nothing (both called)")):
            if idle0 is not None and mode in ips:
                value = ips[mode][0]
                self.reported("idle_hook_instructions", f"{what}, instructions per step",
                              f"{(value - idle0) / 10:.1f}: ({num(value)} − {num(idle0)}) / 10 ({exact})",
                              stages)
        chain = [ips.get(k, [None])[0] for k in ("chain_1", "chain_100", "direct_1", "direct_100")]
        if None not in chain:
            c1, c100, d1, d100 = chain
            per_node = ((c100 - d100) - (c1 - d1)) / 99
            self.exact("node_instructions", per_node,
                       f"{per_node:.1f}: (({num(c100)} − {num(d100)}) − ({num(c1)} − {num(d1)})) / 99 "
                       f"({exact})", stages)
            if idle0 is not None:
                per_run = (idle0 - d1) - per_node
                self.exact("run_instructions", per_run,
                           f"{per_run:.0f}: ({num(idle0)} − {num(d1)}) − {per_node:.1f} ({exact})",
                           stages)

    # Fashion-MNIST: trainhooks against the PyTorch peer, and the parity run in one process, in
    # bench.sh's three malloc configurations. Every ratio divides two runs of the same round.
    def fashion(self):
        runs = fashion_runs(read_jsonl(self.path("fashion.jsonl")))
        mts, peer = "trainhooks mts", "pytorch"
        stages = {c: f"fashion_{c}" for c in FASHION_CONFIGS}

        def parity(config):
            return [p["parity"]["ratio"] for _, p in sorted(runs.get(config, {}).items()) if "parity" in p]

        def field(config, program, key):
            return next((p[program][key] for p in runs.get(config, {}).values() if program in p), None)

        def conditions(config, programs):
            steps = field(config, mts, "steps")
            threads = sorted({t for t in (field(config, p, "threads") for p in programs) if t is not None})
            return f"; {steps} steps per program per round, {'/'.join(map(str, threads))} threads"

        # The example's settings in every program.
        keep_parity = parity("keep")
        if keep_parity:
            steps_each = field("keep", "parity", "steps_each")
            self.budget("fashion_parity", keep_parity, fixed(4), (stages["keep"],),
                        extra=f"; {steps_each} steps each per run, alternating blocks of 25")
        keep_peer = per_round(runs, ("keep", mts), ("keep", peer))
        if keep_peer:
            self.budget("fashion_pytorch", keep_peer, fixed(3), (stages["keep"],),
                        extra=f"; {field('keep', mts, 'steps')} steps per program per round")
        # No setting (the library's own tuning), and the library's tuning turned off.
        for config, what in (("default", "no malloc setting (the library tunes its process's malloc)"),
                             ("off", "`TRAINHOOKS_MALLOC_TUNING=0` (glibc's default malloc settings)")):
            ratios = parity(config)
            if ratios:
                self.reported("fashion_parity", "Fashion-MNIST step, MonitoredTrainingSession / "
                              f"hand-written loop in one process, {what}", spread(ratios, fixed(4)),
                              (stages[config],))
        tuned = per_round(runs, ("default", mts), ("keep", mts))
        if tuned:
            self.budget("fashion_malloc", tuned, fixed(3), (stages["default"], stages["keep"]),
                        extra=conditions("default", (mts,)))
        gain = per_round(runs, ("off", mts), ("default", mts))
        if gain:
            self.reported("fashion_malloc", "Fashion-MNIST step, trainhooks with "
                          "`TRAINHOOKS_MALLOC_TUNING=0` (glibc's defaults, as before the library "
                          "tuned malloc) / with no malloc setting, median `--mode mts` step per round",
                          spread(gain, fixed(3)), (stages["off"], stages["default"]))
        default_peer = per_round(runs, ("default", mts), ("default", peer))
        if default_peer:
            # Issue 30 states the run behind this figure; the verdict stays the median's, the cell
            # says when the run was shorter than that.
            extra = conditions("default", (mts, peer))
            if len(default_peer) < 3 or (field("default", mts, "steps") or 0) < 300:
                extra += " (fewer than the issue's 3 rounds × 300 steps)"
            self.budget("fashion_pytorch_default", default_peer, fixed(3), (stages["default"],),
                        extra=extra)
        off_peer = per_round(runs, ("off", mts), ("off", peer))
        if off_peer:
            self.reported("fashion_pytorch_default", "Fashion-MNIST step, trainhooks with "
                          "`TRAINHOOKS_MALLOC_TUNING=0` / PyTorch peer, both with glibc's defaults "
                          "(what a program got before the library tuned malloc)",
                          spread(off_peer, fixed(3)), (stages["off"],))

    def event_writer(self):
        reps = gbench_repetitions(self.path("event_writer_bench.json"))
        stages = ("event_writer_bench",)
        rate = [b["items_per_second"] for b in reps.get("BM_WriterThroughput/10", [])]
        if rate:
            self.budget("events_per_second", [r / 1e6 for r in rate], fixed(2), stages, unit=" M/s")
        caller = reps.get("BM_AddScalarCallerCost", [])
        if caller:
            cpu = statistics.median(ns(b) for b in caller)
            self.budget("add_scalar", [ns(b, "real_time") for b in caller], num, stages,
                        extra=f"; CPU {num(cpu)} ns")

    # Disk-bound: ratios of phases measured next to each other, never absolute speeds.
    def checkpoint(self):
        for r in read_jsonl(self.path("checkpoint.txt"), prefix="json: "):
            size = size_label(r["size_mb"])
            stages = ("checkpoint_bench",)
            self.budget("checkpoint_save", r["save_dd"], fixed(2), stages, size=size)
            self.budget("checkpoint_stall", r["stall_copy"], fixed(2), stages, size=size)
            self.budget("checkpoint_restore", r["restore_cat"], fixed(2), stages, size=size)
            # The floor of the restore as built (its variables take the memory read into):
            # read(2) into new memory, no copy.
            if "fresh_read_cat" in r:
                self.reported("checkpoint_restore",
                              f"checkpoint: the floor of an all-or-nothing restore (read(2) into "
                              f"new memory, no copy) / `cat`, {size} state",
                              spread(r["fresh_read_cat"], fixed(2)), stages)
            # The floor of the copying design it replaced, kept for comparison.
            if "floor_cat" in r:
                self.reported("checkpoint_restore",
                              f"checkpoint: read(2) into mapped memory, then one copy (the floor "
                              f"of a restore that copies) / `cat`, {size} state",
                              spread(r["floor_cat"], fixed(2)), stages)

    def board(self):
        rows = read_jsonl(self.path("board.txt"), prefix="json: ")
        if not rows:
            return
        stages = ("board_bench",)
        self.budget("board_runs", [r["runs_ms"] for r in rows], num, stages)
        self.budget("board_series", [r["series_2000_ms"] for r in rows], num, stages)
        self.budget("board_series_full", [r["series_100k_ms"] for r in rows], num, stages)
        per_point = [(r["hwm_mib"] - r["before_mib"]) * 2 ** 20 / r["points"] for r in rows]
        self.budget("board_memory", per_point, fixed(1), stages, unit=" B",
                    extra=f"; peak {num(statistics.median(r['hwm_mib'] for r in rows))} MiB")
        self.reported("board_memory", "board: the first read of the 2.5 GB log directory, s",
                      spread([r["load_s"] for r in rows]), stages)

    def distributed(self):
        rows = read_jsonl(self.path("distributed.jsonl"))
        rounds = self.meta.get("distributed_rounds", "?")
        stages = ("distributed_bench",)

        # distributed_bench prints each figure's median and range over its rounds.
        def summary(d, fmt=num, n=rounds):
            return f"{fmt(d['median'])} ({fmt(d['min'])}–{fmt(d['max'])}, {n} runs)"

        by = {r["bench"]: r for r in rows if r["bench"] != "averaging"}
        throughput = {(r["processes"], r["threads_each"]): r for r in rows if r["bench"] == "throughput"}
        sets = {"fashion_mnist_cnn": ("averaging_cnn", "the Fashion-MNIST CNN's gradients"),
                "large": ("averaging_large", "the 40 gradients of 8.2 M elements")}
        for r in rows:
            if r["bench"] != "averaging" or r["gradients"] not in sets:
                continue
            key, what = sets[r["gradients"]]
            b = BY_KEY[key]
            ratio = r["ratio_per_tensor"]
            self.rows.append(Row(b.metric, b.budget, summary(ratio, fixed(3)),
                                 MET if b.ok(ratio["median"]) else NOT_MET,
                                 load_of(self.loads, *stages), b.short, key))
            self.measured.add(key)
            self.reported(key, f"gradient averaging / one allreduce of all the elements (the least "
                          f"any averaging does), {what}", summary(r["ratio_one_flat"], fixed(3)), stages)
        if "stop_agreement" in by:
            self.reported("averaging_large", "agreed stop decision per run, 2 processes, µs",
                          summary(by["stop_agreement"]["us"]), stages)
        one = max((k for k in throughput if k[0] == 1), default=None, key=lambda k: k[1])
        two = next((k for k in throughput if k[0] == 2), None)
        if one and two:
            ratio = throughput[two]["examples_per_s"]["median"] / throughput[one]["examples_per_s"]["median"]
            self.reported("averaging_large", "CNN training throughput, 2 processes / 1 process on all "
                          "cores, same global batch (medians of 3 runs each)", f"{ratio:.3f}", stages)


# ---- Markdown ---------------------------------------------------------------------------------


def cell(text):
    return text.replace("|", "\\|")


def sentence(rows):
    """The one sentence saying which budgets are met and which are not."""
    groups = {MET: [], NOT_MET: [], NOT_MEASURED: []}
    for r in rows:
        if r.verdict in groups:
            groups[r.verdict].append(r.label)
    parts = [f"**met**: {'; '.join(groups[MET]) or 'none'}",
             f"**not met**: {'; '.join(groups[NOT_MET]) or 'none'}"]
    if groups[NOT_MEASURED]:
        parts.append(f"**not measured in this run**: {'; '.join(groups[NOT_MEASURED])}")
    return "On this machine, in this run, " + "; ".join(parts) + "."


def render(table):
    meta, loads = table.meta, table.loads
    run = loads.get("run", [])
    start = f"{run[0]:.2f}" if run else "?"
    end = f"{run[-1]:.2f}" if len(run) > 1 else "?"
    lines = [
        HEADING,
        "",
        "Generated by `bash scripts/bench.sh --update-docs` (`make bench-docs`) from the run's "
        "`BUILD_DIR/bench/budgets.md`: do not edit by hand. Wall-clock rows give the median, the "
        "range and the number of runs; instruction rows are callgrind counts, the same in every "
        "run; checkpoint rows are ratios of phases measured next to each other on the same disk, "
        "not disk speeds. The load column is the 1-minute load average before and after the "
        "stage that measured the row.",
        "",
        f"Measured {meta.get('date', '?')} at `{meta.get('commit', '?')}`; {meta.get('cores', '?')} "
        f"cores, {meta.get('cpu', '?')}; load average (1 min) {start} at the start, {end} at the end. "
        f"Settings: {meta.get('settings', '?')}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in table.rows:
        verdict = f"**{r.verdict}**" if r.verdict == NOT_MET else r.verdict
        lines.append("| " + " | ".join(cell(c) for c in (r.metric, r.budget, r.measured, verdict,
                                                          r.load)) + " |")
    lines += ["", sentence(table.rows)]
    return "\n".join(lines) + "\n"


def parse_section(text):
    """The generated section of a document: (rows, sentence), or raises ValueError saying why."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"needs exactly one {BEGIN} and one {END}")
    before, rest = text.split(BEGIN)
    body, _ = rest.split(END)
    # At the very top: nothing but the title before it.
    if [l for l in before.splitlines() if l.startswith("## ")]:
        raise ValueError("the budgets section must come first, right after the title")
    lines = [l for l in body.strip().splitlines()]
    if not lines or lines[0] != HEADING:
        raise ValueError(f"the section must start with '{HEADING}'")
    if not any(l.startswith("Measured ") and " at `" in l for l in lines):
        raise ValueError("the 'Measured <date> at `<commit>`' line is missing")
    header = "| " + " | ".join(COLUMNS) + " |"
    if header not in lines:
        raise ValueError(f"the table header '{header}' is missing")
    i = lines.index(header) + 2
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", lines[i].strip()[1:-1])]
        if len(cells) != len(COLUMNS):
            raise ValueError(f"row of {len(cells)} cells, not {len(COLUMNS)}: {lines[i]}")
        verdict = cells[3].strip("*")
        if verdict not in VERDICTS:
            raise ValueError(f"verdict '{cells[3]}' is none of {', '.join(VERDICTS)}: {lines[i]}")
        rows.append(Row(cells[0], cells[1], cells[2], verdict, cells[4]))
        i += 1
    said = [l for l in lines[i:] if l.strip()]
    if not said:
        raise ValueError("the sentence saying which budgets are met is missing")
    return rows, said[0]


def check(text):
    """Problems with a document's generated section; empty when it is whole."""
    try:
        rows, said = parse_section(text)
    except ValueError as e:
        return [str(e)]
    problems = []
    for b in BUDGETS:
        mine = [r for r in rows if r.metric == b.metric or (b.per_size and r.metric.startswith(b.metric + ", "))]
        if not mine:
            problems.append(f"no row for the budget '{b.key}': {b.metric}")
            continue
        for r in mine:
            if r.budget != b.budget:
                problems.append(f"'{b.key}' states its budget as '{r.budget}', not '{b.budget}'")
            if r.verdict == REPORTED:
                problems.append(f"'{b.key}' is a budget: its verdict cannot be '{REPORTED}'")
            size = r.metric[len(b.metric) + 2:-len(" state")] if r.metric != b.metric else None
            r.label = b.short if not size else f"{b.short} at {size}"
    for r in rows:
        if not r.label and r.verdict != REPORTED:
            problems.append(f"a row that is no known budget has the verdict '{r.verdict}': {r.metric}")
    if not problems and said != sentence(rows):
        problems.append(f"the sentence does not match the table; expected:\n  {sentence(rows)}")
    return problems


def update_docs(doc, section):
    """Puts the section between the markers, adding them after the title when missing."""
    text = open(doc).read()
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        text = head + block + tail
    else:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{block}\n{rest}"
    with open(doc, "w") as f:
        f.write(text)


# ---- Stage summaries, printed as bench.sh goes --------------------------------------------------


def summary(results, stage):
    if stage == "session":
        reps = gbench_repetitions(os.path.join(results, "session_micro.json"),
                                  os.path.join(results, "session_seed.json"))
        med = lambda name: statistics.median(ns(b) for b in reps[name]) if reps.get(name) else None
        print("== Core results (CPU ns per run, medians of the repetitions) ==")
        print(f"{'nodes':>5} {'direct':>10} {'run_into':>10} {'run':>10}")
        for n in (1, 10, 100):
            d, s, r = (med(f"{p}/{n}") for p in ("BM_DirectClosures", "BM_SessionRunInto", "BM_SessionRun"))
            if None not in (d, s, r):
                print(f"{n:>5} {d:>10.1f} {s:>10.1f} {r:>10.1f}")
        for arg, what in ((3, "against the loop keeping its loss"), (0, "against the loop dropping its loss"),
                          (1, "run_into with reused feeds"), (2, "a bare Session")):
            b = reps.get(f"BM_SeedInterleaved/{arg}")
            if b:
                print(f"Seed model, {what}: wall ratio {spread([x['ratio'] for x in b], fixed(4))}, "
                      f"CPU ratio {spread([x['cpu_ratio'] for x in b], fixed(4))}; "
                      f"{statistics.median(x['mts_ns'] for x in b) / 1e3:.2f} against "
                      f"{statistics.median(x['raw_ns'] for x in b) / 1e3:.2f} µs per step")
    elif stage == "callgrind":
        ips = callgrind_per_step(results)
        for name, v in ips.items():
            print(f"  {name:>24}: {v[0]:,.1f} instructions per step")
    elif stage == "fashion" or stage.startswith("fashion_"):
        # "fashion": every configuration and the ratios between them; "fashion_<config>": one.
        runs = fashion_runs(read_jsonl(os.path.join(results, "fashion.jsonl")))
        configs = FASHION_CONFIGS if stage == "fashion" else (stage.split("_", 1)[1],)
        names = {"pytorch": "PyTorch (Python)", "trainhooks mts": "trainhooks MTS", "trainhooks raw": "LibTorch by hand"}
        for config in configs:
            rounds = [p for _, p in sorted(runs.get(config, {}).items())]
            if not rounds:
                continue
            print(f"  malloc {config}: {FASHION_CONFIG_NAMES.get(config, config)}")
            for program, name in names.items():
                v = [p[program]["median_ms_per_step"] for p in rounds if program in p]
                if v:
                    print(f"  {name:>17}: {spread(v, fixed(2), ' ms')} per step")
            parity = [p["parity"]["ratio"] for p in rounds if "parity" in p]
            if parity:
                print("  MonitoredTrainingSession / hand-written loop in one process: "
                      f"{spread(parity, fixed(4))}")
        if stage == "fashion":
            mts, peer = "trainhooks mts", "pytorch"
            ratios = (
                ("no setting / mallopt by hand (goal ≤ 1.02)", ("default", mts), ("keep", mts)),
                ("/ PyTorch, both no setting (goal ≤ 0.95)", ("default", mts), ("default", peer)),
                ("/ PyTorch, the example's settings (goal ≤ 1.0)", ("keep", mts), ("keep", peer)),
                ("TRAINHOOKS_MALLOC_TUNING=0 / no setting", ("off", mts), ("default", mts)),
                ("TRAINHOOKS_MALLOC_TUNING=0 / PyTorch", ("off", mts), ("off", peer)))
            for what, a, b in ratios:
                v = per_round(runs, a, b)
                if v:
                    print(f"  trainhooks MTS {what}: {spread(v, fixed(3))}")
    elif stage == "distributed":
        for r in read_jsonl(os.path.join(results, "distributed.jsonl")):
            print("  " + json.dumps(r))
    else:
        raise SystemExit(f"bench_table.py: no summary for stage '{stage}'")


# ---- Self-test --------------------------------------------------------------------------------


def self_test():
    """The generator's section passes the check, and the check catches what it is for."""
    with tempfile.TemporaryDirectory() as results:
        with open(os.path.join(results, "meta.tsv"), "w") as f:
            f.write("date\t2026-01-01 00:00 UTC\ncommit\tabc1234\ncores\t2\ncpu\ttest\nsettings\tnone\n")
        with open(os.path.join(results, "checkpoint.txt"), "w") as f:
            f.write('json: {"size_mb": 1024, "save_dd": [1, 1.1, 0.5], "stall_copy": [1, 1, 1], '
                    '"restore_cat": [2, 3, 4]}\n')
        # Three rounds of bench.sh's Fashion-MNIST configurations, as its JSON lines come out:
        # trainhooks 1.02× itself with mallopt by hand (met) and 0.97× PyTorch (not met).
        steps = {"default": (17.3, 17.4, 17.5), "keep": (17.0, 17.1, 17.2), "off": (19.0, 19.2, 19.4)}
        peer = {"default": 18.0, "keep": 18.2, "off": 18.1}
        parity = {"default": 0.999, "keep": 1.001, "off": 1.02}
        with open(os.path.join(results, "fashion.jsonl"), "w") as f:
            for rnd in (1, 2, 3):
                for config in FASHION_CONFIGS:
                    tag = {"config": config, "round": rnd}
                    lines = [{"program": "pytorch", "event": "done", "steps": 300,
                              "median_ms_per_step": peer[config], "threads": 2},
                             {"program": "trainhooks mts", "steps": 300,
                              "median_ms_per_step": steps[config][rnd - 1], "threads": 2}]
                    if config != "off":
                        lines.append({"program": "trainhooks raw", "steps": 300,
                                      "median_ms_per_step": 17.0, "threads": 2})
                    lines.append({"program": "parity", "ratio": parity[config], "steps_each": 500})
                    f.writelines(json.dumps({**tag, **line}) + "\n" for line in lines)
        with open(os.path.join(results, "load.tsv"), "w") as f:
            f.write("run\t0.50\nfashion_default\t1.00\nfashion_keep\t2.50\nfashion_off\t3.00\n"
                    "fashion_default\t1.50\nrun\t0.75\n")
        table = Table(results).build()
        section = render(table)
        by_key = {}
        for r in table.rows:
            by_key.setdefault(r.after, []).append(r)
        malloc, *gain = by_key["fashion_malloc"]
        assert (malloc.verdict, malloc.load) == (MET, "1.00–2.50"), malloc
        assert malloc.measured.startswith("1.018 (1.017–1.018, 3 runs); 300 steps"), malloc.measured
        assert "fewer than" not in malloc.measured
        assert [r.verdict for r in gain] == [REPORTED] and gain[0].measured.startswith("1.10"), gain
        default_peer, off_peer = by_key["fashion_pytorch_default"]
        assert default_peer.verdict == NOT_MET and default_peer.measured.startswith("0.967"), default_peer
        assert (off_peer.verdict, off_peer.load) == (REPORTED, "3.00"), off_peer
        assert [r.verdict for r in by_key["fashion_parity"]] == [MET, REPORTED, REPORTED]
        assert by_key["fashion_pytorch"][0].verdict == MET and len(by_key["fashion_pytorch"]) == 1
        said = sentence(table.rows)
        assert "Fashion-MNIST without allocator tuning ≤ 1.02× with it" in said.split("**not met**")[0]
        assert "Fashion-MNIST ≤ 0.95× PyTorch (glibc's defaults)" in said.split("**not met**")[1]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            summary(results, "fashion")
            summary(results, "fashion_off")
        assert "trainhooks MTS no setting / mallopt by hand (goal ≤ 1.02): 1.018" in out.getvalue()
        assert out.getvalue().count("malloc off:") == 2, out.getvalue()
        doc = f"# Benchmarks\n\n{BEGIN}\n{section}{END}\n\n## Other\n"
        assert check(doc) == [], check(doc)
        assert "restore ≤ 1.5× cat at 1 GB" in sentence(table.rows).split("**not met**")[1]
        assert "not measured in this run" in section
        # A budget row removed, a budget reworded, a sentence out of date, markers missing.
        row = next(l for l in doc.splitlines() if l.startswith("| " + BUDGETS[0].metric))
        assert check(doc.replace(row + "\n", ""))
        assert check(doc.replace(BUDGETS[1].budget, "≤ 1 ms", 1))
        assert check(doc.replace("**met**:", "**met**: everything;"))
        assert check(doc.replace(BEGIN, ""))
        assert check("# Benchmarks\n\n## Other\n" + doc.split("\n", 1)[1])
    print("bench_table.py self-test: ok")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--results", metavar="DIR", help="bench.sh's raw results")
    mode.add_argument("--update-docs", metavar="DOC", help="replace DOC's generated section")
    mode.add_argument("--check", metavar="DOC", help="fail unless DOC's generated section is whole")
    mode.add_argument("--self-test", action="store_true")
    p.add_argument("--markdown", metavar="FILE", help="the section as Markdown (written or read)")
    p.add_argument("--summary", metavar="STAGE", help="with --results: details of one stage")
    a = p.parse_args()
    if a.self_test:
        self_test()
    elif a.check:
        problems = check(open(a.check).read())
        for problem in problems:
            print(f"{a.check}: {problem}", file=sys.stderr)
        if problems:
            print("Regenerate it: bash scripts/bench.sh --update-docs [BUILD_DIR] (make bench-docs)",
                  file=sys.stderr)
            return 1
        print(f"{a.check}: the budgets section lists all {len(BUDGETS)} budgets")
    elif a.update_docs:
        if not a.markdown:
            p.error("--update-docs needs --markdown FILE (bench.sh's budgets.md)")
        update_docs(a.update_docs, open(a.markdown).read())
        problems = check(open(a.update_docs).read())
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
    elif a.summary:
        summary(a.results, a.summary)
    else:
        section = render(Table(a.results).build())
        print(section)
        if a.markdown:
            with open(a.markdown, "w") as f:
                f.write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
