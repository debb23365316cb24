"""A rank of a job that needs no process group: 40 steps of a little Python work, each marked
with ``doc.step()`` (the 8-rank test of records written side by side). No torch: eight ranks
importing it and the compiler its optimizers load would take ~40 s of CPU on 2 cores."""

import stepdoctor

if __name__ == "__main__":
    with stepdoctor.watch(report=False) as doc:
        for _ in range(40):
            with doc.phase("forward"):
                sum(i * i for i in range(20_000))
            doc.step(batch_size=16)
