"""dl4j-setup: what a DL4J log's own lines say is set up wrong or cannot be told.

Detects, from a DL4J training log: cuDNN missing on the CUDA backend (DL4J logs "cuDNN not
found" when a layer that cuDNN accelerates runs without it: the guide's step 2); ND4J's
periodic System.gc() on while workspaces are on (the guide's step 4: not needed then); and
an ETL that reads 0 ms on every iteration, which some DL4J versions print whatever the wait
(a data-bound job then looks compute-bound: the guide's step 3 measures ETL with it); and on
the CPU backend, ND4J's OpenMP threads against the cores it logged (the guide's step 13:
ND4J's default is one a physical core; more threads than the machine's logical cores only
take turns on them, one thread leaves the others idle).
Evidence: the lines' values. Fix: the guide's.
"""

from __future__ import annotations

from stepdoctor.model import Evidence, Finding, Fix, Severity, Speedup
from stepdoctor.rules.context import RuleContext
from stepdoctor.rules.registry import rule

__all__ = ["FEW_THREADS_CORES", "MIN_ITERATIONS", "dl4j_setup"]

#: Iterations needed to say ETL never read above 0 (as the step-outlier rules' 20 steps).
MIN_ITERATIONS = 20
#: One OpenMP thread is worth saying from this many logged cores (ND4J's default there would be
#: at least 2, one a physical core: the guide's step 13).
FEW_THREADS_CORES = 4


@rule(id="dl4j-setup", title="DL4J set-up", requires=("dl4j",), scope="logs")
def dl4j_setup(ctx: RuleContext) -> list[Finding]:
    """The set-up problems a DL4J log shows."""
    record = ctx.record
    findings = []
    backend = str(record.env_value("nd4j.backend") or "")
    if record.env_value("dl4j.cudnn_missing") is True and backend.upper() == "CUDA":
        findings.append(
            Finding(
                rule="dl4j-setup",
                severity=Severity.WARNING,
                title="cuDNN is not used on the GPU",
                explanation=(
                    "DL4J logged that cuDNN was not found: its convolution, subsampling, "
                    "batch-norm, LRN and LSTM layers run DL4J's own, slower, implementations "
                    "on the GPU."
                ),
                evidence=(
                    Evidence(metric="ND4J backend", value=backend, source="log"),
                    Evidence(metric="cuDNN", value="not found", source="log"),
                ),
                speedup=Speedup.none("cuDNN's gain depends on the layers"),
                fix=Fix(
                    summary=(
                        "Add the deeplearning4j-cuda-x.x dependency matching your CUDA version "
                        "(and cuDNN on the machine); the network's configuration stays as it is."
                    ),
                    snippet=(
                        "<dependency><groupId>org.deeplearning4j</groupId>"
                        "<artifactId>deeplearning4j-cuda-10.2</artifactId></dependency>"
                    ),
                ),
            )
        )
    workspace = str(record.env_value("dl4j.workspace_training") or "")
    if record.env_value("nd4j.periodic_gc") is True and workspace not in ("", "NONE"):
        every = record.env_value("nd4j.periodic_gc_ms")
        window = f"every {every} ms" if every is not None else "periodically"
        with_log = bool(record.jvm_gc)
        findings.append(
            Finding(
                rule="dl4j-setup",
                severity=Severity.INFO,
                title=f"ND4J calls System.gc() {window} with workspaces on",
                explanation=(
                    "Periodic GC frees off-heap arrays that nothing else frees; workspaces "
                    f"(training: {workspace}) already do. Each call is a full collection."
                    + (
                        " The GC log's full collections show what they cost."
                        if with_log
                        else " A GC log of the job (-Xlog:gc, or -verbose:gc on JDK 8) "
                        "would show what they cost."
                    )
                ),
                evidence=(
                    Evidence(
                        metric="periodic GC window",
                        value=every if every is not None else "not logged",
                        unit="ms" if every is not None else "",
                        source="log",
                    ),
                    Evidence(metric="training workspace mode", value=workspace, source="log"),
                ),
                speedup=Speedup.none("its cost is in the GC log's full collections"),
                fix=Fix(
                    summary="Turn ND4J's periodic GC off, or call it less often.",
                    snippet=(
                        "Nd4j.getMemoryManager().togglePeriodicGc(false);\n"
                        "// or: Nd4j.getMemoryManager().setAutoGcWindow(10000);"
                    ),
                ),
            )
        )
    findings.extend(_threads(ctx, backend))
    etl = [s.phase_ns.get("data_wait") for s in ctx.steps]
    measured = [v for v in etl if v is not None]
    if len(measured) >= MIN_ITERATIONS and not any(measured):
        findings.append(
            Finding(
                rule="dl4j-setup",
                severity=Severity.INFO,
                title=f"ETL reads 0 ms on all {len(measured)} iterations: it cannot be told",
                explanation=(
                    "PerformanceListener printed ETL: 0 ms on every iteration. Either the "
                    "iterator's asynchronous prefetch hides every wait, or this DL4J version "
                    "does not measure it (some print 0 whatever the wait): a data-bound job "
                    "would look compute-bound."
                ),
                evidence=(
                    Evidence(
                        metric="iterations with ETL above 0",
                        value=0,
                        unit="count",
                        source="PerformanceListener",
                    ),
                ),
                speedup=Speedup.none("this says what cannot be known"),
                fix=Fix(
                    summary=(
                        "Time the data alone: iterate the DataSetIterator without fit() "
                        "(iterator.next() in a loop) and compare its rate with the "
                        "iterations' rate."
                    ),
                    snippet=(
                        "long t = System.nanoTime(); int n = 0;\n"
                        "while (it.hasNext() && n < 200) { it.next(); n++; }\n"
                        'System.out.println((System.nanoTime() - t) / 1e6 / n + " ms a batch");'
                    ),
                ),
            )
        )
    return findings


def _threads(ctx: RuleContext, backend: str) -> list[Finding]:
    """ND4J's OpenMP threads on the CPU backend against the cores ND4J logged."""
    record = ctx.record
    threads, cores = record.env_value("nd4j.omp_threads"), record.env_value("nd4j.cores")
    if backend.upper() != "CPU" or not isinstance(threads, int) or not isinstance(cores, int):
        return []
    if cores < 1 or threads < 1:
        return []
    evidence = (
        Evidence(metric="ND4J's OpenMP threads (NativeOps)", value=threads, source="log"),
        Evidence(metric="cores ND4J saw", value=cores, source="log"),
    )
    if threads > cores:
        return [
            Finding(
                rule="dl4j-setup",
                severity=Severity.WARNING,
                title=f"ND4J runs {threads} OpenMP threads on {cores} cores",
                explanation=(
                    "More threads than the machine has cores take turns on them: each op's "
                    "threads wait for one another and thrash the caches (the DL4J guide's step "
                    "13). ND4J's default is one thread a physical core; OMP_NUM_THREADS set "
                    "higher overrides it."
                ),
                evidence=evidence,
                speedup=Speedup.none("measure the job with OMP_NUM_THREADS at the core count"),
                fix=Fix(
                    summary=(
                        "Set OMP_NUM_THREADS to the number of physical cores at most (fewer "
                        "still when several networks or other busy processes share them), or "
                        "unset it for ND4J's default."
                    ),
                    snippet=f"OMP_NUM_THREADS={max(1, cores // 2)} java ...",
                ),
            )
        ]
    if threads == 1 and cores >= FEW_THREADS_CORES:
        return [
            Finding(
                rule="dl4j-setup",
                severity=Severity.INFO,
                title=f"ND4J computes on 1 OpenMP thread of {cores} cores",
                explanation=(
                    "Each op runs on one core while the others idle, unless one network a core "
                    "runs side by side on purpose (the guide's step 13): OMP_NUM_THREADS=1 "
                    "(or ND4J's own setting) holds it there."
                ),
                evidence=evidence,
                speedup=Speedup.none("measure the job with ND4J's default threads"),
                fix=Fix(
                    summary=(
                        "Unset OMP_NUM_THREADS (ND4J then uses one thread a physical core), "
                        "unless several networks train or infer side by side."
                    ),
                    snippet="unset OMP_NUM_THREADS",
                ),
            )
        ]
    return []
